"""The shared store's bounds, against a real server: the server refuses a row whose line is not its
own event or is over a bound (as a student, under the docs' row-level security); the shipper reads a
journal in bounded pieces and ships an event over the bound as a marker, and the events after it
still ship; the mirror never fetches a line over the bound, writes the marker in its place, mirrors
the rest, and the views of the mirror are those of the same journal read locally. Memory is measured
in a subprocess under an address-space limit (``RLIMIT_AS``): today's whole reads do not fit in it."""

from __future__ import annotations

import asyncio
import fcntl
import json
import os
import subprocess
import sys
from pathlib import Path

import psycopg
import pytest

from dsh_kernel import Agent
from dsh_kernel.session.codec import dumps
from dsh_kernel.store.db import open_db
from dsh_kernel.store.ingest.incremental import ingest
from dsh_kernel.store.journal import attach_journal
from dsh_kernel.store.layout import Store
from dsh_kernel.store.schema_doc import PUBLIC_VIEWS
from dsh_kernel.store.shared.bounds import MAX_HEADER_BYTES, MAX_LINE_BYTES, OMITTED, omitted_line
from dsh_kernel.store.shared.catchup import ship_store
from dsh_kernel.store.shared.connection import connect, migrate
from dsh_kernel.store.shared.shipper import Shipper
from dsh_kernel.testing import ScriptedProvider, text_response
from tests.integration.shared.test_privacy import _privacy_sql
from tests.support.course_sample import make_course
from tests.support.shared_db import SharedDb

ROOT = Path(__file__).resolve().parents[3]

_CHILD = """
import dataclasses, json, resource, sys
limit = int(sys.argv[1])
resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
from dsh_kernel.store.layout import Store
from dsh_kernel.store.shared.catchup import mirror_store, ship_store
if sys.argv[2] == "ship":
    report = ship_store(Store.at(sys.argv[4]), sys.argv[3])
else:
    report = mirror_store(sys.argv[3], Store.at(sys.argv[4]))
print(json.dumps(dataclasses.asdict(report)))
"""


def _in_little_memory(limit: int, *args: str) -> dict[str, object]:
    """``ship_store``/``mirror_store`` run in a Python whose address space is at most ``limit``;
    its report as a dict."""
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
    }
    done = subprocess.run(
        [sys.executable, "-c", _CHILD, str(limit), *args],
        capture_output=True,
        text=True,
        env=env,
        stdin=subprocess.DEVNULL,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout)


@pytest.fixture(scope="module")
def course(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Store]:
    return make_course(tmp_path_factory.mktemp("course"))


def _journal(course: dict[str, Store]) -> tuple[Path, list[str]]:
    src = sorted(course["alice"].iter_journals())[0]
    return src, src.read_text(encoding="utf-8").splitlines()


def _padded(line: str, size: int) -> str:
    """``line``'s event with a ``pad`` string in its data, so that the line is ``size`` bytes."""
    event = json.loads(line)
    event["data"]["pad"] = ""
    bare = len(dumps(event).encode("utf-8"))
    event["data"]["pad"] = "x" * (size - bare)
    padded = dumps(event)
    assert len(padded.encode("utf-8")) == size
    return padded


def _copy(store: Store, src: Path, lines: list[str]) -> Path:
    dest = store.journals_dir / src.parent.name / src.name
    dest.parent.mkdir(parents=True, exist_ok=True)
    dest.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return dest


def _marker(line: str, size: int) -> str:
    event = json.loads(line)
    return omitted_line(seq=event["seq"], time=event["time"], type_=event["type"], size=size)


_INSERT = (
    "INSERT INTO dsh_events (session_id, seq, type, time, data, line) "
    "VALUES (%s, %s, 'session/title', 1, '{}'::jsonb, %s)"
)


