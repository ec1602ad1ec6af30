"""The ask_user tool, its question form in the turn view, and the broker between them."""

from __future__ import annotations

import asyncio
import json

import ipywidgets
import pytest

from dsh_kernel import Agent
from dsh_kernel.abort import AbortCause, AbortController, AbortedError
from dsh_kernel.errors import ToolError
from dsh_kernel.ids import CallId
from dsh_kernel.jsonvalue import JsonObject
from dsh_kernel.kernel.toolbox.ask_user import ask_user_tool
from dsh_kernel.testing import ScriptedProvider, text_response, tool_call_response
from dsh_kernel.tools.questions import (
    Answer,
    Question,
    QuestionOption,
    answers_from_json,
    check_answers,
    parse_questions,
)
from dsh_kernel.views import QuestionBroker, TurnView, ViewControls
from dsh_kernel.views.tool_card import ToolCardWidget

from ..agent.helpers import of_type, result_texts
from .helpers import CommLog, attach, find, ignoring_result, replay, state_of, wait_for

QUESTIONS: JsonObject = {
    "questions": [
        {
            "id": "color",
            "header": "Colour",
            "question": "Which <colour>?",
            "options": ["red", {"label": "blue", "description": "the calm one"}],
        },
        {"id": "extras", "question": "Extras?", "options": ["a", "b", "c"], "multi_select": True},
        {"id": "name", "question": "Your name?"},
    ]
}


def test_parse_questions_accepts_labels_and_objects() -> None:
    qs = parse_questions(QUESTIONS)
    assert qs[0] == Question(
        id="color",
        header="Colour",
        question="Which <colour>?",
        options=(
            QuestionOption(label="red"),
            QuestionOption(label="blue", description="the calm one"),
        ),
    )
    assert qs[1].multi_select and qs[2].options == ()


@pytest.mark.parametrize(
    ("args", "code"),
    [
        ({"questions": []}, "EMPTY_QUESTIONS"),
        ({}, "EMPTY_QUESTIONS"),
        (
            {"questions": [{"id": "a", "question": "x"}, {"id": "a", "question": "y"}]},
            "INVALID_ARGS",
        ),
        ({"questions": [{"id": "a", "question": "x", "options": ["o", "o"]}]}, "INVALID_ARGS"),
        ({"questions": [{"id": "a", "question": "  "}]}, "INVALID_ARGS"),
    ],
)
def test_parse_questions_refuses_what_cannot_be_asked(args: dict[str, object], code: str) -> None:
    with pytest.raises(ToolError) as info:
        parse_questions(args)  # type: ignore[arg-type]
    assert info.value.code == code


def test_check_answers_holds_answers_to_the_options() -> None:
    qs = parse_questions(QUESTIONS)
    check_answers(qs, (Answer(id="color", selected=("red",)), Answer(id="name", custom="Ann")))
    for bad in (
        Answer(id="color", selected=("green",)),
        Answer(id="color", selected=("red", "blue")),
        Answer(id="nope"),
    ):
        with pytest.raises(ToolError) as info:
            check_answers(qs, (bad,))
        assert info.value.code == "INVALID_ANSWER"


async def test_without_an_asker_the_tool_fails_clearly() -> None:
    provider = ScriptedProvider(
        [tool_call_response("ask_user", QUESTIONS, call_id="c1"), text_response("ok")]
    )
    agent = Agent(provider=provider, model="m", tools=[ask_user_tool(None)])
    agent.followup("ask me")
    await agent.when_idle()
    (result,) = of_type(agent.session.events, "tool/result")
    assert result.data["error"] == {"name": "ToolError", "code": "NO_PROVIDER"}
    assert "no frontend to ask the user" in result_texts(agent.session.events)[0]


