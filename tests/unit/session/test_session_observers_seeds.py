"""Observers (post-commit, contained errors, no re-entrant append) and seeds with ``session/end-seed``."""

from __future__ import annotations

import logging

import pytest

from dsh_kernel.errors import ReentrantAppendError, SurfaceError, UsageError
from dsh_kernel.jsonvalue import JsonObject
from dsh_kernel.session.check.invariants import check_invariants
from dsh_kernel.session.events import SessionEvent
from dsh_kernel.session.log import Session
from tests.unit.session.scripts import new_session, user_message

TITLE: JsonObject = {"title": "t", "source": "user"}


# --- observers ---------------------------------------------------------------------------------------


def test_observers_run_after_commit_in_subscription_order() -> None:
    s = new_session()
    calls: list[tuple[str, int, int]] = []
    s.subscribe(lambda ev: calls.append(("first", ev.seq, len(s))))
    s.subscribe(lambda ev: calls.append(("second", ev.seq, len(s))))
    s.append("session/title", TITLE)
    # Both saw the event already committed (the log length includes it).
    assert calls == [("first", 0, 1), ("second", 0, 1)]


def test_observer_receives_the_committed_event_itself() -> None:
    s = new_session()
    seen: list[SessionEvent] = []
    s.subscribe(seen.append)
    ev = s.append("session/title", TITLE)
    assert seen == [ev]
    assert seen[0] is s.events[0]


def test_observer_errors_are_contained_and_logged(caplog: pytest.LogCaptureFixture) -> None:
    s = new_session()
    after: list[int] = []

    def broken(ev: SessionEvent) -> None:
        raise RuntimeError("observer bug")

    s.subscribe(broken)
    s.subscribe(lambda ev: after.append(ev.seq))
    with caplog.at_level(logging.ERROR, logger="dsh_kernel.session.log"):
        ev = s.append("session/title", TITLE)
    assert ev.seq == 0
    assert len(s) == 1
    assert after == [0]  # later observers still ran
    assert "observer bug" in caplog.text
    assert "session/title" in caplog.text


def test_append_from_an_observer_is_rejected() -> None:
    s = new_session()
    errors: list[BaseException] = []

    def reentrant(ev: SessionEvent) -> None:
        try:
            s.append("session/title", TITLE)
        except ReentrantAppendError as exc:
            errors.append(exc)

    s.subscribe(reentrant)
    s.append("session/title", TITLE)
    assert len(errors) == 1
    assert isinstance(errors[0], UsageError)
    assert errors[0].code == "REENTRANT_APPEND"
    assert len(s) == 1
    # After notification the session accepts appends again.
    s.append("session/title", TITLE)
    assert len(s) == 2


def test_unsubscribe_stops_notifications() -> None:
    s = new_session()
    seen: list[int] = []
    dispose = s.subscribe(lambda ev: seen.append(ev.seq))
    s.append("session/title", TITLE)
    dispose()
    dispose()  # idempotent
    s.append("session/title", TITLE)
    assert seen == [0]


def test_an_observer_may_unsubscribe_itself() -> None:
    s = new_session()
    seen: list[int] = []

    def once(ev: SessionEvent) -> None:
        seen.append(ev.seq)
        dispose()

    dispose = s.subscribe(once)
    s.append("session/title", TITLE)
    s.append("session/title", TITLE)
    assert seen == [0]


# --- seeds and end-seed ------------------------------------------------------------------------------


def balanced_seed() -> list[SessionEvent]:
    s = new_session()
    s.append("turn/start", {"turn": 1})
    s.append("step/start", {"turn": 1, "step": 1})
    s.append("user/message", user_message("seeded"), surface_op="append")
    s.append("step/end", {"turn": 1, "step": 1})
    s.append("turn/end", {"turn": 1, "reason": {"kind": "completed"}})
    return list(s.events)


def test_seeded_session_writes_end_seed_before_its_first_live_event() -> None:
    seed = balanced_seed()
    s = new_session(seed)
    assert (s.seed_length, s.first_live_seq, s.last_turn) == (5, None, 1)
    assert [m.text() for m in s.derive_messages()] == ["seeded"]
    seen: list[str] = []
    s.subscribe(lambda ev: seen.append(ev.type))
    ev = s.append("turn/start", {"turn": 2})
    assert [e.type for e in s.events][5:] == ["session/end-seed", "turn/start"]
    assert ev.seq == 6
    assert s.events[5].time == ev.time
    assert s.first_live_seq == 6
    assert seen == ["session/end-seed", "turn/start"]
    s.append("turn/end", {"turn": 2, "reason": {"kind": "completed"}})
    assert check_invariants(list(s.events)) == []


def test_end_seed_is_written_once() -> None:
    s = new_session(balanced_seed())
    s.append("session/title", TITLE)
    s.append("session/title", TITLE)
    assert sum(e.type == "session/end-seed" for e in s.events) == 1


def test_a_seed_that_ends_with_end_seed_gets_no_second_one() -> None:
    first = new_session(balanced_seed())
    first.append("session/end-seed", {})
    seed = list(first.events)
    s = new_session(seed)
    assert s.first_live_seq == len(seed)
    s.append("session/title", TITLE)
    assert [e.type for e in s.events][-2:] == ["session/end-seed", "session/title"]
    assert sum(e.type == "session/end-seed" for e in s.events) == 1


def test_an_unseeded_session_writes_no_end_seed() -> None:
    s = new_session()
    assert s.first_live_seq == 0
    s.append("session/title", TITLE)
    assert [e.type for e in s.events] == ["session/title"]


def test_explicit_end_seed_as_first_live_write() -> None:
    s = new_session(balanced_seed())
    ev = s.append("session/end-seed", {})
    assert ev.seq == 5
    assert s.first_live_seq == 6
    assert sum(e.type == "session/end-seed" for e in s.events) == 1


def test_a_refused_first_live_append_writes_no_end_seed() -> None:
    s = new_session(balanced_seed())
    with pytest.raises(SurfaceError):
        s.append("user/message", user_message())  # no surface_op
    assert len(s) == 5
    assert s.first_live_seq is None
    # The next good append still gets its end-seed, and cites seqs relative to it.
    ev = s.append("user/message", user_message(), surface_op="append", source_event_seqs=[5])
    assert [e.type for e in s.events][5:] == ["session/end-seed", "user/message"]
    assert ev.seq == 6


def test_seed_must_be_contiguous() -> None:
    seed = balanced_seed()
    with pytest.raises(SurfaceError, match="not contiguous"):
        new_session(seed[:2] + seed[3:])


def test_seed_surface_rules_are_checked() -> None:
    seed = balanced_seed()
    bad = SessionEvent(type="session/title", seq=5, time=1, data=TITLE, surface_op="append")
    with pytest.raises(SurfaceError):
        new_session([*seed, bad])


def test_seed_restores_open_turn_state() -> None:
    seed = balanced_seed()
    s = Session(header=new_session().header, seed=seed[:3])
    assert (s.open_turn, s.open_step, s.last_turn) == (1, 1, 1)
