"""Compaction through a real kernel (issue 16, items 1 and 4).

The loopback server plays the model as a real server would: it counts each request's tokens (``chars
/ 4`` of the body, which over-counts a little) and reports them as usage, answers every question at
length (~1,000 tokens) and every summary call — recognised by its last user message, the compaction
instruction — with a short checkpoint. With a 4,096-token window configured, six long answers in a
row all succeed: the kernel compacts before the requests that would fill 80 % of it, each chat cell
shows a one-line note where that happened, every request the server got fits the window, the store
has the ``compaction/*`` events and still every original prompt and answer in ``messages``, and
``%agent status`` says how much of the window is used and how often the session was compacted. Then
``%agent compact`` by hand, until there is nothing left to compact; the interrupt stopping it; its
switch, a bad argument, the setting surviving ``%agent new``, and why there was nothing to compact.

A second kernel's server answers every summary call with the instruction's headings and nothing
under them (what Qwen2.5-Coder-0.5B wrote on a live server): the reduction stands in, the
``compactions`` view says ``SUMMARY_UNFIT``, the cell's note says why, and every later request
still carries the code name the user gave in turn 1.

A third has ``DSH_COMPACTION=off`` over ``c.DshKernel.compaction = True``: the same long
answers overflow the window instead (nothing compacted) until ``%agent compact`` makes room by hand.
A fourth reads the traitlet alone, and refuses a bad ``DSH_COMPACTION`` with one line naming it.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from dsh_kernel.agent.compaction.run import INSTRUCTION
from tests.kernel.conftest import provider_env
from tests.support import scenarios as sc
from tests.support.frontend import Frontend
from tests.support.kernel import Execution, Kernel, start_kernel
from tests.support.sse_server import Recorded, Reply, SseServer, frames_from_sse, sse_reply
from tests.support.wire_transcripts import chat_text_stream

WINDOW = 4096
CHECKPOINT = (  # a summary as a model that summarises writes it: it passes the substance check
    "## Goal\n- Answer the user's numbered questions, each about one topic.\n## Notebook state\n"
    "(none)\n## Done so far\n- CHECKPOINT of the answers so far: each question asked to be told "
    "about a topic, and each answer came in 25 parts of plain words, a long answer every time.\n"
    "## Errors and how they were resolved\n(none)\n## Open questions and next step\n- Answer "
    "the next numbered question about its topic in the same plain words, at the same length."
)
HEADINGS = (  # what Qwen2.5-Coder-0.5B answered a live server's summary call with, twice
    "## Goal\n## Notebook state\n## Done so far\n## Errors and how they were resolved\n"
    "## Open questions and next step"
)
_INSTRUCTION_START = INSTRUCTION.split("\n", 1)[0][:60]


class Model:
    """The model the server plays (module docstring); ``answers`` and ``summaries`` count calls."""

    def __init__(self, summary: str = CHECKPOINT) -> None:
        self.answers = 0
        self.summaries = 0
        self.summary = summary

    def __call__(self, rec: Recorded) -> Reply | None:
        body = rec.json if isinstance(rec.json, dict) else {}
        messages: list[Any] = body.get("messages", [])
        prompt = len(rec.body) // 4
        if messages and _INSTRUCTION_START in json.dumps(messages[-1]):
            self.summaries += 1
            return _reply([self.summary], prompt)
        self.answers += 1
        n = self.answers
        pieces = [
            f"Answer {n}, part {j}: " + "plain words of a long answer " * 5 for j in range(25)
        ]
        return _reply(pieces, prompt)


def _reply(pieces: list[str], prompt_tokens: int) -> Reply:
    out = sum(len(p) for p in pieces) // 4
    usage = {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": out,
        "total_tokens": prompt_tokens + out,
    }
    return sse_reply(frames_from_sse(chat_text_stream(pieces, usage=usage)))


def is_summary_call(rec: Recorded) -> bool:
    return _INSTRUCTION_START in json.dumps(rec.json["messages"][-1])


def command(k: Kernel, line: str) -> str:
    ex = k.execute(line)
    assert ex.status == "ok", ex.content
    return ex.stdout.strip()


def sql(k: Kernel, query: str) -> list[dict[str, Any]]:
    """The rows of a ``%%sql`` query over the store (this session's id is ``$sid``)."""
    k.python("sid = get_ipython().kernel.host.agent.session.id")
    ex = k.execute("%%sql rows <<\n" + query)
    assert ex.status == "ok", ex.content
    return json.loads(k.python("print(rows.to_json(orient='records'))"))


def saved_html(ex: Execution) -> str:
    """The chat cell's saved rendering (the static HTML the view leaves)."""
    return "".join(ex.data("text/html"))


@pytest.fixture(scope="module")
def rig(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Kernel, SseServer, Model]]:
    tmp = tmp_path_factory.mktemp("compaction")
    model = Model()
    with (
        SseServer() as server,
        start_kernel(
            tmp, "dsh", env=provider_env(server, tmp, DSH_CONTEXT_WINDOW=str(WINDOW))
        ) as k,
    ):
        server.script(respond=model)
        yield k, server, model


