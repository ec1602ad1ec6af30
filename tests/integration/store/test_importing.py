"""Importing a journal file into another store: the copy replays, queries, and is idempotent."""

from __future__ import annotations

from pathlib import Path

import pytest

from dsh_kernel.errors import StoreError
from dsh_kernel.session.check.invariants import check_invariants
from dsh_kernel.store.importing import import_journal
from dsh_kernel.store.journal import load_session
from dsh_kernel.store.layout import Store
from dsh_kernel.store.query.run import run_query
from dsh_kernel.store.replay import ReplayProvider
from dsh_kernel.store.sessions import fork
from dsh_kernel.testing import text_response

from .conftest import RICH_PROMPTS, chat, make_agent, record_rich_session, usage


async def test_imported_journal_replays_and_is_queryable(tmp_path: Path) -> None:
    source = Store.at(tmp_path / "a")
    agent, writer = await record_rich_session(source)
    writer.close()
    shipped = tmp_path / "shipped.jsonl"
    shipped.write_bytes(writer.path.read_bytes())

    target = Store.at(tmp_path / "b")
    sid = import_journal(shipped, target)
    assert sid == agent.session.id
    assert target.find_journal(sid).read_bytes() == shipped.read_bytes()

    result = run_query(target, "SELECT turns FROM sessions WHERE session_id = $sid", {"sid": sid})
    assert list(result.rows) == [(2,)]

    replay = ReplayProvider.from_store(target, sid)
    again, _, again_writer = make_agent(target, [], model="m1")
    again.set_route(provider=replay, model="m1")
    await chat(again, *RICH_PROMPTS)
    again_writer.close()
    replay.assert_consumed()
    assert again.session.derive_messages()[-1].text() == "You're welcome, goodbye."


async def test_import_is_idempotent_and_refuses_a_different_version(tmp_path: Path) -> None:
    source = Store.at(tmp_path / "a")
    _, writer = await record_rich_session(source)
    writer.close()
    target = Store.at(tmp_path / "b")
    sid = import_journal(writer.path, target)
    assert import_journal(writer.path, target) == sid  # same content: nothing to do

    changed = tmp_path / "changed.jsonl"
    lines = writer.path.read_text(encoding="utf-8").splitlines(keepends=True)
    changed.write_text("".join(lines[:-1]), encoding="utf-8")
    with pytest.raises(StoreError) as err:
        import_journal(changed, target)
    assert err.value.code == "SESSION_EXISTS"
    assert sid in err.value.message


def test_a_torn_last_line_is_left_out_and_damage_is_refused(tmp_path: Path) -> None:
    header = '{"type":"session","version":0,"id":"s-torn","createdAt":1764500000000}\n'
    event = '{"type":"turn/start","seq":0,"time":1764500000001,"data":{"turn":1}}\n'
    torn = tmp_path / "torn.jsonl"
    torn.write_text(header + event + '{"type":"step/st', encoding="utf-8")
    store = Store.at(tmp_path / "s")
    assert import_journal(torn, store) == "s-torn"
    assert store.find_journal("s-torn").read_text(encoding="utf-8") == header + event

    damaged = tmp_path / "damaged.jsonl"
    damaged.write_text(header + "not json\n" + event, encoding="utf-8")
    with pytest.raises(StoreError) as err:
        import_journal(damaged, Store.at(tmp_path / "t"))
    assert f"{damaged}:2:" in str(err.value)
    assert err.value.code == "JOURNAL_DAMAGED"


def test_a_missing_file_is_a_store_error(tmp_path: Path) -> None:
    with pytest.raises(StoreError) as err:
        import_journal(tmp_path / "nope.jsonl", Store.at(tmp_path / "s"))
    assert err.value.code == "JOURNAL_UNREADABLE"


async def test_the_gate_takes_every_log_the_kernel_writes(tmp_path: Path) -> None:
    """A fork (seed + ``session/end-seed``), a journal cut by a crash mid-turn, and one whose last
    event only lacks its newline all import; the cut one is repaired when it is resumed."""
    source = Store.at(tmp_path / "a")
    parent, writer = await record_rich_session(source)
    writer.close()
    child = fork(parent.session.header, list(parent.session.events), 1)
    agent, provider, w = make_agent(
        source, [text_response("forked answer", usage=usage())], session=child
    )
    await chat(agent, "a different second question")
    provider.assert_consumed()
    w.close()
    target = Store.at(tmp_path / "b")
    fork_path = source.journal_path(child.header)
    assert import_journal(fork_path, target) == child.id
    assert target.find_journal(child.id).read_bytes() == fork_path.read_bytes()

    lines = writer.path.read_bytes().splitlines(keepends=True)
    cut_at = next(i for i, ln in enumerate(lines) if b'"tool/result"' in ln)
    crashed = tmp_path / "crashed.jsonl"
    crashed.write_bytes(b"".join(lines[:cut_at]) + lines[cut_at][:40])  # mid-turn, torn line
    other = Store.at(tmp_path / "c")
    sid = import_journal(crashed, other)
    assert other.find_journal(sid).read_bytes() == b"".join(lines[:cut_at])
    loaded = load_session(other.find_journal(sid))
    assert loaded.repaired and check_invariants(loaded.events) == []

    unterminated = tmp_path / "unterminated.jsonl"
    unterminated.write_bytes(b"".join(lines).rstrip(b"\n"))
    third = Store.at(tmp_path / "d")
    assert import_journal(unterminated, third) == parent.id
    assert third.find_journal(parent.id).read_bytes() == b"".join(lines)
