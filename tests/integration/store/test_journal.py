"""The journal: layout, write-behind batching, durable checkpoints, failed writes, loading and repair."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest

from dsh_kernel.errors import SessionFormatError, StoreError
from dsh_kernel.llm.types import GenerateRequest, StreamChunk
from dsh_kernel.session.codec import encode_event
from dsh_kernel.session.events import SessionHeader
from dsh_kernel.session.journal_io import read_journal
from dsh_kernel.session.log import Session
from dsh_kernel.store.journal import JournalWriter, attach_journal, load_session, read_session
from dsh_kernel.store.layout import Store, store_dir
from dsh_kernel.testing import FunctionProvider, text_response

from .conftest import chat, make_agent

HEADER = SessionHeader(
    id="0f8e2d4c-1111-4222-8333-944455556666", created_at=1_767_225_600_000, cwd="/w"
)


def _session(n_turns: int = 1, *, open_last: bool = False) -> Session:
    s = Session(header=HEADER)
    for t in range(1, n_turns + 1):
        s.append("turn/start", {"turn": t})
        s.append("step/start", {"turn": t, "step": 1})
        s.append(
            "user/message",
            {
                "id": f"m{t}",
                "role": "user",
                "content": [{"type": "text", "text": f"hi {t}"}],
                "source": {"kind": "user"},
            },
            surface_op="append",
        )
        if open_last and t == n_turns:
            return s
        s.append("step/end", {"turn": t, "step": 1})
        s.append("turn/end", {"turn": t, "reason": {"kind": "completed"}})
    return s


def test_store_dir_resolution(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("DSH_STORE", str(tmp_path / "explicit"))
    assert store_dir() == tmp_path / "explicit"
    monkeypatch.delenv("DSH_STORE")
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    assert store_dir() == tmp_path / "xdg" / "dsh-kernel"
    monkeypatch.delenv("XDG_DATA_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert store_dir() == tmp_path / "home" / ".local" / "share" / "dsh-kernel"


def test_journal_path_layout_and_bad_ids(store: Store) -> None:
    assert (
        store.journal_path(HEADER) == store.root / "journals" / "2026-01-01" / f"{HEADER.id}.jsonl"
    )
    with pytest.raises(StoreError) as err:
        store.journal_path(SessionHeader(id="../escape", created_at=0))
    assert err.value.code == "BAD_SESSION_ID"


def test_unwritable_store_is_a_clear_error(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    with pytest.raises(StoreError) as err:
        Store.open(blocker / "store")
    assert err.value.code == "STORE_NOT_WRITABLE"
    assert str(blocker / "store") in err.value.message and "DSH_STORE" in err.value.message
    assert Store.open(tmp_path / "ok").journals_dir.is_dir()


def test_a_session_that_never_appends_leaves_no_file(store: Store) -> None:
    s = Session(header=HEADER)
    w = attach_journal(s, store)
    w.close()
    assert not w.path.exists()


async def test_write_behind_window_then_flush(store: Store) -> None:
    s = Session(header=HEADER)
    w = JournalWriter(store.journal_path(HEADER), HEADER, window_s=0.05)
    w.attach(s)
    s.append("turn/start", {"turn": 1})
    s.append("step/start", {"turn": 1, "step": 1})
    assert w.pending == 2 and not w.path.exists()  # queued, not written
    for _ in range(200):  # the window closes after 50 ms; allow a slow machine
        await asyncio.sleep(0.01)
        if w.committed:
            break
    assert w.pending == 0 and w.committed == 2  # the window wrote the batch, without a flush
    s.append("step/end", {"turn": 1, "step": 1})
    s.append("turn/end", {"turn": 1, "reason": {"kind": "completed"}})
    w.flush()
    loaded = read_journal(w.path.read_text(encoding="utf-8"), name="j")
    assert loaded.header == HEADER
    assert list(loaded.events) == list(s.events)
    w.close()


def test_without_a_loop_only_flush_writes(store: Store) -> None:
    s = _session(1)
    w = attach_journal(s, store)
    assert w.pending == len(s) and not w.path.exists()
    w.flush()
    assert w.committed == len(s)
    w.close()
    assert read_session(w.path).events == tuple(s.events)


def test_failed_write_keeps_events_and_flush_retries(store: Store) -> None:
    s = _session(1)
    path = store.journal_path(HEADER)
    path.mkdir(parents=True)  # a directory where the journal should go: every write fails
    w = JournalWriter(path, HEADER)
    w.attach(s)
    with pytest.raises(StoreError) as err:
        w.flush()
    assert err.value.code == "JOURNAL_WRITE_FAILED" and str(path) in err.value.message
    assert w.pending == len(s) and w.committed == 0
    path.rmdir()
    w.flush()
    assert w.pending == 0
    assert read_session(path).events == tuple(s.events)
    w.close()


def test_a_write_that_fails_midway_keeps_its_events() -> None:
    if not Path("/dev/full").exists():
        pytest.fail("this test needs /dev/full (Linux)")
    s = _session(1)
    w = JournalWriter("/dev/full", HEADER)
    w.attach(s)
    with pytest.raises(StoreError) as err:
        w.flush()
    assert err.value.code == "JOURNAL_WRITE_FAILED"
    assert w.pending == len(s) and w.last_error is err.value
    with pytest.raises(StoreError):
        w.close()  # the final flush fails too, but the file is released
    assert w.pending == len(s)


async def test_every_request_sees_its_prompt_already_on_disk(store: Store) -> None:
    seen: list[list[str]] = []

    def respond(request: GenerateRequest) -> list[StreamChunk]:
        path = store.journal_path(agent.session.header)
        lines = path.read_text(encoding="utf-8").splitlines()
        seen.append(lines)
        assert request.messages[-1].text() in path.read_text(encoding="utf-8")
        return text_response("ok")

    agent, _, writer = make_agent(store, [])
    agent.set_route(provider=FunctionProvider(respond, id="scripted"))
    writer.window_s = 60.0  # no background writes: only checkpoints can have put it there
    await chat(agent, "first question", "second question")
    assert len(seen) == 2
    assert len(seen[1]) > len(seen[0])
    writer.close()


async def test_a_failed_checkpoint_stops_the_turn_before_the_model_runs(store: Store) -> None:
    agent, provider, writer = make_agent(store, [text_response("never")])
    path = store.journal_path(agent.session.header)
    path.mkdir(parents=True)
    await chat(agent, "hello")
    assert provider.requests == []  # fail closed: the model was never called
    ends = [e.data["reason"] for e in agent.session.events if e.type == "turn/end"]
    assert ends and ends[-1]["kind"] == "error"  # type: ignore[index]
    assert ends[-1]["error"]["code"] == "JOURNAL_WRITE_FAILED"  # type: ignore[index]
    path.rmdir()
    writer.close()
    assert read_session(path).events == tuple(agent.session.events)


def test_adopting_an_existing_journal(store: Store) -> None:
    s = _session(1)
    w = attach_journal(s, store)
    w.close()
    other = SessionHeader(id="aaaaaaaa-1111-4222-8333-944455556666", created_at=HEADER.created_at)
    with pytest.raises(StoreError) as err:
        JournalWriter(w.path, other)
    assert err.value.code == "JOURNAL_MISMATCH"
    with open(w.path, "ab") as f:
        f.write(b'{"type":"turn/start","seq":5,')
    with pytest.raises(StoreError) as err:
        JournalWriter(w.path, HEADER)
    assert err.value.code == "JOURNAL_TORN"


def test_load_session_commits_crash_repair_to_the_file(store: Store) -> None:
    s = _session(2, open_last=True)
    w = attach_journal(s, store)
    w.close()
    before = w.path.read_bytes()
    header, events, repaired = load_session(w.path)
    assert header == HEADER and repaired
    assert [e.type for e in events[len(s) :]] == ["step/end", "turn/end"]
    assert events[-1].data == {"turn": 2, "reason": {"kind": "interrupted"}}
    after = w.path.read_bytes()
    assert after.startswith(before) and len(after) > len(before)  # appended, never truncated
    again = load_session(w.path)
    assert not again.repaired and again.events == events
    assert w.path.read_bytes() == after


def test_torn_last_line_is_dropped_and_cut_from_the_file(store: Store) -> None:
    s = _session(1)
    w = attach_journal(s, store)
    w.close()
    good = w.path.read_bytes()
    with open(w.path, "ab") as f:
        f.write(b'{"type":"session/title","seq":5,"time":1,"da')
    loaded = load_session(w.path)
    assert loaded.events == tuple(s.events) and not loaded.repaired
    assert w.path.read_bytes() == good
    # and it can be appended to again
    s2 = Session(header=HEADER, seed=loaded.events)
    w2 = attach_journal(s2, store)
    s2.append("session/title", {"title": "t", "source": {"kind": "user"}})
    w2.close()
    assert [e.type for e in read_session(w.path).events][-2:] == [
        "session/end-seed",
        "session/title",
    ]


def test_a_corrupt_middle_line_is_refused_naming_file_and_line(store: Store) -> None:
    s = _session(2)
    w = attach_journal(s, store)
    w.close()
    lines = w.path.read_text(encoding="utf-8").split("\n")
    lines[3] = lines[3][:10] + "#garbage#" + lines[3][10:]
    w.path.write_text("\n".join(lines), encoding="utf-8")
    with pytest.raises(SessionFormatError) as err:
        load_session(w.path)
    assert f"{w.path}:4:" in str(err.value)
    with pytest.raises(SessionFormatError):
        read_session(w.path)


def test_a_live_journal_cannot_be_repaired_from_elsewhere(store: Store) -> None:
    s = _session(1, open_last=True)
    w = attach_journal(s, store)
    w.flush()  # the writer now holds the file
    with pytest.raises(StoreError) as err:
        load_session(w.path)
    assert err.value.code == "SESSION_LIVE"
    assert read_session(w.path).repaired  # reading (repair in memory) is always possible
    w.close()
    assert load_session(w.path).repaired


def test_the_writer_only_appends_what_the_file_lacks(store: Store) -> None:
    s = _session(1)
    w = attach_journal(s, store)
    w.close()
    loaded = load_session(w.path)
    resumed = Session(header=loaded.header, seed=loaded.events)
    w2 = attach_journal(resumed, store)
    assert w2.committed == len(loaded.events) and w2.pending == 0
    resumed.append("session/title", {"title": "resumed", "source": {"kind": "user"}})
    w2.close()
    events = read_session(w.path).events
    assert [e.seq for e in events] == list(range(len(events)))
    assert [e.type for e in events[-2:]] == ["session/end-seed", "session/title"]
    text = w.path.read_text(encoding="utf-8")
    assert text.count(encode_event(loaded.events[0])) == 1
    assert os.path.getsize(w.path) == len(text.encode())


def test_an_out_of_order_event_breaks_the_writer_loudly(store: Store) -> None:
    s = _session(1)
    w = attach_journal(s, store)
    w.flush()
    other = _session(2)  # a different log with the same header: its seqs restart at 0
    w.on_event(other.events[-1])  # seq beyond what the file expects: refused, remembered
    with pytest.raises(StoreError) as err:
        w.flush()
    assert err.value.code == "JOURNAL_WRITE_FAILED" and "expected" in err.value.message
    assert read_session(w.path).events == tuple(s.events)  # nothing was written out of order
