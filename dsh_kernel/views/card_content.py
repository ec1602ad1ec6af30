"""What a tool card says: its icon, title, status line, argument and result sections, rich outputs.

A pure function of a ``ToolCardModel`` and the tool's definition (for its presenters), shared by the
live card (``views.tool_card``) and the static rendering (``views.render``), so both say the same.

A tool card's content comes from the tool's presenters (``dsh_kernel.tools.presentation``; SPINE
§4.6) when a definition is known, else from the generic fallbacks: arguments as highlighted code
(a ``code`` field, or a string ``rawInput`` of an ``execute`` call, is Python) or JSON; the result as
text, or — when ``meta["outputs"]`` holds nbformat display outputs (the ``python`` tool's tables and
plots) — as those outputs. Long result texts are cut at ``MAX_SECTION_CHARS`` with a visible marker.
A call the model wrote as text and the kernel recovered carries the note ``recovered from text``.

The arguments are never cut: they are what runs, and an approval card must show every character of
what it asks the person to allow. (The live card keeps its size by scrolling its Details box; see
``views.tool_card``.)
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final, TypeAlias

from dsh_kernel.jsonvalue import JsonObject, JsonValue
from dsh_kernel.llm.types import TextBlock
from dsh_kernel.runtime.types import read_python_meta
from dsh_kernel.tools.presentation import ToolResultInfo, call_view, result_view
from dsh_kernel.tools.types import ToolDefinition
from dsh_kernel.transcript.model import CardStatus, ToolCardModel
from dsh_kernel.views.format import duration

ToolLookup: TypeAlias = Callable[[str], ToolDefinition | None]
"""The kernel's registry lookup by tool name (for presenters); ``None`` for unknown tools."""


def lookup(tools: ToolLookup | None, name: str) -> ToolDefinition | None:
    """The tool's definition for its presenters; a failing lookup only costs the presenters."""
    if tools is None:
        return None
    try:
        return tools(name)
    except Exception:
        return None


MAX_SECTION_CHARS: Final = 20_000
"""Characters of one *result* section a card shows; arguments are never cut."""
ASK_USER_TOOL: Final = "ask_user"
RECOVERED_NOTE: Final = "recovered from text"
RECOVERED_TITLE: Final = (
    "The model wrote this call as text and the server passed it on as text; the kernel read it "
    "and ran it as a tool call."
)

STATUS_LABELS: Final[dict[CardStatus, str]] = {
    "pending": "pending",
    "waiting-approval": "waiting for approval",
    "running": "running",
    "done": "done",
    "failed": "failed",
    "denied": "denied",
    "aborted": "aborted",
}
KIND_ICONS: Final[dict[str, str]] = {
    "read": "📖",
    "edit": "✏️",
    "delete": "🗑️",
    "move": "📦",
    "search": "🔍",
    "execute": "💻",  # not ▶: at the head of a card that folds, it reads as a disclosure triangle
    "fetch": "🌐",
    "other": "🔧",
}
APPROVAL_LABELS: Final[dict[str, str]] = {
    "allowed-once": "allowed once",
    "allowed-always": "allowed for this session",
    "rejected": "denied",
    "cancelled": "cancelled",
    "unavailable": "denied: no one could answer",
    "timeout": "denied: no answer in time",
}


@dataclass(frozen=True, slots=True, kw_only=True)
class Section:
    """One labelled part of a card (arguments, result, outputs) as text."""

    label: str
    text: str
    lang: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class CardView:
    """What a tool card says, ready to draw: icon, title, status label, sections."""

    icon: str
    title: str
    name: str
    status: str
    duration: str | None
    args: tuple[Section, ...]
    result: tuple[Section, ...]
    outputs: tuple[JsonObject, ...]
    note: str | None = None
    """A small mark beside the status (``RECOVERED_NOTE`` for a call recovered from text)."""


# --- tool cards ----------------------------------------------------------------------------------


def _cap(text: str) -> str:
    if len(text) <= MAX_SECTION_CHARS:
        return text
    rest = len(text) - MAX_SECTION_CHARS
    return f"{text[:MAX_SECTION_CHARS]}\n… ({rest:,} more characters not shown)"


def _json_text(value: JsonValue) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False)


def _args_sections(
    card: ToolCardModel, defn: ToolDefinition | None
) -> tuple[str, str, tuple[Section, ...]]:
    """Returns (kind, title, sections) for the arguments."""
    if card.status == "pending":
        return "other", card.name, (Section(label="Arguments", text=card.arguments, lang="json"),)
    view = call_view(defn, card.name, card.arguments)
    kind = view.kind or "other"
    raw = view.raw_input
    sections: list[Section] = []
    if isinstance(raw, str):
        lang = "python" if kind == "execute" else ""
        sections.append(Section(label="Code" if lang else "Input", text=raw, lang=lang))
    elif isinstance(raw, dict) and isinstance(raw.get("code"), str):
        code = raw["code"]
        assert isinstance(code, str)
        sections.append(Section(label="Code", text=code, lang="python"))
        rest = {k: v for k, v in raw.items() if k != "code"}
        if rest:
            sections.append(Section(label="Arguments", text=_json_text(rest), lang="json"))
        kind = "execute" if kind == "other" else kind
    elif raw is not None and raw != {}:
        sections.append(Section(label="Arguments", text=_json_text(raw), lang="json"))
    if view.content:
        sections.append(Section(label="", text=view.content))
    if view.locations:
        where = "\n".join(
            f"{loc.path}:{loc.line}" if loc.line is not None else loc.path for loc in view.locations
        )
        sections.append(Section(label="Locations", text=where))
    return kind, view.title, tuple(sections)


