"""Session operations: list, fork, search, Parquet and Markdown export, titles."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import duckdb
import pytest

from dsh_kernel.errors import UsageError
from dsh_kernel.ids import new_message_id
from dsh_kernel.llm.types import Message, TextBlock, UserSource
from dsh_kernel.store.ingest.incremental import set_price
from dsh_kernel.store.journal import attach_journal, read_session
from dsh_kernel.store.layout import Store
from dsh_kernel.store.query.run import run_query
from dsh_kernel.store.sessions import (
    export_markdown,
    export_parquet,
    fork,
    list_sessions,
    search,
    set_title,
    title_data,
)
from dsh_kernel.testing import text_response

from .conftest import RICH_PROMPTS, chat, make_agent, record_rich_session, usage


async def test_list_sessions(store: Store) -> None:
    a, wa = await record_rich_session(store)
    b, _, wb = make_agent(store, [text_response("hi", usage=usage(5, 5))])
    await chat(b, "second session")
    set_title(b.session, "  A   renamed\nsession ")
    wb.flush()
    set_price(store, provider="scripted", model="m1", input_per_mtok=1.0, output_per_mtok=1.0)
    listed = list_sessions(store)
    assert [s.id for s in listed] == [b.id, a.id]  # newest first
    assert listed[0].title == "A renamed session" and listed[1].title == RICH_PROMPTS[0]
    assert (listed[0].turns, listed[0].total_tokens) == (1, 10)
    assert listed[0].cost == pytest.approx(10 / 1e6)
    assert listed[1].turns == 2 and listed[1].created.tzinfo is not None
    wa.close()
    wb.close()


async def test_a_title_is_what_the_person_typed_not_the_expansion(store: Store) -> None:
    typed = "Which region sold most in $`sales`? Answer with pandas."
    expanded = (
        "Which region sold most in `sales`? Answer with pandas.\n\n"
        '<value of="sales">\nDataFrame 4x3, columns region, units, price\n</value>'
    )
    message = Message(
        id=new_message_id(),
        role="user",
        content=(TextBlock(text=expanded),),
        source=UserSource(extra={"cell": {"raw": typed, "inserted": [{"expr": "sales"}]}}),
    )
    agent, _, writer = make_agent(store, [text_response("North.", usage=usage(5, 5))])
    agent.followup(message)
    await agent.when_idle()
    writer.flush()
    [listed] = list_sessions(store)
    assert listed.title == typed  # the expansion (``<value of=…>``) is the model's, not a title
    writer.close()


def test_titles_are_cleaned() -> None:
    assert title_data(" a \t b ") == {"title": "a b", "source": {"kind": "user"}}
    assert len(str(title_data("x" * 500)["title"])) == 120
    with pytest.raises(UsageError):
        title_data("   ")


async def test_fork_copies_the_prefix_and_records_its_parent(store: Store) -> None:
    parent, writer = await record_rich_session(store)
    writer.close()
    events = list(parent.session.events)
    child = fork(parent.session.header, events, 1)
    end1 = next(i for i, e in enumerate(events) if e.type == "turn/end")
    assert child.header.parent_session == parent.id and child.header.seed_length == end1 + 1
    assert list(child.events) == events[: end1 + 1]
    agent, provider, w = make_agent(
        store, [text_response("forked answer", usage=usage())], session=child
    )
    await chat(agent, "a different second question")
    provider.assert_consumed()
    # the fork's request history is the parent's first turn plus the new prompt
    assert [m.text() for m in provider.requests[0].messages if m.source.kind == "user"] == [
        RICH_PROMPTS[0],
        "a different second question",
    ]
    w.close()
    loaded = read_session(store.journal_path(child.header))
    assert loaded.header.parent_session == parent.id and loaded.header.seed_length == end1 + 1
    assert list(loaded.events[: end1 + 1]) == events[: end1 + 1]
    assert loaded.events[end1 + 1].type == "session/end-seed"
    rows = run_query(
        store,
        "SELECT parent_session, seed_length, turns FROM sessions WHERE session_id = ?",
        [child.id],
    ).rows
    assert rows == ((parent.id, end1 + 1, 2),)
    seeded = run_query(
        store, "SELECT turn, seeded FROM turns WHERE session_id = ? ORDER BY turn", [child.id]
    ).rows
    assert seeded == ((1, True), (2, False))
    # the fork's own tokens exclude the copied turn
    own = run_query(
        store, "SELECT total_tokens FROM sessions WHERE session_id = ?", [child.id]
    ).rows
    assert own == ((usage().input_tokens + usage().output_tokens,),)


async def test_fork_refuses_an_unfinished_or_missing_turn(store: Store) -> None:
    parent, writer = await record_rich_session(store)
    writer.close()
    events = list(parent.session.events)
    with pytest.raises(UsageError, match="does not exist"):
        fork(parent.session.header, events, 3)
    open_turn = events[: next(i for i, e in enumerate(events) if e.type == "turn/end")]
    with pytest.raises(UsageError, match="has not ended"):
        fork(parent.session.header, open_turn, 1)
    empty = fork(parent.session.header, events, 0)
    assert [e.type for e in empty.events] == ["agent/inbox/spliced"]


async def test_search_messages_tool_arguments_and_results(store: Store) -> None:
    agent, writer = await record_rich_session(store)
    hits = search(store, "no such KEY")
    assert [(r[3], r[4]) for r in hits.rows] == [("tool result", "Error: no such key: nope")]
    args = search(store, '"key":"nope"')
    assert [r[3] for r in args.rows] == ["tool call lookup"]
    assert [r[3] for r in search(store, "2 plus").rows] == ["reasoning"]
    regex = search(store, r"sum is \d", regex=True)
    assert [r[4] for r in regex.rows] == ["The sum is 5."]
    assert search(store, "100%").rows == ()  # % is literal, not a wildcard
    assert len(search(store, "e", limit=3).rows) == 3
    assert search(store, "sum", session_id="nobody").rows == ()
    with pytest.raises(UsageError):
        search(store, "(", regex=True)
    del agent
    writer.close()


async def test_export_parquet_partitioned_by_date_and_session(store: Store, tmp_path: Path) -> None:
    agent, writer = await record_rich_session(store)
    writer.close()
    out = export_parquet(store, tmp_path / "export")
    parts = sorted(
        p.relative_to(out / "events").parts[:2] for p in (out / "events").rglob("*.parquet")
    )
    assert parts and all(
        p[0].startswith("date=") and p[1] == f"session_id={agent.id}" for p in parts
    )
    con = duckdb.connect()
    n = con.execute(
        f"SELECT count(*) FROM read_parquet('{out}/events/**/*.parquet', hive_partitioning = true)"
    ).fetchone()
    assert n == (len(agent.session),)
    assert con.execute(f"SELECT title FROM '{out}/sessions.parquet'").fetchone() == (
        RICH_PROMPTS[0],
    )


async def test_export_markdown_reads_like_a_transcript(store: Store) -> None:
    agent, writer = await record_rich_session(store)
    writer.close()
    md = export_markdown(list(agent.session.events), agent.session.header)
    assert md.startswith("# Session ")
    assert f"session `{agent.id}`" in md
    assert "## Turn 1" in md and "## Turn 2" in md
    assert "**User:**\n\nWhat is 2+3? Use the tools." in md
    assert "**Tool call `python`:**\n\n```python\nraise 1/0\n```" in md
    assert "**Tool error (`NOT_FOUND`):**" in md
    assert "<details><summary>Reasoning</summary>\n\n2 plus 3" in md
    assert md.index("The sum is 5.") < md.index("You're welcome, goodbye.")
    assert "assistant/chunk" not in md and "text-delta" not in md


def test_attaching_twice_to_one_session_is_harmless(store: Store) -> None:
    from dsh_kernel.session.events import SessionHeader
    from dsh_kernel.session.log import Session

    s = Session(header=SessionHeader(id="12345678-0000-4000-8000-000000000000", created_at=0))
    w = attach_journal(s, store)
    set_title(s, "one")
    w.close()
    assert [e.type for e in read_session(w.path).events] == ["session/title"]


def test_short_ids_resolve_to_one_session(store: Store) -> None:
    from dsh_kernel.errors import StoreError
    from dsh_kernel.session.events import SessionHeader
    from dsh_kernel.session.log import Session
    from dsh_kernel.store.sessions import resolve_session_id

    for sid in ("abc11111-0000-4000-8000-000000000000", "abc22222-0000-4000-8000-000000000000"):
        s = Session(header=SessionHeader(id=sid, created_at=0))
        w = attach_journal(s, store)
        set_title(s, "t")
        w.close()
    assert resolve_session_id(store, "abc1") == "abc11111-0000-4000-8000-000000000000"
    with pytest.raises(StoreError) as err:
        resolve_session_id(store, "abc")
    assert err.value.code == "SESSION_AMBIGUOUS" and "abc22222" in err.value.message
    with pytest.raises(StoreError) as err:
        resolve_session_id(store, "zzz")
    assert err.value.code == "SESSION_NOT_FOUND"


async def test_export_markdown_shows_unparseable_arguments_as_the_text_sent(store: Store) -> None:
    from dsh_kernel.testing import tool_call_response

    deep = "[" * 5_000 + "]" * 5_000
    agent, _, writer = make_agent(
        store, [tool_call_response("python", {"code": "1"}), text_response("done")]
    )
    await chat(agent, "go")
    writer.close()
    events = list(agent.session.events)
    call = next(e for e in events if e.type == "tool/call")
    hostile = dataclasses.replace(call, data={**call.data, "arguments": deep})
    md = export_markdown([hostile if e is call else e for e in events], agent.session.header)
    assert deep[:100] in md


def test_export_markdown_reads_each_turn_as_the_cell_does() -> None:
    """Runtime context in its place, folded; a result's text blocks one per line (they were glued
    together before the export read turns with the turn reader), right under their call."""
    from dsh_kernel.session.events import SessionHeader
    from dsh_kernel.session.log import Session

    s = Session(header=SessionHeader(id="12345678-0000-4000-8000-000000000000", created_at=0))
    prompt = {
        "id": "u1",
        "role": "user",
        "content": [{"type": "text", "text": "look"}],
        "source": {"kind": "user"},
    }
    context = {
        "id": "u2",
        "role": "user",
        "content": [{"type": "text", "text": "df: a DataFrame"}],
        "source": {"kind": "plugin", "plugin": "dsh/runtime-context", "form": "snapshot"},
    }
    call = {"type": "tool-call", "id": "c1", "name": "python", "arguments": '{"code": "df"}'}
    answer = {"id": "a1", "role": "assistant", "content": [call], "source": {"kind": "model"}}
    result = {
        "id": "r1",
        "role": "user",
        "content": [
            {
                "type": "tool-result",
                "toolCallId": "c1",
                "content": [
                    {"type": "text", "text": "   a\n0  1"},
                    {"type": "text", "text": "(1 row)"},
                ],
            }
        ],
        "source": {"kind": "tool", "callId": "c1"},
    }
    s.append("turn/start", {"turn": 1})
    s.append("user/message", prompt, surface_op="append")
    s.append("user/message", context, surface_op="append")
    s.append("step/start", {"turn": 1, "step": 1})
    s.append(
        "assistant/chunk",
        {"turn": 1, "step": 1, "chunk": {"type": "block-end", "index": 0, "block": call}},
    )
    s.append("assistant/message", {"turn": 1, "step": 1, "message": answer}, surface_op="append")
    s.append(
        "tool/call",
        {"turn": 1, "step": 1, "callId": "c1", "name": "python", "arguments": '{"code": "df"}'},
    )
    s.append("tool/result", {"turn": 1, "step": 1, "message": result}, surface_op="append")
    s.append("turn/end", {"turn": 1, "reason": {"kind": "completed"}})
    md = export_markdown(list(s.events), s.header)
    user = md.index("**User:**\n\nlook")
    ctx = md.index("<details><summary>Context</summary>\n\ndf: a DataFrame\n\n</details>")
    tool = md.index("**Tool call `python`:**\n\n```python\ndf\n```")
    assert user < ctx < tool < md.index("**Tool result:**\n\n```\n   a\n0  1\n(1 row)\n```")
