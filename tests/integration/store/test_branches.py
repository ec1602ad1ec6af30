"""Re-run chat cells in the store (issue 33): ``sessions.parent_kind``, ``messages.cell_id``,
``turns.cell_id`` and ``turns.left_out``, and the ``branches`` view, over the sessions of
``rewind_sessions`` (its docstring draws them)."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import duckdb

from dsh_kernel.session.events import SessionHeader
from dsh_kernel.session.log import Session
from dsh_kernel.store.ingest.incremental import ingest
from dsh_kernel.store.journal import attach_journal
from dsh_kernel.store.layout import Store
from dsh_kernel.store.query.run import run_query
from dsh_kernel.store.sessions import export_parquet

from .rewind_sessions import GONE, T0, G, O, P, R, X, Y, clock, record_rewind_sessions, turn


def _between_turns(line: bytes) -> bool:
    """The journal line ends a turn, or is a note written between turns (or is the header)."""
    obj = json.loads(line)
    kind = obj["type"]
    return kind in ("session", "turn/end") or (
        kind == "user/message" and obj.get("surfaceOp", "append") != "append"
    )


def rows(store: Store, sql: str) -> list[tuple[object, ...]]:
    return [tuple(r) for r in run_query(store, sql).rows]


def test_sessions_name_how_they_came_from_their_parent(store: Store) -> None:
    record_rewind_sessions(store)
    got = rows(store, "SELECT session_id, parent_session, parent_kind FROM sessions ORDER BY 1")
    assert got == [
        (P, None, None),
        (R, P, "rewind"),
        (G, R, "rewind"),
        (Y, P, "policy"),
        (O, P, "fork"),  # no parentKind in its header: a fork
        (X, GONE, "fork"),
    ]


def test_turns_name_their_cell_and_why_they_left_the_context(store: Store) -> None:
    record_rewind_sessions(store)
    got = rows(
        store,
        "SELECT session_id, turn, cell_id, left_out, seeded FROM turns "
        f"WHERE session_id IN ('{P}', '{R}', '{O}') ORDER BY 1, 2",
    )
    assert got == [
        (P, 1, "c1", None, False),
        (P, 2, "c2", None, False),
        (P, 3, "c3", None, False),
        (R, 1, "c1", "deleted", True),  # the newest of its two notes
        (R, 2, "c2", None, False),
        (R, 3, "c4", "rerun", False),
        (R, 4, "c4", None, False),
        (O, 1, "c1", None, True),
        (O, 2, "c2", None, True),
        (O, 3, None, None, False),  # not asked from a chat cell
    ]
    # the notes are plugin messages: no cell of their own, and the model no longer sees the turns
    msgs = rows(
        store,
        "SELECT turn, source, cell_id, replaced_by IS NULL FROM messages "
        f"WHERE session_id = '{R}' AND type = 'user/message' AND NOT seeded ORDER BY seq",
    )
    assert msgs == [
        (2, "user", "c2", True),
        (3, "user", "c4", False),
        (None, "plugin", None, True),  # turn 3's note (between turns)
        (4, "user", "c4", True),
        (None, "plugin", None, False),  # turn 1's first note, replaced by the second
        (None, "plugin", None, True),
    ]


def test_branches_list_the_lineage_of_a_session(store: Store) -> None:
    record_rewind_sessions(store)
    cols = (
        "session_id, parent_session, parent_kind, root_session, depth, forked_after_turn, turn, "
        "cell_id, replaces_turn, dropped_turns, names"
    )
    got = rows(store, f"SELECT {cols} FROM branches WHERE root_session = '{P}' ORDER BY created_at")
    assert got == [
        (R, P, "rewind", P, 1, 1, 2, "c2", 2, [2, 3], ["df", "model"]),
        (G, R, "rewind", P, 2, 2, 3, "c4", 3, [3, 4], ["df", "model"]),
        (Y, P, "policy", P, 1, 3, 4, "c5", None, None, None),
        (O, P, "fork", P, 1, 2, 3, None, None, None, None),
    ]
    # a parent the store no longer holds ends the chain: it is the root
    assert rows(
        store, f"SELECT session_id, root_session, depth FROM branches WHERE root_session = '{GONE}'"
    ) == [(X, GONE, 1)]
    # one row per session with a parent; the branches of a branch are its subtree's
    assert rows(store, "SELECT count(*) FROM branches") == [(5,)]
    assert rows(store, f"SELECT session_id FROM branches WHERE parent_session = '{R}'") == [(G,)]
    created = rows(
        store,
        f"SELECT created_at = (SELECT created FROM sessions WHERE session_id = '{R}') FROM branches WHERE session_id = '{R}'",
    )
    assert created == [(True,)]


def test_a_lineage_cycle_ends(store: Store) -> None:
    """Two headers naming each other (damaged, or hand-made) still give one row each, never a
    query that does not end."""
    a, b = "00000033-0000-4000-8000-0000000000aa", "00000033-0000-4000-8000-0000000000bb"
    for sid, parent in ((a, b), (b, a), (X, X)):
        s = Session(
            header=SessionHeader(id=sid, created_at=T0, parent_session=parent, parent_kind="fork"),
            clock=clock(T0),
        )
        w = attach_journal(s, store)
        turn(s, 1, "c", "q")
        w.close()
    got = rows(store, "SELECT session_id, root_session, depth FROM branches ORDER BY 1")
    assert got == [(X, X, 1), (a, b, 1), (b, a, 1)]


def test_rewinds_reingest_the_same_in_many_passes_and_export(store: Store, tmp_path: Path) -> None:
    writers = record_rewind_sessions(store)
    whole = rows(store, "SELECT * FROM branches ORDER BY session_id")
    turns = rows(store, "SELECT session_id, turn, cell_id, left_out FROM turns ORDER BY 1, 2")
    # the same journals ingested a turn or a note at a time (never mid-turn: ingest would repair a
    # journal whose last turn is open): the same rows
    other = Store.at(tmp_path / "other")
    for w in writers.values():
        if not w.path.exists():
            continue
        lines = w.path.read_bytes().splitlines(keepends=True)
        dest = other.root / w.path.relative_to(store.root)
        dest.parent.mkdir(parents=True, exist_ok=True)
        cuts = [i + 1 for i, line in enumerate(lines) if _between_turns(line)]
        assert len(cuts) >= 2
        for i, j in itertools.pairwise([0, *cuts, len(lines)]):
            with dest.open("ab") as f:
                f.write(b"".join(lines[i:j]))
            assert not ingest(other).issues
    assert rows(other, "SELECT * FROM branches ORDER BY session_id") == whole
    assert (
        rows(other, "SELECT session_id, turn, cell_id, left_out FROM turns ORDER BY 1, 2") == turns
    )
    out = export_parquet(store, tmp_path / "export")
    con = duckdb.connect()
    try:
        n = con.execute(f"SELECT count(*) FROM '{out / 'branches.parquet'}'").fetchone()
    finally:
        con.close()
    assert n == (5,)
