"""Shipping journals to a real PostgreSQL: exactly once, whatever is resent, torn or interrupted."""

from __future__ import annotations

import json
import re
from pathlib import Path

import psycopg
import pytest

from dsh_kernel.__main__ import main
from dsh_kernel.store.layout import Store
from dsh_kernel.store.shared.catchup import ship_store
from dsh_kernel.store.shared.connection import connect, migrate, migration_names
from dsh_kernel.store.shared.send import Batch, JournalTail, send
from tests.support.course_sample import make_course


@pytest.fixture(scope="module")
def course(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Store]:
    return make_course(tmp_path_factory.mktemp("course"))


def _journal_events(store: Store) -> dict[str, int]:
    out: dict[str, int] = {}
    for path in store.iter_journals():
        out[path.stem] = path.read_bytes().count(b"\n") - 1
    return out


def _server_counts(db) -> dict[str, int]:
    return {
        str(s): int(n) for s, n in db.rows("SELECT session_id, count(*) FROM dsh_events GROUP BY 1")
    }


def test_migrations_are_ordered_and_recorded(shared_db) -> None:
    conn = connect(shared_db.target)
    try:
        assert (
            migrate(conn)
            == migration_names()
            == ["0001_events", "0002_sessions", "0003_consistent_sessions", "0004_bounded_events"]
        )
        assert migrate(conn) == []
    finally:
        conn.close()
    names = [r[0] for r in shared_db.rows("SELECT name FROM dsh_schema_migrations ORDER BY name")]
    assert names == [
        "0001_events",
        "0002_sessions",
        "0003_consistent_sessions",
        "0004_bounded_events",
    ]


def test_reshipping_the_same_journals_twice_gives_no_duplicates(shared_db, course) -> None:
    alice = course["alice"]
    first = ship_store(alice, shared_db.target)
    expected = _journal_events(alice)
    assert first.events == sum(expected.values()) > 0
    assert _server_counts(shared_db) == expected
    # a second run sends nothing; a tail rewound to 0 resends everything and still adds nothing
    assert ship_store(alice, shared_db.target).events == 0
    conn = connect(shared_db.target)
    try:
        for path in alice.iter_journals():
            tail = JournalTail(path=path, session_id=path.stem)
            send(conn, tail, tail.read().rows)
    finally:
        conn.close()
    assert _server_counts(shared_db) == expected
    shipped = [
        (sid, line + "\n")
        for sid, line in shared_db.rows("SELECT session_id, line FROM dsh_events ORDER BY 1, seq")
    ]
    journals = sorted(
        (p.stem, line)
        for p in alice.iter_journals()
        for line in p.read_text(encoding="utf-8").splitlines(keepends=True)[1:]
    )
    assert sorted(shipped) == journals  # each line once, exactly as written
    sessions = shared_db.rows('SELECT session_id, "user", events FROM dsh_sessions ORDER BY 1')
    assert sorted((str(s), u, n) for s, u, n in sessions) == sorted(
        (sid, "alice", n) for sid, n in expected.items()
    )


