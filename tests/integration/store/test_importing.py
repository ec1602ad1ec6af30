"""Importing a journal file into another store: the copy replays, queries, and is idempotent."""

from __future__ import annotations

from pathlib import Path

import pytest

from dsh_kernel.errors import StoreError
from dsh_kernel.store.importing import import_journal
from dsh_kernel.store.layout import Store
from dsh_kernel.store.query import run_query
from dsh_kernel.store.replay import ReplayProvider

from .conftest import RICH_PROMPTS, chat, make_agent, record_rich_session


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