def test_six_long_answers_in_a_row_fit_a_small_window(
    rig: tuple[Kernel, SseServer, Model],
) -> None:
    k, server, model = rig
    cells = [k.execute(f"Question {i}: tell me about topic {i}.", timeout=120) for i in range(1, 7)]
    assert [ex.status for ex in cells] == ["ok"] * 6, [ex.content for ex in cells]
    assert model.answers == 6 and model.summaries >= 1
    # Every request the server received fits the window (its whole body, at 4 characters a token).
    sizes = [len(r.body) / 4 for r in server.requests]
    assert max(sizes) <= WINDOW, sizes
    chats = [r for r in server.requests if not is_summary_call(r)]
    assert len(chats) == 6
    last = json.dumps(chats[-1].json["messages"])
    assert "<compacted-summary>" in last and "CHECKPOINT" in last
    assert "Question 1:" not in last and "Question 6:" in last  # summarised, and the newest kept
    # The cells where a compaction happened say so, in one line each.
    notes = [cell for cell in cells if "Compacted " in saved_html(cell)]
    assert notes, saved_html(cells[-1])
    html = saved_html(notes[0])
    assert "earlier turn" in html and " tokens) by a model summary" in html and "→" in html, html
    assert "ℹ️ Compacted " in html and "dsh-info" in html
    # The store has the compaction events and every original prompt and answer.
    kinds = {
        r["type"]: r["n"]
        for r in sql(
            k,
            "SELECT type, count(*) AS n FROM events WHERE session_id = $sid "
            "AND type LIKE 'compaction/%' GROUP BY type",
        )
    }
    assert kinds["compaction/start"] == kinds["compaction/end"] == kinds["compaction/summary"]
    assert kinds["compaction/summary"] == model.summaries
    methods = sql(
        k,
        "SELECT data->>'method' AS method FROM events WHERE session_id = $sid "
        "AND type = 'compaction/summary'",
    )
    assert {r["method"] for r in methods} == {"model"}
    said = sql(
        k,
        "SELECT role, text FROM messages WHERE session_id = $sid AND surface_op = 'append' "
        "AND (source = 'user' OR role = 'assistant') ORDER BY seq",
    )
    prompts = [r["text"] for r in said if r["role"] == "user"]
    answers = [r["text"] for r in said if r["role"] == "assistant"]
    assert prompts == [f"Question {i}: tell me about topic {i}." for i in range(1, 7)]
    assert [a.split(",", 1)[0] for a in answers] == [f"Answer {i}" for i in range(1, 7)]
    # %agent status: the context against the window, and how often it was compacted.
    status = command(k, "%agent status")
    context = next(ln for ln in status.splitlines() if ln.startswith("context:"))
    share = float(context.rsplit("(", 1)[1].rstrip("%)"))
    assert f"of {WINDOW:,}" in context and share < 80, status
    assert (
        f"compaction: on, at 80% of the {WINDOW:,}-token window; compacted "
        f"{model.summaries} time" in status
    ), status


def test_agent_compact_by_hand_until_nothing_is_left(
    rig: tuple[Kernel, SseServer, Model],
) -> None:
    k, server, model = rig
    before = model.summaries
    server.script(respond=model)
    out = command(k, "%agent compact")
    assert out.startswith("compacted ") and " tokens)" in out, out
    assert model.summaries == before + 1  # the model wrote it
    assert [is_summary_call(r) for r in server.requests] == [True]
    for _ in range(3):  # each round summarises what the last one kept; then nothing is left
        out = command(k, "%agent compact")
        if out.startswith("nothing to compact: "):
            break
    assert out == (
        "nothing to compact: everything before the latest exchange is summarised already"
    ), out
    events = [e for e in k.events() if e["type"] in ("command/run", "command/done")]
    runs = [e for e in events if e["type"] == "command/run" and e["data"]["name"] == "compact"]
    assert runs and all(e["data"]["source"] == {"kind": "user"} for e in runs)
    assert events[-1]["data"]["text"] == out  # logged with what it printed
    starts = [e for e in k.events() if e["type"] == "compaction/start"]
    assert starts[-1]["data"]["trigger"] == "manual" and starts[-1]["data"]["turn"] is None
    # The next message still works, from the compacted history.
    server.script(respond=model)
    assert k.execute("Question 7: and now?", timeout=120).status == "ok"
    assert "<compacted-summary>" in json.dumps(server.requests[-1].json["messages"])


