"""``derive_messages`` (SPINE §1.11) and request-header folding and canonical equality (§1.10)."""

from __future__ import annotations

from dsh_kernel.ids import CallId
from dsh_kernel.jsonvalue import JsonObject
from dsh_kernel.llm.types import (
    LlmCallConfig,
    ModelSource,
    TextBlock,
    ToolCallBlock,
    ToolResultBlock,
    ToolSchema,
    ToolSource,
    UserSource,
)
from dsh_kernel.session.derive import (
    EpochHeader,
    fold_request_header,
    header_equals,
    last_request_header,
    project_event,
)
from dsh_kernel.session.events import ReplaceOp
from dsh_kernel.session.log import Session
from tests.unit.session.scripts import (
    assistant_message,
    chunk,
    new_session,
    tool_result_data,
    user_message,
)


def open_step(s: Session) -> None:
    s.append("turn/start", {"turn": 1})
    s.append("step/start", {"turn": 1, "step": 1})


def test_projection_rules() -> None:
    s = new_session()
    open_step(s)
    s.append("user/message", user_message("question"), surface_op="append")
    c = s.append("assistant/chunk", {"turn": 1, "step": 1, "chunk": chunk("ans")})
    s.append(
        "assistant/message",
        {"turn": 1, "step": 1, "message": assistant_message("ans", ("c1",))},
        surface_op="append",
        source_event_seqs=[c.seq],
    )
    call = s.append(
        "tool/call", {"turn": 1, "step": 1, "callId": "c1", "name": "echo", "arguments": "{}"}
    )
    s.append(
        "tool/result",
        tool_result_data(1, 1, "c1", "Error: nope", error_code="X"),
        surface_op="append",
        source_event_seqs=[call.seq],
    )
    user, assistant, result = s.derive_messages()

    assert user.role == "user"
    assert user.content == (TextBlock(text="question"),)
    assert user.source == UserSource()

    assert assistant.role == "assistant"
    assert assistant.content == (
        TextBlock(text="ans"),
        ToolCallBlock(id=CallId("c1"), name="echo", arguments="{}"),
    )
    assert assistant.source == ModelSource(provider="fake", model="fake-1")

    assert result.role == "user"
    assert result.source == ToolSource(call_id=CallId("c1"))
    assert result.content == (
        ToolResultBlock(
            tool_call_id=CallId("c1"), content=(TextBlock(text="Error: nope"),), is_error=True
        ),
    )
    # Chunks, tool calls and brackets never derive into messages.
    for ev in s.events:
        if ev.type not in ("user/message", "assistant/message", "tool/result"):
            assert project_event(ev) is None


def test_content_less_assistant_messages_are_skipped() -> None:
    s = new_session()
    open_step(s)
    s.append("user/message", user_message("q"), surface_op="append")
    s.append(
        "assistant/message",
        {
            "turn": 1,
            "step": 1,
            "message": assistant_message(""),
            "usage": {"inputTokens": 1, "outputTokens": 9},
        },
        surface_op="append",
        source_event_seqs=[],
    )
    assert len(s.surface) == 2  # it is on the surface …
    assert [m.text() for m in s.derive_messages()] == ["q"]  # … but projects to nothing


def test_interrupted_prefix_is_derived() -> None:
    s = new_session()
    open_step(s)
    s.append(
        "assistant/message",
        {"turn": 1, "step": 1, "message": assistant_message("partial"), "interrupted": True},
        surface_op="append",
    )
    assert [m.text() for m in s.derive_messages()] == ["partial"]


def test_replacement_folds_over_the_surface() -> None:
    s = new_session()
    seqs = [s.append("user/message", user_message(t), surface_op="append").seq for t in "abcd"]
    assert [m.text() for m in s.derive_messages()] == ["a", "b", "c", "d"]
    s.append(
        "user/message",
        user_message("summary of a-c"),
        surface_op=ReplaceOp(start=seqs[0], end=seqs[2]),
        source_event_seqs=seqs[:3],
    )
    assert [m.text() for m in s.derive_messages()] == ["summary of a-c", "d"]
    s.append("user/message", user_message("e"), surface_op="append")
    assert [m.text() for m in s.derive_messages()] == ["summary of a-c", "d", "e"]


