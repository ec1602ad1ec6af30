"""An MCP call names its server before it has a result: the agent logs the tool's ``origin`` on the
``tool/call``, so ``tool_calls.server`` and ``mcp_calls`` show a call still waiting for its approval
or running, and crash repair copies the origin into the result it writes for a call the kernel was
killed in (``meta.origin``, as the live pipeline's results carry it). A log written before
``tool/call`` named its origin is read from the results' meta, as before.

The sessions are recorded by a real ``Agent`` with the kernel's MCP tool definitions
(``mcp_session``); the server double holds its answer, or the person their click, until the test
has read the journal as it stands mid-call. A copy of that journal in a second store is a journal
whose writer is gone, as a killed kernel leaves it: that store's ingest commits crash repair to it.
"""

from __future__ import annotations

import asyncio
import json
import shutil
from pathlib import Path

from dsh_kernel import Agent
from dsh_kernel.abort import AbortSignal
from dsh_kernel.jsonvalue import JsonObject
from dsh_kernel.session.repair import TOOL_NOT_STARTED, TOOL_OUTCOME_UNKNOWN
from dsh_kernel.store.ingest.incremental import ingest
from dsh_kernel.store.journal import JournalWriter, read_session
from dsh_kernel.store.layout import Store
from dsh_kernel.store.query.run import run_query
from dsh_kernel.testing import ScriptedProvider, text_response, tool_call_response
from dsh_kernel.tools.approval import ApprovalPolicy, ApprovalRequest

from .conftest import make_agent, usage
from .mcp_session import WRITE_FILE, ServerDouble, definitions, record_mcp_session, servers

WAIT_S = 60.0
"""How long the test waits for the agent to reach the call (a condition, never a fixed sleep)."""

TIME = {"mcp": "time", "tool": "get_current_time"}
FILES = {"mcp": "my.files", "tool": "write_file"}

MCP_ROW = (
    "SELECT call_id, name, server, tool, status, error_code, ended_at IS NULL, result_seq IS NULL "
    "FROM mcp_calls"
)


class HeldDouble(ServerDouble):
    """A server double whose ``call`` waits for ``release`` once it is ``entered``."""

    def __init__(self, double: ServerDouble) -> None:
        super().__init__(double.name, double.tools, double.answers)
        self.entered = asyncio.Event()
        self.release = asyncio.Event()

    async def call(
        self,
        tool: str,
        arguments: JsonObject,
        *,
        signal: AbortSignal,
        idle_s: float,
        deadline_s: float,
        on_progress: object = None,
    ) -> JsonObject:
        self.entered.set()
        await self.release.wait()
        return await super().call(
            tool, arguments, signal=signal, idle_s=idle_s, deadline_s=deadline_s
        )


def rows(store: Store, sql: str) -> list[tuple[object, ...]]:
    return list(run_query(store, sql).rows)


def tool_call_origins(agent: Agent) -> dict[str, object]:
    return {
        str(e.data["callId"]): e.data.get("origin")
        for e in agent.session.events
        if e.type == "tool/call"
    }


def copy_journal(writer: JournalWriter, store: Store, into: Store) -> Path:
    """The journal as it stands now, in ``into``: a journal nobody writes (a killed kernel's)."""
    writer.flush()
    target = into.root / store.relative(writer.path)
    target.parent.mkdir(parents=True)
    shutil.copyfile(writer.path, target)
    return target


async def finish(
    agent: Agent, provider: ScriptedProvider, writer: JournalWriter, gate: asyncio.Event
) -> None:
    gate.set()
    await asyncio.wait_for(agent.when_idle(), WAIT_S)
    provider.assert_consumed()
    writer.close()


async def test_every_mcp_tool_call_names_its_origin_and_the_kernels_own_do_not(
    store: Store,
) -> None:
    agent, _ = await record_mcp_session(store)
    origins = tool_call_origins(agent)
    assert origins == {
        "m-time": TIME,
        "m-bad": TIME,  # refused by the schema before approval: a tool/call all the same
        "m-convert": {"mcp": "time", "tool": "convert_time"},
        "m-read": {"mcp": "my.files", "tool": "read_file"},
        "m-write": FILES,
        "m-query": {"mcp": "db", "tool": "query"},
        "c-own": None,
    }
    # the call and every result of it say the same
    for e in agent.session.events:
        if e.type == "tool/result":
            meta = e.data.get("meta")
            origin = meta.get("origin") if isinstance(meta, dict) else None
            call_id = e.data["message"]["source"]["callId"]  # type: ignore[index]
            assert origin == origins[str(call_id)]