def _result_sections(
    card: ToolCardModel, defn: ToolDefinition | None
) -> tuple[str | None, tuple[Section, ...]]:
    """Returns (title override, sections) for a settled result."""
    text = card.result_text or ""
    if card.is_error:
        code = f" ({card.error_code})" if card.error_code else ""
        return None, (Section(label=f"Error{code}", text=text),)
    info = ToolResultInfo(content=(TextBlock(text=text),), is_error=False, meta=card.meta)
    view = result_view(defn, card.name, card.arguments, info)
    body = view.content if view.content is not None else text
    return view.title, (Section(label="Result", text=body),) if body else ()


def card_view(card: ToolCardModel, defn: ToolDefinition | None = None) -> CardView:
    """What ``card`` says, with the tool's presenters from ``defn`` when it has any."""
    kind, title, args = _args_sections(card, defn)
    result: tuple[Section, ...] = ()
    outputs: tuple[JsonObject, ...] = ()
    if card.result_text is not None:
        override, result = _result_sections(card, defn)
        title = override or title
        outputs = display_outputs(card.meta)
        if outputs:
            # The outputs are the result; a failure stays visible unless they already show it.
            shows_error = any(o.get("output_type") == "error" for o in outputs)
            result = result if card.is_error and not shows_error else ()
    icon = "❓" if card.name == ASK_USER_TOOL else KIND_ICONS.get(kind, KIND_ICONS["other"])
    status = STATUS_LABELS[card.status]
    outcome = card.approval_outcome
    if outcome is not None and (
        (card.status in ("running", "done") and outcome.startswith("allowed"))
        or (card.status == "denied" and outcome != "rejected")
    ):
        label = APPROVAL_LABELS.get(outcome, outcome).removeprefix(f"{status}: ")
        status = f"{status} · {label}"  # "denied · no one could answer", not "denied: …" twice
    return CardView(
        icon=icon,
        title=title,
        name=card.name,
        status=status,
        duration=duration(card.duration_ms),
        args=args,
        result=tuple(Section(label=s.label, text=_cap(s.text), lang=s.lang) for s in result),
        outputs=outputs,
        note=RECOVERED_NOTE if card.recovered else None,
    )


# --- rich outputs --------------------------------------------------------------------------------


def _text(value: JsonValue) -> str:
    if isinstance(value, list):
        return "".join(v for v in value if isinstance(v, str))
    return value if isinstance(value, str) else ""


def display_outputs(meta: JsonValue) -> tuple[JsonObject, ...]:
    """The nbformat outputs a result's ``meta`` describes, normalised (multi-line strings joined,
    unknown kinds dropped) so an ``Output`` widget and the static renderer can use them as they are.

    The meta is the ``python`` tool's card contract (``runtime.types.PythonMeta``, read with
    ``read_python_meta``): its streams become ``stream`` outputs before the rich ``outputs`` and its
    ``failure`` an ``error`` output after them. Another tool's meta has none of these: no outputs.
    """
    card = read_python_meta(meta)
    if card is None:
        return ()
    out: list[JsonObject] = [
        {"output_type": "stream", "name": name, "text": text}
        for name, text in (("stdout", card["stdout"]), ("stderr", card["stderr"]))
        if text
    ]
    out += [item for o in card["outputs"] if (item := _output(o)) is not None]
    failure = card["failure"]
    if failure is not None:
        tb = failure["traceback"]
        out.append(
            {
                "output_type": "error",
                "ename": failure["ename"] or failure["kind"] or "Error",
                "evalue": failure["message"],
                "traceback": [tb] if tb else [],
            }
        )
    return tuple(out)


def _output(o: JsonObject) -> JsonObject | None:
    match o.get("output_type"):
        case "stream":
            name = "stderr" if o.get("name") == "stderr" else "stdout"
            return {"output_type": "stream", "name": name, "text": _text(o.get("text"))}
        case "display_data" | "execute_result" as kind:
            data = o.get("data")
            if not isinstance(data, dict):
                return None
            bundle: JsonObject = {}
            for mime, value in data.items():
                bundle[mime] = value if isinstance(value, dict) else _text(value)
            metadata = o.get("metadata")
            item: JsonObject = {
                "output_type": kind,
                "data": bundle,
                "metadata": metadata if isinstance(metadata, dict) else {},
            }
            if kind == "execute_result":
                count = o.get("execution_count")
                item["execution_count"] = count if isinstance(count, int) else None
            return item
        case "error":
            tb = o.get("traceback")
            return {
                "output_type": "error",
                "ename": _text(o.get("ename")),
                "evalue": _text(o.get("evalue")),
                "traceback": [t for t in tb if isinstance(t, str)] if isinstance(tb, list) else [],
            }
        case _:
            return None