def test_the_server_refuses_a_line_that_is_not_its_event_or_over_a_bound(
    shared_db: SharedDb, course: dict[str, Store]
) -> None:
    conn = connect(shared_db.target)
    migrate(conn)
    conn.close()
    with psycopg.connect(shared_db.target, autocommit=True) as owner:
        owner.execute(_privacy_sql())  # type: ignore[arg-type]
    try:
        alice = shared_db.target_for("alice")
        assert ship_store(course["alice"], alice).skipped == ()
        sid = _journal(course)[0].stem
        ((top,),) = shared_db.rows("SELECT max(seq) FROM dsh_events WHERE session_id = %s", (sid,))
        seq = int(top) + 1

        def line(**envelope: object) -> str:
            event = {"type": "session/title", "seq": seq, "time": 1, "data": {"title": "t"}}
            return json.dumps({**event, **envelope}, separators=(",", ":"))

        no_seq = json.loads(line())
        del no_seq["seq"]
        not_its_event = {
            "not JSON": "nope",
            "two objects": line() + line(),
            "an array": f"[{line()}]",
            "a string": json.dumps(line()),
            "another seq": line(seq=seq + 1),
            "the seq as text": line(seq=str(seq)),
            "the seq as a float": line(seq=float(seq)),
            "no seq": json.dumps(no_seq),
            "a seq only inside data": json.dumps({**no_seq, "data": {"seq": seq}}),
            "the right seq, then another": line()[:-1] + f',"seq":{seq + 1}}}',
        }
        with psycopg.connect(alice, autocommit=True) as c:
            for why, text in not_its_event.items():
                with pytest.raises(psycopg.errors.CheckViolation, match="dsh_events_line_is_event"):
                    c.execute(_INSERT, (sid, seq, text))
                    pytest.fail(f"{why} was taken")
            with pytest.raises(psycopg.errors.CheckViolation, match="dsh_events_line_bounded"):
                c.execute(_INSERT, (sid, seq, _padded(line(), MAX_LINE_BYTES + 1)))
            with pytest.raises(psycopg.errors.CheckViolation, match="dsh_events_data_bounded"):
                c.execute(
                    "INSERT INTO dsh_events (session_id, seq, type, time, data, line) VALUES "
                    "(%s, %s, 'session/title', 1, jsonb_build_object('pad', repeat('x', %s)), %s)",
                    (sid, seq, 64 << 20, line()),
                )
            with pytest.raises(psycopg.errors.CheckViolation, match="dsh_sessions_header_bounded"):
                c.execute(
                    "UPDATE dsh_sessions SET header = header || jsonb_build_object('pad', "
                    "repeat('x', %s)) WHERE session_id = %s",
                    (MAX_HEADER_BYTES, sid),
                )
            # what is its event is taken, however it is written: a JSON NUL (which PostgreSQL's
            # JSON functions cannot unescape), an escaped backslash before "u0000", keys in
            # another order, spaces, exactly the bound
            taken = [
                line(data={"title": "a\x00b"}),
                line(seq=seq + 1, data={"title": "a\\u0000b"}),
                json.dumps({"data": {}, "time": 1, "seq": seq + 2, "type": "session/title"}),
                f'{{ "type": "session/title", "seq": {seq + 3}, "time": 1, "data": {{}} }}',
                _padded(line(seq=seq + 4), MAX_LINE_BYTES),
            ]
            assert "\\u0000" in taken[0] and "\\\\u0000" in taken[1]
            for n, text in enumerate(taken):
                c.execute(_INSERT, (sid, seq + n, text))
        held = shared_db.rows(
            "SELECT seq, line = %s FROM dsh_events WHERE session_id = %s AND seq >= %s ORDER BY seq",
            (taken[0], sid, seq),
        )
        assert [s for s, _ in held] == [seq + n for n in range(len(taken))]
        assert held[0][1]  # the NUL line is kept as written
    finally:
        with psycopg.connect(shared_db.target, autocommit=True) as owner:
            owner.execute("DROP OWNED BY alice, prof, dsh_student, dsh_instructor")
            owner.execute("DROP ROLE alice, prof, dsh_student, dsh_instructor")


