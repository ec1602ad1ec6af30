"""``ask_user``: the model asks the person at the notebook one or more questions (SPINE §7.3).

Arguments: ``{questions: [{id, question, header?, options?: [str | {label, description?}],
multi_select?}]}``. The answer — the tool's content — is compact JSON
``{answers: [{id, selected: [labels], custom?}]}``: for a single-select question ``custom`` (the
"Other" text) overrides the selection, for a multi-select one it adds to it; an empty ``selected``
with no ``custom`` means the person skipped the question.

The tool asks through an injected ``Asker``: in the kernel, the turn view shows the question widget
inside this call's card and the asker waits for its Submit (``dsh_kernel.views.question``). The
asker receives the call id so the answer from that card reaches this call. Failures are tool
results with stable codes: no asker → ``NO_PROVIDER`` ("no frontend to ask the user"), no questions
or duplicate ids → ``EMPTY_QUESTIONS`` / ``INVALID_ARGS``, an answer that does not fit the questions →
``INVALID_ANSWER``. An abort of the turn cancels the wait (the pipeline reports ``ABORTED``).

The tool is read-only (asking a question changes nothing), so the default approval policy runs it
without asking, and it is never concurrent: one question form at a time.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable
from dataclasses import dataclass
from typing import Final, Protocol

from dsh_kernel.abort import AbortSignal
from dsh_kernel.errors import ToolArgsError, ToolError
from dsh_kernel.ids import CallId
from dsh_kernel.jsonvalue import JsonObject, JsonValue
from dsh_kernel.tools.presentation import GenericCallView
from dsh_kernel.tools.types import ToolContext, ToolDefinition

NAME: Final = "ask_user"


@dataclass(frozen=True, slots=True, kw_only=True)
class QuestionOption:
    label: str
    description: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Question:
    id: str
    question: str
    header: str | None = None
    options: tuple[QuestionOption, ...] = ()
    multi_select: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class Answer:
    id: str
    selected: tuple[str, ...] = ()
    custom: str | None = None


class Asker(Protocol):
    """Shows ``questions`` to the person and returns their answers; cancelled when ``signal``
    aborts the turn."""

    def __call__(
        self, questions: tuple[Question, ...], signal: AbortSignal, *, call_id: CallId
    ) -> Awaitable[tuple[Answer, ...]]: ...


_OPTION: JsonObject = {
    "oneOf": [
        {"type": "string", "description": "The option's label."},
        {
            "type": "object",
            "properties": {
                "label": {"type": "string"},
                "description": {"type": "string", "description": "Shown under the label."},
            },
            "required": ["label"],
            "additionalProperties": False,
        },
    ]
}

PARAMETERS: Final[JsonObject] = {
    "type": "object",
    "properties": {
        "questions": {
            "type": "array",
            "description": "One or more questions, shown together in one form.",
            "items": {
                "type": "object",
                "properties": {
                    "id": {"type": "string", "description": "Unique within this call."},
                    "question": {"type": "string"},
                    "header": {"type": "string", "description": "A short title."},
                    "options": {
                        "type": "array",
                        "items": _OPTION,
                        "description": "Choices; without them the person types an answer.",
                    },
                    "multi_select": {
                        "type": "boolean",
                        "description": "Allow several options to be chosen.",
                    },
                },
                "required": ["id", "question"],
                "additionalProperties": False,
            },
        }
    },
    "required": ["questions"],
    "additionalProperties": False,
}

LEAN_PARAMETERS: Final[JsonObject] = {
    "type": "object",
    "properties": {
        "questions": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "id": {"type": "string"},
                    "question": {"type": "string"},
                },
                "required": ["id", "question"],
                "additionalProperties": False,
            },
        }
    },
    "required": ["questions"],
    "additionalProperties": False,
}
"""The lean tool set's form (``dsh_kernel.tools.lean``): questions the person answers in their own
words (no options, header or multi-select) — every call it describes is valid under ``PARAMETERS``."""

DESCRIPTION: Final = (
    "Ask the person at the notebook one or more questions and wait for the answers. Use it when "
    "you need a decision or information only they have; offer options when the likely answers are "
    'known (they can always write their own). Returns {"answers": [{"id", "selected": [labels], '
    '"custom"?}]}; an empty selection without custom text means they skipped the question.'
)


def _opt_str(obj: JsonObject, key: str) -> str | None:
    v = obj.get(key)
    if v is None:
        return None
    if not isinstance(v, str):
        raise ToolArgsError(f"{key} must be a string")
    return v


def parse_questions(args: JsonValue) -> tuple[Question, ...]:
    """Questions from the call's arguments; ``ToolError`` (``EMPTY_QUESTIONS``/``INVALID_ARGS``)
    when they cannot be asked."""
    raw = args.get("questions") if isinstance(args, dict) else None
    if not isinstance(raw, list) or not raw:
        raise ToolError("ask_user needs at least one question", code="EMPTY_QUESTIONS")
    out: list[Question] = []
    seen: set[str] = set()
    for q in raw:
        if not isinstance(q, dict):
            raise ToolArgsError("each question must be an object")
        qid, text = q.get("id"), q.get("question")
        if not isinstance(qid, str) or not isinstance(text, str) or not text.strip():
            raise ToolArgsError("each question needs a string id and a non-empty question")
        if qid in seen:
            raise ToolArgsError(f"duplicate question id {qid!r}")
        seen.add(qid)
        options: list[QuestionOption] = []
        raw_options = q.get("options") or []
        if not isinstance(raw_options, list):
            raise ToolArgsError("options must be an array")
        for o in raw_options:
            if isinstance(o, str):
                options.append(QuestionOption(label=o))
            elif isinstance(o, dict) and isinstance(o.get("label"), str):
                label = o["label"]
                assert isinstance(label, str)
                options.append(QuestionOption(label=label, description=_opt_str(o, "description")))
            else:
                raise ToolArgsError("an option is a label or {label, description?}")
        labels = [o.label for o in options]
        if len(set(labels)) != len(labels):
            raise ToolArgsError(f"question {qid!r} has duplicate option labels")
        out.append(
            Question(
                id=qid,
                question=text,
                header=_opt_str(q, "header"),
                options=tuple(options),
                multi_select=q.get("multi_select") is True,
            )
        )
    return tuple(out)


def answers_to_json(answers: tuple[Answer, ...]) -> JsonObject:
    items: list[JsonValue] = []
    for a in answers:
        item: JsonObject = {"id": a.id, "selected": list(a.selected)}
        if a.custom is not None:
            item["custom"] = a.custom
        items.append(item)
    return {"answers": items}


def answers_from_json(value: JsonValue) -> tuple[Answer, ...]:
    """Parse ``{answers: [...]}`` (also from a result's text); ``ValueError`` if it is not that."""
    if isinstance(value, str):
        value = json.loads(value)
    raw = value.get("answers") if isinstance(value, dict) else None
    if not isinstance(raw, list):
        raise ValueError("expected {answers: [...]}")
    out: list[Answer] = []
    for a in raw:
        if not isinstance(a, dict) or not isinstance(a.get("id"), str):
            raise ValueError("each answer needs a string id")
        selected = a.get("selected", [])
        if not isinstance(selected, list) or not all(isinstance(s, str) for s in selected):
            raise ValueError("selected must be an array of labels")
        custom = a.get("custom")
        if custom is not None and not isinstance(custom, str):
            raise ValueError("custom must be a string")
        aid = a["id"]
        assert isinstance(aid, str)
        out.append(Answer(id=aid, selected=tuple(str(s) for s in selected), custom=custom))
    return tuple(out)


def check_answers(questions: tuple[Question, ...], answers: tuple[Answer, ...]) -> None:
    """Every answer names a question and only that question's options; one at most for a
    single-select question. Raises ``ToolError`` (``INVALID_ANSWER``)."""
    by_id = {q.id: q for q in questions}
    for a in answers:
        q = by_id.get(a.id)
        if q is None:
            raise ToolError(f"answer for unknown question {a.id!r}", code="INVALID_ANSWER")
        labels = {o.label for o in q.options}
        unknown = [s for s in a.selected if s not in labels]
        if unknown:
            raise ToolError(f"{a.id}: not an option: {unknown[0]!r}", code="INVALID_ANSWER")
        if not q.multi_select and len(a.selected) > 1:
            raise ToolError(f"{a.id}: only one option may be chosen", code="INVALID_ANSWER")


def ask_user_tool(asker: Asker | None) -> ToolDefinition:
    """The ``ask_user`` tool, asking through ``asker`` (``None``: every call fails clearly)."""

    async def execute(args: JsonObject, ctx: ToolContext) -> JsonValue:
        questions = parse_questions(args)
        if asker is None:
            raise ToolError(
                "no frontend to ask the user: this kernel is not showing the notebook to anyone",
                code="NO_PROVIDER",
            )
        answers = await asker(questions, ctx.signal, call_id=ctx.call_id)
        check_answers(questions, answers)
        return answers_to_json(answers)

    def present(args: JsonObject) -> GenericCallView:
        raw = args.get("questions")
        count = len(raw) if isinstance(raw, list) else 0
        title = "Question for you" if count == 1 else f"{count} questions for you"
        return GenericCallView(title=title, kind="other", raw_input=args)

    return ToolDefinition(
        name=NAME,
        description=DESCRIPTION,
        parameters=PARAMETERS,
        lean_description="Ask the user questions and wait for their answers.",
        lean_parameters=LEAN_PARAMETERS,
        execute=execute,
        read_only=True,
        present_call=present,
    )