def test_the_interrupt_stops_a_compaction_by_hand(rig: tuple[Kernel, SseServer, Model]) -> None:
    k, server, model = rig

    def hang_on_summaries(rec: Recorded) -> Reply | None:
        return sse_reply((), close="hang") if is_summary_call(rec) else model(rec)

    server.script(respond=hang_on_summaries)
    surface = k.python("print(list(get_ipython().kernel.host.agent.session.surface))")
    cell = Frontend(k).submit("%agent compact")
    cell.pump(lambda: bool(server.requests), what="the summary call")
    k.km.interrupt_kernel()
    ex = cell.finish(timeout=30)
    assert ex.status == "error" and ex.content["ename"] == "ABORTED", ex.content
    assert ex.content["evalue"] == "%agent compact: stopped; the history is unchanged"
    assert k.python("print(list(get_ipython().kernel.host.agent.session.surface))") == surface
    end = [e for e in k.events() if e["type"] == "compaction/end"][-1]
    assert end["data"]["error"]["code"] == "ABORTED"
    done = [e for e in k.events() if e["type"] == "command/done"][-1]
    assert done["data"]["kind"] == "error"
    server.script(respond=model)  # the kernel is healthy: the next compaction works
    assert command(k, "%agent compact").startswith("compacted ")


def test_the_switch_a_bad_argument_and_a_new_session(
    rig: tuple[Kernel, SseServer, Model],
) -> None:
    k, _, _ = rig
    assert command(k, "%agent compact off").startswith("compaction: off (`%agent compact`")
    assert "compaction: off" in command(k, "%agent status")
    assert "compaction: off" in command(k, "%agent new") + command(k, "%agent status")
    assert command(k, "%agent compact on").startswith(
        f"compaction: on, at 80% of the {WINDOW:,}-token window"
    )
    bad = k.execute("%agent compact later")
    assert bad.status == "error" and bad.content["ename"] == "USAGE", bad.content
    evalue = bad.content["evalue"]
    assert evalue.startswith("%agent compact: usage: %agent compact") and "\n" not in evalue
    mixed = k.execute("%agent compact\n%agent status")  # it waits for a model: a cell of its own
    assert mixed.status == "error" and mixed.content["ename"] == "USAGE", mixed.content
    assert "a cell of its own" in mixed.content["evalue"]
    assert command(k, "%agent compact") == "nothing to compact: there is no conversation yet"
    assert "summarise older turns now" in command(k, "%agent help")


def test_why_there_is_nothing_to_compact(rig: tuple[Kernel, SseServer, Model]) -> None:
    k, server, model = rig
    command(k, "%agent new")
    server.script(sc.text("A short answer."))
    assert k.execute("Hi.", timeout=120).status == "ok"
    out = command(k, "%agent compact")
    assert out.startswith("nothing to compact: what came before the latest exchange (~"), out
    assert out.endswith(
        f"is all in the recent part kept as it is (16% of the {WINDOW:,}-token window)"
    ), out
    server.script(respond=model)  # a long answer: the tail kept is the answer alone
    assert k.execute("And at length?", timeout=120).status == "ok"
    out = command(k, "%agent compact")
    assert out == (
        "nothing to compact: what lies before the recent part kept as it is (16% of the "
        f"{WINDOW:,}-token window) is too little to be worth a summary (at most ~200 tokens)"
    ), out
    assert not [r for r in server.requests if is_summary_call(r)]  # the model was never asked


