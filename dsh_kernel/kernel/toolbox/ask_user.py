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

from typing import Final

from dsh_kernel.errors import ToolError
from dsh_kernel.jsonvalue import JsonObject, JsonValue
from dsh_kernel.tools.presentation import GenericCallView
from dsh_kernel.tools.questions import (
    Asker,
    answers_to_json,
    check_answers,
    parse_questions,
)
from dsh_kernel.tools.types import ToolContext, ToolDefinition

NAME: Final = "ask_user"


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
        lean_when_named=True,
        execute=execute,
        read_only=True,
        present_call=present,
    )