def test_an_event_over_the_bound_ships_as_a_marker_and_the_rest_follow(
    shared_db: SharedDb, course: dict[str, Store], tmp_path: Path
) -> None:
    src, lines = _journal(course)
    at_bound, over = 5, 9  # event seqs: exactly the bound ships whole, one byte more as a marker
    lines[at_bound + 1] = _padded(lines[at_bound + 1], MAX_LINE_BYTES)
    big = _padded(lines[over + 1], MAX_LINE_BYTES + 1)
    lines[over + 1] = big
    store = Store.at(tmp_path / "store")
    dest = _copy(store, src, lines)

    report = ship_store(store, shared_db.target)
    assert report.skipped == ()
    kind = json.loads(big)["type"]
    assert report.omitted == (
        f"{dest}: event {over} ({kind}) is {MAX_LINE_BYTES + 1:,} bytes, over the shared store's "
        f"{MAX_LINE_BYTES:,} (32 MiB); shipped as a {OMITTED} marker (the journal keeps it)",
    )
    held = shared_db.rows("SELECT seq, type, line, data FROM dsh_events ORDER BY seq")
    assert [s for s, *_ in held] == list(range(len(lines) - 1))  # gap-free
    marker = _marker(big, MAX_LINE_BYTES + 1)
    assert [line for _, _, line, _ in held] == [
        marker if seq == over else lines[seq + 1] for seq in range(len(lines) - 1)
    ]
    assert held[over][1] == OMITTED
    assert held[over][3] == {"type": kind, "bytes": MAX_LINE_BYTES + 1, "limit": MAX_LINE_BYTES}
    assert dest.read_text(encoding="utf-8").splitlines() == lines  # the journal keeps the event
    assert ship_store(store, shared_db.target).events == 0  # and nothing is sent twice