def test_each_call_returns_a_fresh_list() -> None:
    s = new_session()
    s.append("user/message", user_message("a"), surface_op="append")
    first = s.derive_messages()
    first.clear()
    assert [m.text() for m in s.derive_messages()] == ["a"]


def test_derived_messages_do_not_change_when_the_input_dict_does() -> None:
    s = new_session()
    msg = user_message("a")
    s.append("user/message", msg, surface_op="append")
    msg["content"][0]["text"] = "mutated"  # type: ignore[index]
    assert [m.text() for m in s.derive_messages()] == ["a"]


# --- request header ----------------------------------------------------------------------------------

CONFIG = LlmCallConfig(provider="fake", model="fake-1", reasoning_effort="high")
TOOL = ToolSchema(name="echo", description="Echo.", parameters={"type": "object"})


def header_event_data(header: EpochHeader, reason: str) -> JsonObject:
    return {"header": header.to_json(), "reason": reason}


def test_fold_returns_the_latest_snapshot() -> None:
    s = new_session()
    assert fold_request_header(s.events) is None
    assert last_request_header(list(s.events)) is None
    open_step(s)
    h1 = EpochHeader(config=CONFIG, system="one", tools=(TOOL,))
    h2 = EpochHeader(
        config=LlmCallConfig(provider="fake", model="fake-2"),
        adapter_defaults=frozenset({"maxTokens"}),
        system="two",
    )
    s.append("request/header", header_event_data(h1, "initial"))
    s.append("request/header", header_event_data(h2, "change"))
    s.append("assistant/chunk", {"turn": 1, "step": 1, "chunk": chunk()})
    folded = fold_request_header(s.events)
    assert folded == h2
    assert last_request_header(list(s.events)) == h2
    assert header_equals(folded, h2)
    assert not header_equals(folded, h1)


def test_header_round_trips_through_json() -> None:
    h = EpochHeader(
        config=LlmCallConfig(
            provider="p", model="m", temperature=0.5, max_tokens=100, stop=("END",)
        ),
        adapter_defaults=frozenset({"reasoningEffort", "maxTokens"}),
        system="sys",
        tools=(TOOL,),
    )
    assert EpochHeader.from_json(h.to_json()) == h
    assert h.to_json()["adapterDefaults"] == {"maxTokens": True, "reasoningEffort": True}


def test_canonical_form_drops_empty_system_and_tools() -> None:
    bare = EpochHeader(config=CONFIG)
    empty = EpochHeader(config=CONFIG, system="", tools=())
    assert header_equals(bare, empty)
    assert "system" not in empty.to_json()
    assert "tools" not in empty.to_json()
    assert EpochHeader.from_json(empty.to_json()) == bare


def test_header_equality_sees_every_field() -> None:
    base = EpochHeader(config=CONFIG, system="s", tools=(TOOL,))
    variants = [
        EpochHeader(config=CONFIG, system="s2", tools=(TOOL,)),
        EpochHeader(config=CONFIG, system="s"),
        EpochHeader(config=CONFIG, system="s", tools=(TOOL,), adapter_defaults=frozenset({"x"})),
        EpochHeader(
            config=LlmCallConfig(provider="fake", model="fake-1", reasoning_effort="low"),
            system="s",
            tools=(TOOL,),
        ),
        EpochHeader(
            config=CONFIG,
            system="s",
            tools=(ToolSchema(name="echo", description="Echo!", parameters={"type": "object"}),),
        ),
    ]
    for v in variants:
        assert not header_equals(base, v), v
    assert header_equals(base, EpochHeader(config=CONFIG, system="s", tools=(TOOL,)))
    assert header_equals(None, None)
    assert not header_equals(base, None)
    assert not header_equals(None, base)


def test_header_equality_ignores_json_key_order() -> None:
    a = EpochHeader.from_json({"config": {"provider": "p", "model": "m"}, "system": "s"})
    b = EpochHeader.from_json({"system": "s", "config": {"model": "m", "provider": "p"}})
    assert header_equals(a, b)