def test_a_torn_tail_is_not_shipped(shared_db, tmp_path: Path, course) -> None:
    src = next(course["bob"].iter_journals())
    lines = src.read_bytes().splitlines(keepends=True)
    journal = tmp_path / src.name
    journal.write_bytes(b"".join(lines[:-1]) + lines[-1][: len(lines[-1]) // 2])  # torn last line
    tail = JournalTail(path=journal, session_id=src.stem)
    rows = tail.read().rows
    assert [r.seq for r in rows] == list(range(len(lines) - 2))
    # a terminated line that is not a whole event (a crash between two writes) stops the read too
    journal.write_bytes(b"".join(lines[:-1]) + b'{"type": "turn/e\n')
    tail = JournalTail(path=journal, session_id=src.stem)
    rows = tail.read().rows
    assert [r.seq for r in rows] == list(range(len(lines) - 2))
    conn = connect(shared_db.target)
    try:
        migrate(conn)
        send(conn, tail, rows)
    finally:
        conn.close()
    assert _server_counts(shared_db) == {src.stem: len(lines) - 2}


def test_ship_cli_repairs_a_crashed_journal_first(
    shared_db, tmp_path: Path, course, monkeypatch, capsys
) -> None:
    store = Store.at(tmp_path / "store")
    src = next(course["chen"].iter_journals())
    dest = store.journals_dir / src.parent.name / src.name
    dest.parent.mkdir(parents=True)
    data = src.read_bytes()
    dest.write_bytes(data + b'{"type":"tu')  # a kernel killed mid-write
    monkeypatch.setenv("DSH_SHARED_STORE", shared_db.target)
    assert main(["ship", "--store", str(store.root)]) == 0
    out = capsys.readouterr().out
    n = data.count(b"\n") - 1
    assert out.startswith(f"shipped {n} new events of 1 journals")
    assert dest.read_bytes() == data  # the torn tail was cut by crash repair, never shipped
    assert _server_counts(shared_db) == {src.stem: data.count(b"\n") - 1}


def test_ship_cli_exits_1_when_it_skipped_a_journal_and_ships_the_others(
    shared_db, tmp_path: Path, course, monkeypatch, capsys
) -> None:
    store = Store.at(tmp_path / "store")
    good, other = list(course["chen"].iter_journals())[:2]
    for src in (good, other):
        dest = store.journals_dir / src.parent.name / src.name
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_bytes(src.read_bytes())
    # a journal whose header names another session: refused, never shipped
    forged = store.journals_dir / other.parent.name / other.name
    forged.rename(forged.with_name("forged-session.jsonl"))
    monkeypatch.setenv("DSH_SHARED_STORE", shared_db.target)
    assert main(["ship", "--store", str(store.root)]) == 1
    captured = capsys.readouterr()
    assert "skipped " in captured.err and "forged-session" in captured.err
    assert _server_counts(shared_db) == {good.stem: good.read_bytes().count(b"\n") - 1}


def test_ship_cli_without_a_target_says_what_to_give(tmp_path: Path, monkeypatch, capsys) -> None:
    monkeypatch.delenv("DSH_SHARED_STORE", raising=False)
    assert main(["ship", "--store", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert err == (
        "error: no shared store: give its DSN (a postgresql:// URL, libpq keywords or a service "
        "name), or set DSH_SHARED_STORE (docs/shared-store.md)\n"
    )


def test_ship_cli_takes_its_target_as_mirror_does(
    shared_db, tmp_path: Path, course, monkeypatch, capsys
) -> None:
    # a DSN given wins over DSH_SHARED_STORE (here a server that is not there)
    monkeypatch.setenv("DSH_SHARED_STORE", "host=127.0.0.1 port=9 dbname=nowhere")
    store = Store.at(tmp_path / "store")
    src = next(course["bob"].iter_journals())
    dest = store.journals_dir / src.parent.name / src.name
    dest.parent.mkdir(parents=True)
    dest.write_bytes(src.read_bytes())
    assert main(["ship", shared_db.target, "--store", str(store.root)]) == 0
    assert capsys.readouterr().out.startswith("shipped ")
    assert _server_counts(shared_db)[src.stem] == src.read_bytes().count(b"\n") - 1
    # and, like mirror's, a password in it is refused in one line that does not print it
    assert (
        main(["ship", "postgresql://ta:Hunter2-long-pass@hub/course", "--store", str(store.root)])
        == 1
    )
    err = capsys.readouterr().err
    assert err.startswith("error: the ship command's DSN holds a password: remove it from the URL")
    assert "Hunter2-long-pass" not in err


def test_stopping_the_server_mid_batch_loses_and_duplicates_nothing(shared_db, course) -> None:
    """A batch whose transaction the server never finishes (stopped while it is open) is rolled
    back; the resend after the restart, from the server's max(seq), completes the journal once."""
    alice = course["alice"]
    paths = list(alice.iter_journals())
    conn = connect(shared_db.target)
    migrate(conn)
    tail = JournalTail(path=paths[0], session_id=paths[0].stem)
    rows = tail.read().rows
    half = len(rows) // 2
    send(conn, tail, rows[:half])  # the first half is committed
    tail.advance(Batch(rows=rows[:half], offset=0, seq=0))
    # the second half is in an open transaction when the server stops
    conn.execute("BEGIN")
    conn.execute(
        "INSERT INTO dsh_events (session_id, seq, type, time, data, line) "
        "VALUES (%s, %s, %s, %s, (%s::jsonb)->'data', %s)",
        (
            tail.session_id,
            rows[half].seq,
            rows[half].type,
            rows[half].time,
            rows[half].line,
            rows[half].line,
        ),
    )
    shared_db.server.stop()
    with pytest.raises(psycopg.OperationalError):
        conn.execute("COMMIT")
    conn.close()
    shared_db.server.start()
    assert ship_store(alice, shared_db.target).events == sum(_journal_events(alice).values()) - half
    assert _server_counts(shared_db) == _journal_events(alice)
    seqs = shared_db.rows(
        "SELECT seq FROM dsh_events WHERE session_id = %s ORDER BY seq", (tail.session_id,)
    )
    assert [s for (s,) in seqs] == list(range(len(rows)))


def test_the_documented_live_queries_run(shared_db, course) -> None:
    ship_store(course["alice"], shared_db.target)
    doc = (Path(__file__).resolve().parents[3] / "docs" / "shared-store.md").read_text()
    section = doc.split("### Live, in PostgreSQL", 1)[1].split("\n## ", 1)[0]
    (sql,) = re.findall(r"```sql\n(.*?)```", section, flags=re.S)
    queries = [q for q in sql.split(";") if q.strip()]
    assert len(queries) == 2
    with psycopg.connect(shared_db.target) as conn:
        for q in queries:
            conn.execute(q).fetchall()


def test_a_nul_character_ships_and_the_line_keeps_it(shared_db, tmp_path: Path, course) -> None:
    src = next(course["bob"].iter_journals())
    lines = src.read_bytes().splitlines(keepends=True)
    header, first = lines[0], json.loads(lines[1])
    first["data"]["note"] = "before\x00after"
    journal = tmp_path / src.name
    nul_line = json.dumps(first, separators=(",", ":")).encode() + b"\n"
    assert b"\\u0000" in nul_line
    journal.write_bytes(header + nul_line)
    tail = JournalTail(path=journal, session_id=src.stem)
    rows = tail.read().rows
    conn = connect(shared_db.target)
    try:
        migrate(conn)
        send(conn, tail, rows)
    finally:
        conn.close()
    ((note, line),) = shared_db.rows("SELECT data->>'note', line FROM dsh_events")
    assert note == "before\ufffdafter"
    assert line.encode() + b"\n" == nul_line


def test_ship_cli_with_the_server_down_says_so_in_one_line(
    tmp_path: Path, course, monkeypatch, capsys
) -> None:
    (tmp_path / "nothing").mkdir()
    monkeypatch.setenv("DSH_SHARED_STORE", f"host={tmp_path / 'nothing'} dbname=course user=dsh")
    assert main(["ship", "--store", str(course["alice"].root)]) == 1
    err = capsys.readouterr().err
    assert err.startswith(
        f"error: the shared store host={tmp_path / 'nothing'} dbname=course user=dsh is unreachable: "
    )
    assert err.count("\n") == 1
