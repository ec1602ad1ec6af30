"""Shipping judges crash repair from a journal's end, yet a dead journal damaged anywhere is still
skipped whole, in crash repair's words, and nothing of it reaches the server; and the rows of a
checked read are those of an ordinary one."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from dsh_kernel.errors import SessionFormatError
from dsh_kernel.store.journal import repair_orphan, repair_orphan_if_open
from dsh_kernel.store.layout import Store
from dsh_kernel.store.shared.catchup import ship_store
from dsh_kernel.store.shared.send import MAX_BATCH, JournalTail, Row, UnsoundJournal
from tests.support.course_sample import make_course


@pytest.fixture(scope="module")
def course(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Store]:
    return make_course(tmp_path_factory.mktemp("course"))


def _copy(course: dict[str, Store], root: Path) -> Store:
    store = Store.at(root)
    for student in course.values():
        for src in student.iter_journals():
            dest = store.journals_dir / src.parent.name / src.name
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(src, dest)
    return store


def _bad_kind(obj: dict) -> None:
    obj["data"]["turn"] = "one"  # turn/start's turn must be an integer


def _unknown_type(obj: dict) -> None:
    obj["type"] = "future/thing"  # not marked ignorable


def _out_of_range(obj: dict) -> None:
    obj["time"] = -1


DAMAGE: dict[str, Callable[[dict], None]] = {
    "a payload key of the wrong kind": _bad_kind,
    "an unknown type not marked ignorable": _unknown_type,
    "a time out of range": _out_of_range,
}


def _server_counts(db) -> dict[str, int]:
    return {
        str(s): int(n) for s, n in db.rows("SELECT session_id, count(*) FROM dsh_events GROUP BY 1")
    }


@pytest.mark.parametrize("damage", [*DAMAGE, "NaN in its data", "a line that is not UTF-8"])
def test_a_dead_journal_damaged_before_its_end_is_skipped_whole(
    shared_db, tmp_path: Path, course, damage: str
) -> None:
    store = _copy(course, tmp_path / "store")
    journals = list(store.iter_journals())
    victim = journals[len(journals) // 2]
    lines = victim.read_bytes().split(b"\n")
    at = next(n for n, line in enumerate(lines) if b'"type":"turn/start"' in line)
    if damage == "NaN in its data":
        lines[at] = lines[at].replace(b'"data":{', b'"data":{"x":NaN,', 1)
    elif damage == "a line that is not UTF-8":
        lines[at] = lines[at].replace(b'"data":{', b'"data":{"x":"\xff",', 1)
    else:
        obj = json.loads(lines[at])
        DAMAGE[damage](obj)
        lines[at] = json.dumps(obj, separators=(",", ":")).encode()
    victim.write_bytes(b"\n".join(lines))
    assert repair_orphan_if_open(victim) is None  # judged from its end: nothing to repair there
    with pytest.raises(SessionFormatError) as refused:  # what crash repair says of it
        repair_orphan(victim)

    done = ship_store(store, shared_db.target)

    assert done.skipped == (f"{victim}: {refused.value}",)
    assert done.journals == len(journals) - 1
    expected = {p.stem: p.read_bytes().count(b"\n") - 1 for p in journals if p != victim}
    assert _server_counts(shared_db) == expected  # nothing of the damaged one, all of the others
    assert done.events == sum(expected.values())


def _all_rows(path: Path, check: bool, limit: int) -> tuple[list[Row], object]:
    tail = JournalTail(path=path, session_id=path.stem, check=check)
    out: list[Row] = []
    while True:
        batch = tail.read(limit)
        if not batch.rows and batch.offset == tail.offset:
            return out, tail.header
        out.extend(batch.rows)
        tail.advance(batch)


def test_a_checked_read_gives_the_rows_an_ordinary_read_gives(tmp_path: Path, course) -> None:
    store = _copy(course, tmp_path / "store")
    extra = store.journals_dir / "x" / "odd-lines.jsonl"
    extra.parent.mkdir(parents=True)
    header = {"type": "session", "version": 0, "id": "odd-lines", "createdAt": 1_700_000_000_000}
    titles = ["plain", "caf\u00e9 \u2028 \U0001f600", "nul \x00 inside", 'quote " and \\ back']
    events = [
        {
            "type": "session/title",
            "seq": n,
            "time": 1_700_000_000_000 + n,
            "data": {"title": t, "source": {"kind": "user"}},
        }
        for n, t in enumerate(titles)
    ]
    extra.write_text(
        "".join(json.dumps(o, ensure_ascii=False) + "\n" for o in [header, *events]),
        encoding="utf-8",
    )
    for path in store.iter_journals():
        for limit in (3, MAX_BATCH):
            assert _all_rows(path, True, limit) == _all_rows(path, False, limit)
    got = JournalTail(path=extra, session_id="odd-lines", check=True).read().rows
    assert [r.data for r in got] == [
        None,
        None,
        '{"title":"nul \ufffd inside","source":{"kind":"user"}}',
        None,
    ]


def test_a_checked_read_stops_at_what_it_cannot_vouch_for_and_changes_nothing(
    tmp_path: Path,
) -> None:
    journal = tmp_path / "s.jsonl"
    header = '{"type":"session","version":0,"id":"s","createdAt":1700000000000}\n'
    event = (
        '{"type":"session/title","seq":%d,"time":1700000000000,'
        '"data":{"title":"t","source":{"kind":"user"}}}\n'
    )
    cases = {
        "a torn tail": header + event % 0 + '{"type":"sess',
        "a seq out of order": header + event % 1,
        "a header naming another session": header.replace('"id":"s"', '"id":"t"') + event % 0,
        "an array": header + "[1]\n",
        "Infinity": header + (event % 0).replace('"title":"t"', '"title":Infinity'),
        "a missing payload key": header + (event % 0).replace('"title":"t",', ""),
    }
    for why, text in cases.items():
        journal.write_text(text, encoding="utf-8")
        tail = JournalTail(path=journal, session_id="s", check=True)
        with pytest.raises(UnsoundJournal):
            tail.read()
        assert (tail.offset, tail.next_seq, tail.torn_at, tail.refused) == (0, 0, None, None), why
        assert tail.omitted == [], why
