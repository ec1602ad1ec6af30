"""``dsh-kernel mirror``: the shared sessions pulled into a local store and ingested give
the same view rows as a local ingest of the same journals; a second mirror adds only what is new."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from dsh_kernel.__main__ import main
from dsh_kernel.store.db import open_db
from dsh_kernel.store.ingest.incremental import ingest
from dsh_kernel.store.layout import Store
from dsh_kernel.store.schema_doc import PUBLIC_VIEWS
from dsh_kernel.store.shared.catchup import ship_store
from tests.support.course_sample import make_course
from tests.support.shared_db import SharedDb

VIEWS = PUBLIC_VIEWS
"""Every documented view, so a view added later is compared too."""


def _rows(store: Store) -> dict[str, list[tuple[object, ...]]]:
    out: dict[str, list[tuple[object, ...]]] = {}
    with open_db(store, read_only=True) as con:
        for view in VIEWS:
            rows = con.execute(f"SELECT * FROM {view}").fetchall()
            out[view] = sorted(rows, key=repr)
    return out


@pytest.fixture(scope="module")
def course(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Store]:
    return make_course(tmp_path_factory.mktemp("course"))


def test_mirror_plus_ingest_equals_a_local_ingest(
    shared_db: SharedDb,
    course: dict[str, Store],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    local = Store.at(tmp_path / "local")
    for store in course.values():
        ship_store(store, shared_db.target)
        for path in store.iter_journals():
            dest = local.journals_dir / path.parent.name / path.name
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(path, dest)
    assert ingest(local).status != "deferred"
    mirrored = Store.at(tmp_path / "mirror")
    assert main(["mirror", shared_db.target, "--store", str(mirrored.root)]) == 0
    out = capsys.readouterr().out
    total = sum(p.read_bytes().count(b"\n") - 1 for p in local.iter_journals())
    assert out.startswith(f"mirrored {total} new events of 5 sessions from ")
    expected, got = _rows(local), _rows(mirrored)
    assert all(expected[v] == got[v] for v in VIEWS), [v for v in VIEWS if expected[v] != got[v]]
    assert len(expected["turns"]) > 0 and len(expected["tool_calls"]) > 0

    # incremental: nothing new, nothing added; --since cuts older sessions
    assert main(["mirror", shared_db.target, "--store", str(mirrored.root)]) == 0
    assert capsys.readouterr().out.startswith("mirrored 0 new events of 0 sessions")
    later = Store.at(tmp_path / "later")
    assert (
        main(["mirror", shared_db.target, "--store", str(later.root), "--since", "2026-11-04"]) == 0
    )
    assert len(list(later.iter_journals())) < 5


def test_mirror_appends_only_the_new_events(
    shared_db: SharedDb, course: dict[str, Store], tmp_path: Path
) -> None:
    src = next(course["alice"].iter_journals())
    partial = Store.at(tmp_path / "partial")
    dest = partial.journals_dir / src.parent.name / src.name
    dest.parent.mkdir(parents=True)
    lines = src.read_bytes().splitlines(keepends=True)
    dest.write_bytes(b"".join(lines[:5]))  # a mirror taken mid-session: header + 4 events
    ship_store(course["alice"], shared_db.target)
    assert main(["mirror", shared_db.target, "--store", str(partial.root)]) == 0
    from dsh_kernel.store.journal import read_session

    assert read_session(dest).events == read_session(src).events


def test_mirror_refuses_a_password_in_its_dsn(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert (
        main(["mirror", "postgresql://prof:Hunter2-long-pass@hub/course", "--store", str(tmp_path)])
        == 1
    )
    err = capsys.readouterr().err
    assert err.startswith("error: the mirror's DSN holds a password: remove it from the URL")
    assert "Hunter2-long-pass" not in err


def test_mirror_without_a_dsn_takes_the_shared_store_ship_uses(
    shared_db: SharedDb,
    course: dict[str, Store],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    ship_store(course["chen"], shared_db.target)
    monkeypatch.setenv("DSH_SHARED_STORE", shared_db.target)
    mirrored = Store.at(tmp_path / "mirror")
    assert main(["mirror", "--store", str(mirrored.root)]) == 0
    assert capsys.readouterr().out.startswith("mirrored ")
    assert {p.stem for p in course["chen"].iter_journals()} <= {
        p.stem for p in mirrored.iter_journals()
    }
    monkeypatch.delenv("DSH_SHARED_STORE")
    assert main(["mirror", "--store", str(mirrored.root)]) == 1
    assert capsys.readouterr().err.startswith("error: no shared store: give its DSN")