async def test_broker_waits_for_a_fitting_answer_and_honours_abort() -> None:
    broker = QuestionBroker()
    qs = parse_questions(QUESTIONS)
    ctl = AbortController()
    task = asyncio.ensure_future(broker(qs, ctl.signal, call_id=CallId("c1")))
    await asyncio.sleep(0)
    assert broker.pending == ("c1",)
    assert not broker.resolve("c2", {"answers": []})
    assert not broker.resolve("c1", {"answers": [{"id": "color", "selected": ["green"]}]})
    assert broker.resolve("c1", {"answers": [{"id": "color", "selected": ["red"]}]})
    assert await task == (Answer(id="color", selected=("red",)),)
    assert broker.pending == ()

    ctl2 = AbortController()
    task2 = asyncio.ensure_future(broker(qs, ctl2.signal, call_id=CallId("c2")))
    await asyncio.sleep(0)
    ctl2.abort(AbortCause(kind="user"))
    with pytest.raises(AbortedError):
        await task2
    assert broker.pending == ()


async def test_question_form_in_the_card_answers_the_tool(comms: CommLog) -> None:
    broker = QuestionBroker()
    provider = ScriptedProvider(
        [tool_call_response("ask_user", QUESTIONS, call_id="c1"), text_response("thanks")]
    )
    agent = Agent(provider=provider, model="m", tools=[ask_user_tool(broker)])
    view = TurnView(ViewControls(on_answer=ignoring_result(broker.resolve)))
    attach(agent, view)
    agent.followup("ask me")
    await wait_for(lambda: broker.pending)
    await wait_for(lambda: find(view.items, ipywidgets.RadioButtons))
    (card,) = [b for b in view._blocks.values() if isinstance(b, ToolCardWidget)]
    form = card.question
    assert form is not None
    labels = [h.value for h in find(form.widget, ipywidgets.HTML)]
    assert labels[0].startswith("<strong>Colour</strong><br>Which &lt;colour&gt;?")
    assert "<em>blue</em>: the calm one" in labels[0]
    (radio,) = find(form.widget, ipywidgets.RadioButtons)
    (multi,) = find(form.widget, ipywidgets.SelectMultiple)
    texts = find(form.widget, ipywidgets.Text)
    comms.set_state(radio, index=1)
    comms.set_state(multi, index=[0, 2])
    comms.set_state(texts[2], value="Ann")
    comms.click(form.submit)
    assert form.submit.disabled
    await agent.when_idle()
    view.finish()
    answer = json.loads(result_texts(agent.session.events)[0])
    assert answer == {
        "answers": [
            {"id": "color", "selected": ["blue"]},
            {"id": "extras", "selected": ["a", "c"]},
            {"id": "name", "selected": [], "custom": "Ann"},
        ]
    }
    assert answers_from_json(json.dumps(answer))[2] == Answer(id="name", custom="Ann")
    assert radio.disabled and multi.disabled and texts[2].disabled

    fresh = TurnView()
    replay(list(agent.session.events), fresh)
    assert state_of(fresh.widget) == state_of(view.widget)


async def test_the_view_itself_is_an_asker(comms: CommLog) -> None:
    provider = ScriptedProvider(
        [
            tool_call_response(
                "ask_user",
                {"questions": [{"id": "q", "question": "Go?", "options": ["yes", "no"]}]},
                call_id="c1",
            ),
            text_response("ok"),
        ]
    )
    view = TurnView()  # no controls: the form answers the view's own broker
    agent = Agent(provider=provider, model="m", tools=[ask_user_tool(view.ask)])
    attach(agent, view)
    agent.followup("ask")
    await wait_for(lambda: view.questions.pending == ("c1",))
    await wait_for(lambda: find(view.items, ipywidgets.RadioButtons))
    (radio,) = find(view.items, ipywidgets.RadioButtons)
    comms.set_state(radio, index=0)
    (submit,) = find(view.items, ipywidgets.Button, lambda b: b.description == "Submit")
    comms.click(submit)
    await agent.when_idle()
    assert json.loads(result_texts(agent.session.events)[0]) == {
        "answers": [{"id": "q", "selected": ["yes"]}]
    }
