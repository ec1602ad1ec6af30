"""System prompt assembly and runtime-context snapshots (SPINE §7.4).

The system prompt is a list of ``PromptSection``s joined in ascending ``order`` (a single
``complete`` section replaces the whole prompt). ``{{variable}}`` references are interpolated
strictly: an unknown or empty variable raises ``TemplateError`` naming it, never an empty string.

Dynamic facts (the date, the approval policy, the notebook's variables) never go into the system
prompt — that keeps it byte-stable for the provider's prompt cache. They are ``PromptContext``
entries rendered every step; when the rendered set differs from the last snapshot in the model's
history, ``RuntimeContext.project`` returns a ``user/message`` (source plugin ``dsh/runtime-context``,
form ``snapshot``) to enter with the step. If every context has gone, it sends a fixed marker.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from dsh_kernel.errors import TemplateError
from dsh_kernel.ids import new_message_id
from dsh_kernel.jsonvalue import JsonObject, JsonValue
from dsh_kernel.llm.types import Message, PluginSource, TextBlock

IDENTITY = "You are an AI agent running inside a Jupyter notebook (dsh-kernel, a port of DeepSeek Harness)."
DEFAULT_PERSONA = (
    "Answer the user's messages helpfully and concisely, in Markdown. When tools are available, use "
    "them when they help; explain what you did."
)

RUNTIME_CONTEXT_PLUGIN = "dsh/runtime-context"
NO_CONTEXT_MARKER = "Current runtime context: none (earlier runtime context no longer applies)."

_VAR = re.compile(r"\{\{\s*([A-Za-z_][A-Za-z0-9_.-]*)\s*\}\}")


@dataclass(frozen=True, slots=True, kw_only=True)
class PromptSection:
    name: str
    order: int
    text: str | Callable[[], str]
    complete: bool = False

    def render(self) -> str:
        return self.text() if callable(self.text) else self.text


def interpolate(template: str, variables: dict[str, str], *, where: str = "prompt") -> str:
    def sub(m: re.Match[str]) -> str:
        name = m.group(1)
        if name not in variables:
            raise TemplateError(
                f"{where}: unknown variable {{{{{name}}}}}; known: {', '.join(sorted(variables)) or 'none'}"
            )
        value = variables[name]
        if not value:
            raise TemplateError(f"{where}: variable {{{{{name}}}}} is empty")
        return value

    return _VAR.sub(sub, template)


class SystemPrompt:
    """Sections plus variables; ``render()`` gives the exact system text of a request."""

    def __init__(self, sections: Sequence[PromptSection] = ()) -> None:
        self.sections: list[PromptSection] = list(sections)
        self.variables: dict[str, str] = {}

    @classmethod
    def default(cls, persona: str | None = None) -> SystemPrompt:
        return cls(
            [
                PromptSection(name="identity", order=-100, text=IDENTITY),
                PromptSection(name="persona", order=0, text=persona or DEFAULT_PERSONA),
            ]
        )

    def add(self, section: PromptSection) -> Callable[[], None]:
        self.sections.append(section)
        return lambda: self.sections.remove(section) if section in self.sections else None

    def render(self) -> str:
        complete = [s for s in self.sections if s.complete]
        chosen = complete[-1:] if complete else sorted(self.sections, key=lambda s: s.order)
        parts = [
            interpolate(s.render(), self.variables, where=f"prompt section {s.name!r}")
            for s in chosen
        ]
        return "\n\n".join(p for p in parts if p.strip())


@dataclass(frozen=True, slots=True, kw_only=True)
class PromptContext:
    name: str
    order: int
    text: str


ContextProvider = Callable[[], PromptContext | None]


def _snapshot_sections(message: Message) -> list[JsonValue] | None:
    src = message.source
    if not isinstance(src, PluginSource) or src.plugin != RUNTIME_CONTEXT_PLUGIN:
        return None
    form = src.form or {}
    sections = form.get("sections")
    return sections if isinstance(sections, list) else []


class RuntimeContext:
    """Changed-only snapshots of dynamic facts."""

    def __init__(self) -> None:
        self.providers: list[ContextProvider] = []
        self._seen: tuple[int, Message, int, Message | None, list[JsonValue] | None] | None = None
        """``(n, history[n - 1], j, history[j], sections)`` of the last ``project``: the newest
        snapshot in ``history[:n]`` was ``history[j]``, with ``sections`` (``j`` is -1 when there
        was none). The next call reads only what came after, when ``history[n - 1]`` and
        ``history[j]`` are still the same messages there (a compaction that replaced earlier
        messages moves or removes them, and the history is read again)."""

    def add(self, provider: ContextProvider) -> Callable[[], None]:
        self.providers.append(provider)
        return lambda: self.providers.remove(provider) if provider in self.providers else None

    def render(self) -> list[PromptContext]:
        out = [c for c in (p() for p in self.providers) if c is not None and c.text]
        return sorted(out, key=lambda c: (c.order, c.name))

    def _newest_snapshot(self, history: Sequence[Message]) -> list[JsonValue] | None:
        """The sections of the newest snapshot in ``history`` (``None``: there is none), reading
        only the messages the last call did not (``_seen``): a long session is not walked again at
        every step."""
        start, at, last = 0, -1, None
        seen = self._seen
        if seen is not None:
            n, tail, j, snapshot, sections = seen
            if n <= len(history) and history[n - 1] is tail and (j < 0 or history[j] is snapshot):
                start, at, last = n, j, sections
        for i in range(len(history) - 1, start - 1, -1):
            found = _snapshot_sections(history[i])
            if found is not None:
                at, last = i, found
                break
        if history:
            self._seen = (len(history), history[-1], at, history[at] if at >= 0 else None, last)
        return last

    def project(self, history: Sequence[Message]) -> Message | None:
        """The snapshot message to enter with this step, or ``None`` if nothing changed."""
        current = self.render()
        sections: list[JsonValue] = [{"name": c.name, "text": c.text} for c in current]
        last = self._newest_snapshot(history)
        if last is None and not sections:
            return None
        if last == sections:
            return None
        if sections:
            body = "\n\n".join(f"## {c.name}\n{c.text}" for c in current)
            text = f"<runtime-context>\n{body}\n</runtime-context>"
        else:
            text = NO_CONTEXT_MARKER
        form: JsonObject = {"kind": "snapshot", "sections": sections}
        return Message(
            id=new_message_id(),
            role="user",
            content=(TextBlock(text=text),),
            source=PluginSource(plugin=RUNTIME_CONTEXT_PLUGIN, form=form),
        )