async def test_a_running_mcp_call_names_its_server_and_a_killed_one_keeps_it(
    store: Store, tmp_path: Path
) -> None:
    time, *_ = servers()
    held = HeldDouble(time)
    agent, provider, writer = make_agent(
        store,
        [
            tool_call_response(
                "time__get_current_time", {"timezone": "UTC"}, call_id="m-time", usage=usage()
            ),
            text_response("It is noon.", usage=usage()),
        ],
        extra_tools=definitions((held,)),
        approval=ApprovalPolicy("ask"),  # read-only hints trusted: it runs without asking
    )
    agent.followup("What time is it?")
    await asyncio.wait_for(held.entered.wait(), WAIT_S)
    assert tool_call_origins(agent) == {"m-time": TIME}

    # mid-call, the writer alive: a running row naming its server
    killed = copy_journal(writer, store, Store.at(tmp_path / "killed"))
    assert ingest(store).repaired == ()
    assert rows(store, MCP_ROW) == [
        ("m-time", "time__get_current_time", "time", "get_current_time", "running", None, True,
         True)
    ]  # fmt: skip
    assert rows(store, "SELECT server FROM tool_calls") == [("time",)]

    # the copy has no writer: ingest commits crash repair, whose result names the origin too
    other = Store.at(tmp_path / "killed")
    report = ingest(other)
    assert [Path(p).name for p in report.repaired] == [killed.name]
    repaired = read_session(killed).events
    [closer] = [e for e in repaired if e.type == "tool/result"]
    assert closer.data["error"] == {"name": "ToolOutcomeUnknownError", "code": TOOL_OUTCOME_UNKNOWN}
    assert closer.data["meta"] == {"origin": TIME}
    assert rows(other, MCP_ROW) == [
        ("m-time", "time__get_current_time", "time", "get_current_time", "interrupted",
         TOOL_OUTCOME_UNKNOWN, False, False)
    ]  # fmt: skip

    await finish(agent, provider, writer, held.release)
    assert held.calls == [("get_current_time", {"timezone": "UTC"})]
    assert ingest(store).status == "ingested"
    assert rows(store, "SELECT status, server, tool FROM mcp_calls") == [
        ("done", "time", "get_current_time")
    ]


async def test_an_mcp_call_waiting_for_its_approval_names_its_server_and_a_killed_one_keeps_it(
    store: Store, tmp_path: Path
) -> None:
    doubles = servers()
    files = doubles[1]
    asked, answer_now = asyncio.Event(), asyncio.Event()

    async def answer(rid: object, request: ApprovalRequest) -> object:
        del rid, request
        asked.set()
        await answer_now.wait()
        return "rejected"

    agent, provider, writer = make_agent(
        store,
        [
            tool_call_response(
                WRITE_FILE, {"path": "notes.txt", "text": "x"}, call_id="m-write", usage=usage()
            ),
            text_response("Not written.", usage=usage()),
        ],
        answerer=answer,
        extra_tools=definitions(doubles),
        approval=ApprovalPolicy("ask"),
    )
    agent.followup("Write x to my notes.")
    await asyncio.wait_for(asked.wait(), WAIT_S)
    assert tool_call_origins(agent) == {"m-write": FILES}

    killed = copy_journal(writer, store, Store.at(tmp_path / "killed"))
    ingest(store)
    assert rows(store, MCP_ROW) == [
        ("m-write", WRITE_FILE, "my.files", "write_file", "waiting", None, True, True)
    ]

    other = Store.at(tmp_path / "killed")
    assert len(ingest(other).repaired) == 1
    [closer] = [e for e in read_session(killed).events if e.type == "tool/result"]
    assert closer.data["error"] == {"name": "ToolNotStartedError", "code": TOOL_NOT_STARTED}
    assert closer.data["meta"] == {"origin": FILES}
    assert rows(other, MCP_ROW) == [
        ("m-write", WRITE_FILE, "my.files", "write_file", "interrupted", TOOL_NOT_STARTED, False,
         False)
    ]  # fmt: skip

    await finish(agent, provider, writer, answer_now)
    assert files.calls == []  # rejected: it never reached the server
    ingest(store)
    assert rows(store, "SELECT status, error_code FROM mcp_calls") == [("denied", "DENIED")]


async def test_a_log_whose_tool_calls_name_no_origin_is_read_from_the_results(
    store: Store, tmp_path: Path
) -> None:
    await record_mcp_session(store)
    want = rows(store, "SELECT * FROM mcp_calls ORDER BY call_seq")
    assert len(want) == 6
    # the same journal as a kernel wrote it before tool/call named its origin
    older = Store.at(tmp_path / "older")
    [path] = store.iter_journals()
    target = older.root / store.relative(path)
    target.parent.mkdir(parents=True)
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    stripped = 0
    with target.open("w", encoding="utf-8") as out:
        for line in lines:
            event = json.loads(line)
            if event.get("type") == "tool/call" and "origin" in event["data"]:
                del event["data"]["origin"]
                line = json.dumps(event, ensure_ascii=False, separators=(",", ":")) + "\n"
                stripped += 1
            out.write(line)
    assert stripped == 6
    assert rows(older, "SELECT * FROM mcp_calls ORDER BY call_seq") == want
    assert rows(older, "SELECT count(*) FROM t_tool_calls WHERE server IS NOT NULL") == [(0,)]
    assert rows(store, "SELECT count(*) FROM t_tool_calls WHERE server IS NOT NULL") == [(6,)]