def test_shipping_reads_a_journal_in_bounded_pieces(
    shared_db: SharedDb, course: dict[str, Store], tmp_path: Path
) -> None:
    """A 100 MB event: today's whole read of the journal needs over 400 MB; in pieces the shipper
    stays near its own size (about 90 MB of address space), so 256 MiB is plenty."""
    src, lines = _journal(course)
    over = 9
    big = _padded(lines[over + 1], 100_000_000)
    lines[over + 1] = big
    store = Store.at(tmp_path / "store")
    dest = _copy(store, src, lines)
    migrate_conn = connect(shared_db.target)
    migrate(migrate_conn)
    migrate_conn.close()
    # held as a live kernel holds its journal: ship then leaves crash repair (a whole read) alone
    fd = os.open(dest, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        report = _in_little_memory(256 << 20, "ship", shared_db.target, str(store.root))
    finally:
        os.close(fd)
    assert report["skipped"] == [] and len(report["omitted"]) == 1  # type: ignore[arg-type]
    assert report["events"] == len(lines) - 1
    held = shared_db.rows("SELECT seq, line FROM dsh_events ORDER BY seq")
    assert [line for _, line in held] == [
        _marker(big, 100_000_000) if seq == over else lines[seq + 1]
        for seq in range(len(lines) - 1)
    ]


def _views(store: Store) -> dict[str, list[tuple[object, ...]]]:
    with open_db(store, read_only=True) as con:
        return {
            view: sorted(con.execute(f"SELECT * FROM {view}").fetchall(), key=repr)
            for view in PUBLIC_VIEWS
        }


def test_the_mirror_streams_and_writes_a_marker_for_a_row_over_the_bound(
    shared_db: SharedDb, course: dict[str, Store], tmp_path: Path
) -> None:
    """Rows stored before the server checked (the owner drops the checks to make them): three
    lines of 64 MB, and one exactly at the bound. Today's mirror fetches them all at once (1.1 GB);
    streaming, it never fetches the three and holds one line at a time, so 512 MiB is plenty."""
    src, lines = _journal(course)
    sid = src.stem
    ship_store(course["alice"], shared_db.target)
    over = {4: "user/message", 7: "assistant/chunk", 15: "tool/result"}
    at_bound = 9
    expected = list(lines)
    expected[at_bound + 1] = _padded(lines[at_bound + 1], MAX_LINE_BYTES)
    with psycopg.connect(shared_db.target, autocommit=True) as owner:
        owner.execute(
            "ALTER TABLE dsh_events DROP CONSTRAINT IF EXISTS dsh_events_line_bounded, "
            "DROP CONSTRAINT IF EXISTS dsh_events_line_is_event"
        )
        for seq in over:
            owner.execute(
                """UPDATE dsh_events SET line = left(line, -1) || ',"pad":"' || repeat('x', %s)
                || '"}' WHERE session_id = %s AND seq = %s""",
                (64_000_000, sid, seq),
            )
        owner.execute(
            "UPDATE dsh_events SET line = %s WHERE session_id = %s AND seq = %s",
            (expected[at_bound + 1], sid, at_bound),
        )
    sizes = dict(
        shared_db.rows(
            "SELECT seq, octet_length(line) FROM dsh_events WHERE session_id = %s AND seq = ANY(%s)",
            (sid, list(over)),
        )
    )
    for seq, kind in over.items():
        assert json.loads(lines[seq + 1])["type"] == kind
        expected[seq + 1] = _marker(lines[seq + 1], sizes[seq])

    mirrored = Store.at(tmp_path / "mirror")
    report = _in_little_memory(512 << 20, "mirror", shared_db.target, str(mirrored.root))
    assert report["skipped"] == [
        f"{sid}: event {seq} ({kind}) is {sizes[seq]:,} bytes, over the shared store's "
        f"{MAX_LINE_BYTES:,} (32 MiB); mirrored as a {OMITTED} marker"
        for seq, kind in over.items()
    ]
    (copy,) = mirrored.journals_dir.rglob(src.name)
    got = copy.read_text(encoding="utf-8").splitlines()
    assert got[1:] == expected[1:]
    assert json.loads(got[0]) == json.loads(expected[0])
    others = [p for p in course["alice"].iter_journals() if p != src]
    for path in others:  # the other sessions are mirrored whole
        (theirs,) = mirrored.journals_dir.rglob(path.name)
        assert theirs.read_bytes().split(b"\n")[1:] == path.read_bytes().split(b"\n")[1:]

    # the mirror's views are those of the same journals read locally (the markers skipped alike)
    local = Store.at(tmp_path / "local")
    _copy(local, src, expected)
    for path in others:
        _copy(local, path, path.read_text(encoding="utf-8").splitlines())
    assert ingest(local).status != "deferred"
    assert ingest(mirrored).status != "deferred"
    want, have = _views(local), _views(mirrored)
    assert all(want[v] == have[v] for v in PUBLIC_VIEWS), [
        v for v in PUBLIC_VIEWS if want[v] != have[v]
    ]
    with open_db(mirrored, read_only=True) as con:
        shown = con.execute(
            "SELECT seq, data->>'type' FROM events WHERE type = ? ORDER BY seq", [OMITTED]
        ).fetchall()
    assert shown == list(over.items())


async def test_the_kernels_shipper_ships_a_prompt_over_the_bound_as_a_marker(
    shared_db: SharedDb, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    agent = Agent(provider=ScriptedProvider([text_response("ok", pieces=2)]), model="m1")
    writer = attach_journal(agent, Store.at(tmp_path))
    shipper = Shipper(shared_db.target, interval_s=0.05)
    try:
        shipper.follow(writer, agent.hooks)
        agent.followup("x" * MAX_LINE_BYTES)  # pasted into a chat cell: the event is longer still
        await agent.when_idle()
        assert await asyncio.to_thread(shipper.wait_idle, 30), shipper.status()
        assert shipper.status().line().startswith(f"shared store {shipper.target}: up to date")
    finally:
        shipper.close(0.5)
        writer.close()
    lines = writer.path.read_bytes().split(b"\n")[1:-1]
    kinds = [json.loads(line)["type"] for line in lines]
    over = [seq for seq, line in enumerate(lines) if len(line) > MAX_LINE_BYTES]
    assert "user/message" in [kinds[seq] for seq in over]  # and the inbox's record of it
    held = shared_db.rows("SELECT seq, type, data->>'type' FROM dsh_events ORDER BY seq")
    assert [(s, t) for s, t, _ in held] == [
        (seq, OMITTED if seq in over else kind) for seq, kind in enumerate(kinds)
    ]
    assert [o for s, _, o in held if s in over] == [kinds[seq] for seq in over]
    logged = [r.getMessage() for r in caplog.records if OMITTED in r.getMessage()]
    assert len(logged) == len(over) and "(the journal keeps it)" in logged[0]
