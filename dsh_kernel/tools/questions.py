"""The ask-user vocabulary: questions the model puts to the person, their answers, and the asker.

Shared by the ``ask_user`` tool (``kernel.toolbox.ask_user``), which parses the model's questions
and checks the answers, and the views, which draw the question form and read answers back from a
result. ``parse_questions`` reads a call's arguments (``ToolArgsError`` naming what is wrong);
``answers_to_json``/``answers_from_json`` are the answer's one JSON form; ``check_answers`` fails with
``INVALID_ANSWER`` when answers do not fit their questions.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable
from dataclasses import dataclass
from typing import Protocol

from dsh_kernel.abort import AbortSignal
from dsh_kernel.errors import ToolArgsError, ToolError
from dsh_kernel.ids import CallId
from dsh_kernel.jsonvalue import JsonObject, JsonValue


@dataclass(frozen=True, slots=True, kw_only=True)
class QuestionOption:
    """One choice of a question: its label (what an answer selects) and an optional explanation."""

    label: str
    description: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Question:
    """One question: its id (answers refer to it), text, short header, choices and whether several
    may be selected (with no choices, the answer is free text)."""

    id: str
    question: str
    header: str | None = None
    options: tuple[QuestionOption, ...] = ()
    multi_select: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class Answer:
    """The answer to one question: the labels selected and the free text, if any (neither: skipped)."""

    id: str
    selected: tuple[str, ...] = ()
    custom: str | None = None


class Asker(Protocol):
    """Shows ``questions`` to the person and returns their answers; cancelled when ``signal``
    aborts the turn."""

    def __call__(
        self, questions: tuple[Question, ...], signal: AbortSignal, *, call_id: CallId
    ) -> Awaitable[tuple[Answer, ...]]: ...


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
    """``answers`` as the tool's content: ``{answers: [{id, selected, custom?}]}``."""
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
