"""The ask-user question widget and the broker that turns its Submit into the tool's answer.

``QuestionForm`` is drawn inside the card of an ``ask_user`` call, from that call's logged arguments
(so a replay draws the same form): per question a header, the question, ``RadioButtons`` (single
select) or ``SelectMultiple`` (multi select) over its options with their descriptions, an "Other"
text box, and one Submit button for the form. Submit calls ``on_submit(call_id, answers_json)`` and
disables the form; once the call has a result, ``show_answers`` puts the logged answers in the
controls and keeps them disabled.

``QuestionBroker`` is the ``Asker`` the kernel gives the ``ask_user`` tool: ``await broker(questions,
signal, call_id=…)`` waits until ``resolve(call_id, answers_json)`` (wired from the view's
``on_answer``) or until ``signal`` aborts (→ ``AbortedError``); a malformed answer is refused
(``resolve`` returns ``False``) and the call keeps waiting.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from dsh_kernel.abort import AbortCause, AbortedError, AbortSignal
from dsh_kernel.ids import CallId
from dsh_kernel.jsonvalue import JsonObject
from dsh_kernel.markup.safe_html import escape
from dsh_kernel.tools.questions import (
    Answer,
    Question,
    answers_from_json,
    answers_to_json,
    check_answers,
)
from dsh_kernel.views import _ipw

SubmitCallback = Callable[[str, JsonObject], None]


class _QuestionControls:
    def __init__(self, question: Question) -> None:
        self.question = question
        head = f"<strong>{escape(question.header)}</strong><br>" if question.header else ""
        descriptions = "".join(
            f"<li><em>{escape(o.label)}</em>: {escape(o.description)}</li>"
            for o in question.options
            if o.description
        )
        extra = f"<ul>{descriptions}</ul>" if descriptions else ""
        self.label = _ipw.HTML(value=f"{head}{escape(question.question)}{extra}")
        labels = [o.label for o in question.options]
        self.radio: _ipw.RadioButtons | None = None
        self.multi: _ipw.SelectMultiple | None = None
        parts: list[_ipw.DOMWidget] = [self.label]
        if labels and question.multi_select:
            self.multi = _ipw.SelectMultiple(options=labels, rows=min(len(labels), 6))
            parts.append(self.multi)
        elif labels:
            self.radio = _ipw.RadioButtons(options=labels, value=None)
            parts.append(self.radio)
        self.other = _ipw.Text(placeholder="Other…" if labels else "Your answer…")
        parts.append(self.other)
        self.widget = _ipw.VBox(parts)

    def answer(self) -> Answer:
        selected: tuple[str, ...] = ()
        if self.multi is not None:
            selected = _ipw.multi_values(self.multi)
        elif self.radio is not None:
            value = _ipw.radio_value(self.radio)
            selected = (value,) if value is not None else ()
        custom = self.other.value.strip() or None
        return Answer(id=self.question.id, selected=selected, custom=custom)

    def show(self, answer: Answer) -> None:
        labels = {o.label for o in self.question.options}
        chosen = tuple(s for s in answer.selected if s in labels)
        if self.multi is not None:
            _ipw.set_multi_values(self.multi, chosen)
        elif self.radio is not None:
            _ipw.set_radio_value(self.radio, chosen[0] if chosen else None)
        self.other.value = answer.custom or ""

    def set_disabled(self, disabled: bool) -> None:
        for w in (self.radio, self.multi, self.other):
            if w is not None:
                w.disabled = disabled


class QuestionForm:
    """The form for one ``ask_user`` call. ``widget`` is the box to show."""

    def __init__(
        self, call_id: str, questions: tuple[Question, ...], on_submit: SubmitCallback
    ) -> None:
        self.call_id = call_id
        self.questions = questions
        self._on_submit = on_submit
        self._controls = [_QuestionControls(q) for q in questions]
        self.submit = _ipw.Button(description="Submit", button_style="primary", icon="paper-plane")
        _ipw.on_click(self.submit, self._submitted)
        self.widget = _ipw.VBox([*(c.widget for c in self._controls), self.submit])
        _ipw.add_class(self.widget, "dsh-question")
        self.submitted = False

    def answers(self) -> tuple[Answer, ...]:
        return tuple(c.answer() for c in self._controls)

    def _submitted(self) -> None:
        if self.submitted:
            return
        answers = self.answers()
        self.set_disabled(True)
        self.submitted = True
        self._on_submit(self.call_id, answers_to_json(answers))

    def show_answers(self, answers: tuple[Answer, ...]) -> None:
        by_id = {a.id: a for a in answers}
        for c in self._controls:
            c.show(by_id.get(c.question.id, Answer(id=c.question.id)))
        self.set_disabled(True)

    def set_disabled(self, disabled: bool) -> None:
        for c in self._controls:
            c.set_disabled(disabled)
        self.submit.disabled = disabled


class QuestionBroker:
    """Waits for answers from question forms; see the module docstring."""

    def __init__(self) -> None:
        self._pending: dict[
            str, tuple[tuple[Question, ...], asyncio.Future[tuple[Answer, ...]]]
        ] = {}

    @property
    def pending(self) -> tuple[str, ...]:
        return tuple(self._pending)

    async def __call__(
        self, questions: tuple[Question, ...], signal: AbortSignal, *, call_id: CallId
    ) -> tuple[Answer, ...]:
        signal.throw_if_aborted()
        fut: asyncio.Future[tuple[Answer, ...]] = asyncio.get_running_loop().create_future()
        self._pending[call_id] = (questions, fut)

        def on_abort(cause: AbortCause) -> None:
            if not fut.done():
                fut.set_exception(AbortedError(cause))

        dispose = signal.add_callback(on_abort)
        try:
            return await fut
        finally:
            dispose()
            self._pending.pop(call_id, None)

    def resolve(self, request_id: str, answers_json: JsonObject) -> bool:
        """Deliver the answers for call ``request_id``; ``False`` if nothing waits for them or they
        do not fit the questions."""
        entry = self._pending.get(request_id)
        if entry is None or entry[1].done():
            return False
        questions, fut = entry
        try:
            answers = answers_from_json(answers_json)
            check_answers(questions, answers)
        except Exception:
            return False
        fut.set_result(answers)
        return True
