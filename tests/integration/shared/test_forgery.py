"""A student cannot pass a session off as another's (the stranger's ``forge.sh``): ``ship`` refuses a
journal whose header id is not its session id and goes on with the others; the server refuses a
session row that disagrees with its header, and row-level security refuses a header written over
another student's session; the mirror names each journal by the server's ``session_id`` and refuses
a session row whose header names another session. All against a real server, with the docs' SQL."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import psycopg
import pytest

from dsh_kernel.store.layout import Store
from dsh_kernel.store.shared.catchup import mirror_store, ship_store
from dsh_kernel.store.shared.connection import connect, migrate
from tests.integration.shared.test_privacy import _privacy_sql
from tests.support.course_sample import make_course
from tests.support.shared_db import SharedDb


@pytest.fixture(scope="module")
def course(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Store]:
    return make_course(tmp_path_factory.mktemp("course"))


def _forge(src: Path, dest: Path, header_id: str) -> None:
    """``src``'s journal at ``dest`` with its header's id replaced (what a student can write)."""
    lines = src.read_text(encoding="utf-8").splitlines()
    header = json.loads(lines[0])
    header["id"] = header_id
    header["createdAt"] -= 10**6  # listed first by the mirror, as in forge.sh
    dest.parent.mkdir(parents=True, exist_ok=True)
    dest.write_text("\n".join([json.dumps(header), *lines[1:]]) + "\n", encoding="utf-8")


def test_a_forged_header_never_replaces_another_students_session(
    shared_db: SharedDb, course: dict[str, Store], tmp_path: Path
) -> None:
    conn = connect(shared_db.target)
    migrate(conn)
    conn.close()
    with psycopg.connect(shared_db.target, autocommit=True) as owner:
        owner.execute(_privacy_sql())  # type: ignore[arg-type]
        owner.execute("CREATE ROLE bob LOGIN IN ROLE dsh_student")
    try:
        alice, bob = shared_db.target_for("alice"), shared_db.target_for("bob")
        assert ship_store(course["alice"], alice).skipped == ()
        victim = sorted(course["alice"].iter_journals())[0]
        sid = victim.stem
        own = sorted(course["bob"].iter_journals())[0]

        forged = Store.at(tmp_path / "forged")
        day = forged.journals_dir / "2026-12-02"
        (forged.journals_dir / own.parent.name).mkdir(parents=True)
        shutil.copy(own, forged.journals_dir / own.parent.name / own.name)  # bob's real one
        _forge(own, day / "forge-1.jsonl", sid)  # header id ≠ file stem
        _forge(own, day / f"{sid}.jsonl", sid)  # alice's id throughout, as bob
        done = ship_store(forged, bob)
        assert done.events == len(own.read_bytes().splitlines()) - 1  # bob's own, shipped
        assert len(done.skipped) == 2, done.skipped
        refused = " ".join(done.skipped)
        assert f"its header's id \"{sid}\" is not its session id 'forge-1'" in refused
        assert "row-level security" in refused

        # the server itself refuses a row that disagrees with its header
        with psycopg.connect(bob) as c, pytest.raises(psycopg.errors.CheckViolation):
            c.execute(
                'INSERT INTO dsh_sessions (session_id, "user", created, last_active, header) '
                "VALUES ('forge-2', 'bob', 0, 0, %s::jsonb)",
                (json.dumps({"id": sid, "user": "bob"}),),
            )
        held = shared_db.rows(
            "SELECT session_id, \"user\", header->>'id' FROM dsh_sessions ORDER BY 1"
        )
        assert (sid, "alice", sid) in held
        assert all(s == h for s, _, h in held)

        mirrored = Store.at(tmp_path / "mirror")
        assert mirror_store(shared_db.target_for("prof"), mirrored).skipped == ()
        (copy,) = list(mirrored.journals_dir.rglob(f"{sid}.jsonl"))
        ours = victim.read_text(encoding="utf-8").splitlines()
        theirs = copy.read_text(encoding="utf-8").splitlines()
        assert theirs[1:] == ours[1:]
        assert json.loads(theirs[0]) == json.loads(ours[0])

        # a row shipped before the server checked (migration 0003 is NOT VALID for old rows)
        with psycopg.connect(shared_db.target, autocommit=True) as owner:
            owner.execute("ALTER TABLE dsh_sessions DROP CONSTRAINT dsh_sessions_header_id")
            owner.execute(
                'INSERT INTO dsh_sessions (session_id, "user", created, last_active, header) '
                "SELECT 'forge-3', \"user\", created - 1, last_active, header FROM dsh_sessions "
                "WHERE session_id = %s",
                (sid,),
            )
        again = Store.at(tmp_path / "mirror2")
        report = mirror_store(shared_db.target_for("prof"), again)
        assert report.skipped == (
            f"forge-3: its header names another session ({sid}); not mirrored (a forged or "
            "damaged session row)",
        )
        (copy,) = list(again.journals_dir.rglob(f"{sid}.jsonl"))
        assert copy.read_text(encoding="utf-8").splitlines()[1:] == ours[1:]
    finally:
        with psycopg.connect(shared_db.target, autocommit=True) as owner:
            owner.execute("DROP OWNED BY alice, bob, prof, dsh_student, dsh_instructor")
            owner.execute("DROP ROLE alice, bob, prof, dsh_student, dsh_instructor")
