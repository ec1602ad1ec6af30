"""Every query in docs/queries.md runs against a real recorded store and returns what it promises."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from dsh_kernel import Agent, tool
from dsh_kernel.jsonvalue import JsonValue
from dsh_kernel.kernel.notebook.comm import NotebookComms
from dsh_kernel.kernel.toolbox.notebook import NotebookDesk, RunningCell
from dsh_kernel.llm.codec import message_to_json
from dsh_kernel.store.ingest.incremental import set_price
from dsh_kernel.store.layout import Store
from dsh_kernel.store.query.run import QueryResult, run_query
from dsh_kernel.testing import text_response, tool_call_response
from dsh_kernel.tools.approval import ApprovalPolicy, ApprovalRequest

from .compaction_session import Recorded, record_compacted_session, resume_after_crash
from .conftest import chat, make_agent, record_rich_session, usage
from .image_session import PLOTS, RED, USER_IMAGE, record_image_session
from .mcp_session import NOTES_URI, record_mcp_session
from .rewind_sessions import G, O, P, R, Y, record_rewind_sessions

DOC = Path(__file__).resolve().parents[3] / "docs" / "queries.md"


def doc_queries() -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    heading = ""
    sql: list[str] | None = None
    for line in DOC.read_text(encoding="utf-8").splitlines():
        if sql is not None:
            if line.startswith("```"):
                out.append((heading, "\n".join(sql)))
                sql = None
            else:
                sql.append(line)
        elif line.startswith("## "):
            heading = line[3:].strip()
        elif line.strip() == "```sql":
            sql = []
    return out


@tool
def publish(text: str) -> str:
    """Publish a text (asks first)."""
    return "published"


async def record_documented_sessions(
    store: Store,
) -> tuple[Recorded, Agent, Agent, Agent, Agent, Agent]:
    """The sessions the documented queries are run over: one with compactions (its clock in the
    past; resumed after the crash in its turn 5), one whose ``publish`` call a person rejected, one
    that adds notebook cells, one with images, one calling MCP servers' tools, and the rich session
    (tools, failures, reasoning, two turns), the latest; every journal closed. Returns them in that
    order."""
    # its own tool name, so the documented python counts stay the rich session's
    compacted = resume_after_crash(store, record_compacted_session(store, tool="inspect"))

    async def refuse(rid: object, request: ApprovalRequest) -> object:
        return "rejected"

    other, _, w1 = make_agent(
        store,
        [
            tool_call_response("publish", {"text": "x"}, usage=usage()),
            text_response("ok", usage=usage()),
        ],
        answerer=refuse,
        extra_tools=[publish],
        approval=ApprovalPolicy("ask"),
    )
    await chat(other, "publish x")
    w1.close()
    notebook = await record_notebook_session(store)
    pictures, images = await record_image_session(store)  # before the rich one, the latest
    images.close()
    mcp, _ = await record_mcp_session(store)
    agent, writer = await record_rich_session(store)
    writer.close()
    return compacted, other, notebook, pictures, mcp, agent


async def record_notebook_session(store: Store) -> Agent:
    """A session whose agent adds two cells with the kernel's ``notebook_insert``, with no notebook
    extension connected (the ``set_next_input`` path)."""
    desk = NotebookDesk(NotebookComms(), namespace={}, notebook_name=None, python_cells=True)
    cells: list[JsonValue] = [
        {"cell_type": "code", "source": "df.describe()"},
        {"cell_type": "markdown", "source": "The summary."},
    ]
    agent, _, writer = make_agent(
        store,
        [
            tool_call_response("notebook_insert", {"cells": cells}, call_id="c-nb", usage=usage()),
            text_response("added", usage=usage()),
        ],
    )
    for definition in desk.tools(agent):
        agent.registry.register(definition)
    desk.offer(agent)
    desk.cell = RunningCell(session=None, cell_id="chat-cell")
    await chat(agent, "add a summary cell")
    assert desk.end_cell()[0]["text"] == "%%python\ndf.describe()"
    writer.close()
    return agent


def owners() -> pd.DataFrame:
    """The notebook DataFrame the documented join query uses."""
    return pd.DataFrame(
        {"tool": ["add", "lookup", "python", "publish"], "team": ["a", "b", "c", "d"]}
    )


async def test_every_documented_query(store: Store) -> None:
    *_, agent = await record_documented_sessions(store)
    record_rewind_sessions(store)  # older than the rest: the latest session is still the rich one
    set_price(
        store,
        provider="scripted",
        model="m1",
        input_per_mtok=0.5,
        output_per_mtok=2.0,
        cached_input_per_mtok=0.05,
    )
    queries = doc_queries()
    assert len(queries) >= 12
    results: dict[str, list[QueryResult]] = {}
    for heading, sql in queries:
        r = run_query(store, sql, namespace={"owners": owners()})
        assert r.row_count > 0, f"{heading!r} returned no rows"
        results.setdefault(heading, []).append(r)

    [per_turn] = results["Cost and tokens per turn"]
    assert per_turn.column("turn") == [1, 2] and all(c is not None for c in per_turn.column("cost"))

    [failures] = results["Tool failure rate by tool"]
    rates = dict(zip(failures.column("name"), failures.column("failure_pct"), strict=True))
    assert rates["lookup"] == 100.0 and rates["add"] == 0.0 and rates["python"] == 50.0

    sent, envelope = results["What the model was sent in request N"]
    expected = [message_to_json(m) for m in agent.provider.requests[2].messages]  # type: ignore[attr-defined]
    assert sent.column("seq") and len(sent.rows) == len(expected)
    got_text = sent.column("text")
    want_text = [
        "".join(
            str(b.get("text", ""))
            for blk in m["content"]  # type: ignore[union-attr]
            for b in ([blk] if blk.get("type") != "tool-result" else blk.get("content", []))
            if b.get("type") == "text"
        )
        for m in expected
    ]
    assert got_text == want_text
    assert envelope.column("tools") == [["add", "lookup", "python"]]
    [system] = envelope.column("system_prompt")
    assert isinstance(system, str) and system == agent.provider.requests[2].system  # type: ignore[attr-defined]

    [images] = results["Images the model was sent, and the ones it was not"]
    assert images.column("call_id") == [None, "c-red", "c-green", "c-blue", "c-last"]
    assert images.column("sent_to_model") == [True, True, False, False, None]
    assert images.column("description")[:2] == [USER_IMAGE.description, PLOTS["red"].description]
    [shown] = results["Showing an image from the store"]
    assert shown.column("call_id") == ["c-last"] and shown.column("data") == [RED]

    [compacted] = results["Compactions: what was summarised, and what it cost"]
    assert compacted.column("status") == ["done", "done", "failed", "stale"]
    assert compacted.column("turn") == [3, None, 4, 5]
    assert compacted.column("problem") == [None, "RATE_LIMIT", "ABORTED", None]
    assert compacted.column("cost")[0] is not None and compacted.column("cost")[1:] == [None] * 3
    [fell_back] = results["Compactions that fell back to the reduction, and why"]
    assert fell_back.column("failure_code") == ["RATE_LIMIT"]
    assert fell_back.column("model_wrote") == [None]  # the call failed: no answer to set aside

    [edits] = results["The agent's cells in the notebook"]
    assert edits.column("call_id") == ["c-nb", "c-nb"] and edits.column("position") == [0, 1]
    assert edits.column("applied") == ["set_next_input", "card"]
    assert edits.column("after_cell") == ["chat-cell", "chat-cell"]
    assert edits.column("source") == ["%%python\ndf.describe()", "The summary."]
    assert edits.column("cell_id") == [None, None]

    [servers, structured] = results[
        "MCP servers: how often the agent called each, and how many calls failed"
    ]
    assert servers.rows == (
        ("time", 3, 1, 2, 0, ["convert_time", "get_current_time"],
         ["INVALID_ARGS", "MCP_TOOL_ERROR"], servers.column("avg_ms")[0]),
        ("my.files", 2, 1, 0, 1, ["read_file", "write_file"], ["DENIED"],
         servers.column("avg_ms")[1]),
        ("db", 1, 0, 1, 0, ["query"], ["MCP_TIMEOUT"], servers.column("avg_ms")[2]),
    )  # fmt: skip
    assert structured.column("tool") == ["read_file", "convert_time", "get_current_time"]
    assert structured.column("datetime") == [None, None, "2026-03-01T12:00:00+00:00"]
    assert structured.column("resources") == [[NOTES_URI], None, None]

    lineage, left, cells = results["Branches: re-run chat cells"]
    assert lineage.column("session_id") == [R, Y, O, G]  # the newest branch is in P's lineage
    assert lineage.column("parent_kind") == ["rewind", "policy", "fork", "rewind"]
    assert lineage.column("depth") == [1, 1, 1, 2] and lineage.column("parent_session")[3] == R
    assert lineage.column("dropped_turns") == [[2, 3], None, None, [3, 4]]
    assert lineage.column("replaces_turn") == [2, None, None, 3]
    assert left.rows[:2] == (
        (R, 1, "c1", "deleted", "question 1"),
        (R, 3, "c4", "rerun", "question 4"),
    )
    assert P not in left.column("session_id")  # a rewind leaves the parent's context as it was
    runs = dict(zip(cells.column("cell_id"), cells.column("runs"), strict=True))
    assert runs == {"c1": 1, "c2": 2, "c3": 1, "c4": 3, "c5": 1, "k2": 1}
    assert cells.column("in_context")[cells.column("cell_id").index("c4")] == 2

    [refused] = results["Approvals that were refused"]
    assert refused.column("outcome") == ["rejected", "rejected"]
    [teams] = results["Joining a DataFrame from the notebook"]
    assert sorted(map(str, teams.column("team"))) == ["a", "b", "c", "d"]