def test_dsh_compaction_off_leaves_the_window_to_fill(tmp_path: Path) -> None:
    profile = tmp_path / "ipython" / "profile_default"
    profile.mkdir(parents=True)
    (profile / "ipython_kernel_config.py").write_text(
        "c.DshKernel.compaction = True\n", encoding="utf-8"
    )
    model = Model()
    env = {"DSH_CONTEXT_WINDOW": str(WINDOW), "DSH_COMPACTION": "off"}
    with (
        SseServer() as server,
        start_kernel(tmp_path, "dsh", env=provider_env(server, tmp_path, **env)) as k,
    ):
        server.script(respond=model)
        assert "compaction: off" in command(k, "%agent status")  # the variable over the traitlet
        failed: Execution | None = None
        for i in range(1, 7):
            ex = k.execute(f"Question {i}: tell me about topic {i}.", timeout=120)
            if ex.status != "ok":
                failed = ex
                break
        assert failed is not None and failed.content["ename"] == "CONTEXT_WINDOW_EXCEEDED"
        assert model.summaries == 0
        assert not [e for e in k.events() if e["type"].startswith("compaction/")]
        out = command(k, "%agent compact")  # by hand it still compacts
        assert out.startswith("compacted ") and model.summaries == 1, out
        assert k.execute("Question 9: and now?", timeout=120).status == "ok"


def test_a_template_echo_is_set_aside_and_turn_1s_fact_is_still_sent(tmp_path: Path) -> None:
    model = Model(summary=HEADINGS)
    env = {"DSH_CONTEXT_WINDOW": str(WINDOW)}
    with (
        SseServer() as server,
        start_kernel(tmp_path, "dsh", env=provider_env(server, tmp_path, **env)) as k,
    ):
        server.script(respond=model)
        first = k.execute("My project's code name is Zephyrine. Please remember it.", timeout=120)
        assert first.status == "ok", first.content
        cells = [
            k.execute(f"Question {i}: tell me about topic {i}.", timeout=120) for i in range(2, 8)
        ]
        assert [ex.status for ex in cells] == ["ok"] * 6, [ex.content for ex in cells]
        assert model.summaries >= 1
        # the store: the reduction stood in, and says why
        rows = sql(
            k,
            "SELECT status, method, failure_code, failure_message, provider FROM compactions "
            "WHERE session_id = $sid ORDER BY start_seq",
        )
        assert rows and rows[0] == {
            "status": "done",
            "method": "reduction",
            "failure_code": "SUMMARY_UNFIT",
            "failure_message": "only the instruction's headings, nothing under them",
            "provider": "openai-compatible",
        }, rows
        raw = sql(
            k,
            "SELECT data->>'rawOutput' AS raw FROM events WHERE session_id = $sid "
            "AND type = 'compaction/summary' ORDER BY seq LIMIT 1",
        )
        assert raw == [{"raw": HEADINGS}]
        # the cell where it happened says which method and why
        noted = [cell for cell in cells if "Compacted " in saved_html(cell)]
        assert noted, saved_html(cells[-1])
        assert (
            "earlier turns (~" in saved_html(noted[0])
            and " by a deterministic reduction (the model's summary was not used — SUMMARY_UNFIT: "
            "only the instruction's headings, nothing under them)</div>"
            in saved_html(noted[0])
        ), saved_html(noted[0])
        # every later request the server got still carries turn 1's fact, in the reduction
        chats = [r for r in server.requests if not is_summary_call(r)]
        after = [r for r in chats if "<compacted-summary>" in json.dumps(r.json["messages"])]
        assert after and all("Zephyrine" in json.dumps(r.json["messages"]) for r in after)
        last = after[-1].json["messages"]
        assert not any(
            m.get("content") == "My project's code name is Zephyrine. Please remember it."
            for m in last
        )  # not as the message it was: inside the reduction that replaced turn 1
        assert "deterministic reduction" in json.dumps(last)


def test_the_traitlet_and_a_bad_variable(tmp_path: Path) -> None:
    profile = tmp_path / "ipython" / "profile_default"
    profile.mkdir(parents=True)
    (profile / "ipython_kernel_config.py").write_text(
        "c.DshKernel.compaction = False\n", encoding="utf-8"
    )
    with (
        SseServer() as server,
        start_kernel(tmp_path, "dsh", env=provider_env(server, tmp_path)) as k,
    ):
        k.python("import os; os.environ['DSH_COMPACTION'] = 'maybe'")
        bad = k.execute("%agent status")
        assert bad.status == "error" and bad.content["ename"] == "USAGE", bad.content
        assert (
            "DSH_COMPACTION='maybe' is not a compaction setting: use on" in (bad.content["evalue"])
        )
        chat = k.execute("Hello?")
        assert chat.status == "error" and "DSH_COMPACTION='maybe'" in chat.content["evalue"]
        k.python("del os.environ['DSH_COMPACTION']")
        assert "compaction: off (" in command(k, "%agent status")  # c.DshKernel.compaction
        assert server.requests == []
