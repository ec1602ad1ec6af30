"""Row-level security by user, with the setup SQL of docs/shared-store.md run as written: a
student's role ships and sees only their own sessions, cannot ship under another's name, and the
instructor's role sees every row."""

from __future__ import annotations

import re
from pathlib import Path

import psycopg
import pytest

from dsh_kernel.store.layout import Store
from dsh_kernel.store.shared.catchup import mirror_store, ship_store
from dsh_kernel.store.shared.connection import connect, migrate
from tests.support.course_sample import make_course
from tests.support.shared_db import SharedDb

ROOT = Path(__file__).resolve().parents[3]


def _privacy_sql() -> str:
    doc = (ROOT / "docs" / "shared-store.md").read_text(encoding="utf-8")
    section = doc.split("## Privacy in a class", 1)[1].split("\n## ", 1)[0]
    (sql,) = re.findall(r"```sql\n(.*?)```", section, flags=re.S)
    return sql


@pytest.fixture(scope="module")
def course(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Store]:
    return make_course(tmp_path_factory.mktemp("course"))


def test_a_student_sees_only_their_rows_and_the_instructor_all(
    shared_db: SharedDb, course: dict[str, Store], tmp_path: Path
) -> None:
    conn = connect(shared_db.target)
    migrate(conn)  # the owner sets up the schema
    conn.close()
    with psycopg.connect(shared_db.target, autocommit=True) as owner:
        owner.execute(_privacy_sql())  # type: ignore[arg-type]
        owner.execute("CREATE ROLE bob LOGIN IN ROLE dsh_student")
    try:
        alice, bob = shared_db.target_for("alice"), shared_db.target_for("bob")
        assert ship_store(course["alice"], alice).events > 0
        assert ship_store(course["bob"], bob).events > 0
        # alice cannot ship bob's sessions as hers: each is refused with a line, none is shipped
        refused = ship_store(course["bob"], alice)
        assert refused.events == 0
        assert len(refused.skipped) == len(list(course["bob"].iter_journals()))
        assert all("row-level security" in why for why in refused.skipped)

        def users(target: str) -> set[object]:
            with psycopg.connect(target) as c:
                sessions = {u for (u,) in c.execute('SELECT "user" FROM dsh_sessions')}
                events = {
                    u
                    for (u,) in c.execute(
                        'SELECT DISTINCT s."user" FROM dsh_events e '
                        "JOIN dsh_sessions s USING (session_id)"
                    )
                }
                (n,) = c.execute("SELECT count(*) FROM dsh_events").fetchone() or (0,)
            assert sessions == events
            return {*sessions, n}

        own = sum(p.read_bytes().count(b"\n") - 1 for p in course["alice"].iter_journals())
        assert users(alice) == {"alice", own}
        total = own + sum(p.read_bytes().count(b"\n") - 1 for p in course["bob"].iter_journals())
        assert users(shared_db.target_for("prof")) == {"alice", "bob", total}
        # the mirror as a student holds only the student's sessions
        mirrored = mirror_store(alice, Store.at(tmp_path / "m"))
        assert mirrored.sessions == len(list(course["alice"].iter_journals()))
    finally:
        with psycopg.connect(shared_db.target, autocommit=True) as owner:
            owner.execute("DROP OWNED BY alice, bob, prof, dsh_student, dsh_instructor")
            owner.execute("DROP ROLE alice, bob, prof, dsh_student, dsh_instructor")
