"""The budgets' ledger (issue 17): one user's usage today across the store's journals and the live
session — other users' sessions and earlier days left out, a fork's copied prefix counted once, a
journal read incrementally (and equal to reading it afresh), a torn tail waited for, a damaged
journal left out, and the database never needed. Sessions are recorded by a real ``Agent`` into
real journals; the provider and the clock are the fakes."""

from __future__ import annotations

import os
from pathlib import Path

import duckdb

from dsh_kernel import Agent
from dsh_kernel.agent.request.spend import tokens_of
from dsh_kernel.llm.types import TokenUsage
from dsh_kernel.session.daily_usage import DAY_MS
from dsh_kernel.session.events import SessionHeader
from dsh_kernel.session.log import Session
from dsh_kernel.store.journal import JournalWriter, attach_journal
from dsh_kernel.store.layout import Store
from dsh_kernel.store.ledger import DailyLedger
from dsh_kernel.store.sessions import fork
from dsh_kernel.testing import ScriptedProvider, text_response

DAY0 = 20_000 * DAY_MS


class Clock:
    def __init__(self, ms: int) -> None:
        self.ms = ms

    def __call__(self) -> int:
        self.ms += 1
        return self.ms


async def no_sleep(_s: float) -> None:
    return None


def agent_for(
    store: Store, user: str | None, clock: Clock, *, n: int = 1, session: Session | None = None
) -> tuple[Agent, JournalWriter]:
    """An agent of ``user`` journaled into ``store``; each answer reports 100 in, 10 out."""
    usage = TokenUsage(input_tokens=100, output_tokens=10)
    provider = ScriptedProvider([text_response("ok", usage=usage) for _ in range(n)])
    session = session or Session(
        header=SessionHeader(id=f"s-{user}-{clock.ms}", created_at=clock.ms, user=user),
        clock=clock,
    )
    agent = Agent(provider=provider, model="m1", session=session, clock=clock, sleep=no_sleep)
    return agent, attach_journal(agent, store, window_s=0)


async def chat(agent: Agent, *messages: str) -> None:
    for m in messages:
        agent.followup(m)
        await agent.when_idle()


def tokens(ledger: DailyLedger, live: Session | None = None) -> int:
    return sum(tokens_of(t) for t in ledger.usage(live).values())


def touch_today(path: Path, clock: Clock) -> None:
    """Give a journal written under the fake clock the file time of the fake day."""
    os.utime(path, ns=(clock.ms * 1_000_000, clock.ms * 1_000_000))


async def test_one_users_sessions_today_and_the_live_one(tmp_path: Path) -> None:
    store = Store.at(tmp_path / "store")
    clock = Clock(DAY0 - 3_600_000)  # yesterday, an hour before midnight
    old, w = agent_for(store, "ada", clock)
    await chat(old, "Yesterday.")
    w.close()
    clock.ms = DAY0 + 3_600_000  # today
    a, wa = agent_for(store, "ada", clock, n=2)
    await chat(a, "One.", "Two.")
    wa.close()
    b, wb = agent_for(store, "bob", clock)  # another user on the same store
    await chat(b, "Mine.")
    wb.close()
    legacy, wl = agent_for(store, None, clock)  # written before headers named the user
    await chat(legacy, "Old kernel.")
    wl.close()
    for p in store.iter_journals():
        touch_today(p, clock)
    live, wlive = agent_for(store, "ada", clock)
    await chat(live, "Live.")
    ledger = DailyLedger(store, "ada", clock=clock)
    # a's two turns, the legacy session's, the live one's: 110 tokens each; bob's and
    # yesterday's are not counted
    assert tokens(ledger, live.session) == 4 * 110
    assert tokens(DailyLedger(store, "bob", clock=clock)) == 2 * 110  # bob's + the legacy one
    wlive.close()


async def test_reading_on_equals_reading_afresh_and_a_torn_tail_waits(tmp_path: Path) -> None:
    store = Store.at(tmp_path / "store")
    clock = Clock(DAY0 + 1_000)
    other, w = agent_for(store, "ada", clock, n=3)  # another kernel's session, still open
    await chat(other, "One.")
    w.flush()
    for p in store.iter_journals():
        touch_today(p, clock)
    ledger = DailyLedger(store, "ada", clock=clock)
    assert tokens(ledger) == 110
    await chat(other, "Two.")
    w.flush()
    (path,) = store.iter_journals()
    with path.open("ab") as f:  # a write cut mid-line: read when it is finished
        f.write(b'{"type": "turn/start", "seq"')
    touch_today(path, clock)
    assert tokens(ledger) == 220
    assert tokens(DailyLedger(store, "ada", clock=clock)) == 220
    w.close()


async def test_new_sessions_and_a_restart_reset_nothing(tmp_path: Path) -> None:
    """``%agent new`` (the live session changes) and a restart (a new ledger) keep the count."""
    store = Store.at(tmp_path / "store")
    clock = Clock(DAY0 + 1_000)
    first, w1 = agent_for(store, "ada", clock)
    ledger = DailyLedger(store, "ada", clock=clock)
    await chat(first, "One.")
    assert tokens(ledger, first.session) == 110  # read from memory: its journal may lag
    w1.close()
    second, w2 = agent_for(store, "ada", clock)
    for p in store.iter_journals():
        touch_today(p, clock)
    assert tokens(ledger, second.session) == 110  # the first is read from its journal now
    await chat(second, "Two.")
    w2.flush()
    for p in store.iter_journals():
        touch_today(p, clock)
    assert tokens(ledger, second.session) == 220
    assert tokens(DailyLedger(store, "ada", clock=clock)) == 220  # a restarted kernel
    w2.close()


async def test_a_fork_counts_its_own_calls_only(tmp_path: Path) -> None:
    store = Store.at(tmp_path / "store")
    clock = Clock(DAY0 + 1_000)
    parent, wp = agent_for(store, "ada", clock, n=2)
    await chat(parent, "One.", "Two.")
    wp.close()
    seeded = fork(parent.session.header, list(parent.session.events), 1, clock=clock)
    child, wc = agent_for(store, "ada", clock, session=seeded)
    await chat(child, "Three.")
    wc.close()
    for p in store.iter_journals():
        touch_today(p, clock)
    assert tokens(DailyLedger(store, "ada", clock=clock)) == 3 * 110


async def test_a_damaged_journal_is_left_out_and_a_locked_database_changes_nothing(
    tmp_path: Path,
) -> None:
    store = Store.at(tmp_path / "store")
    clock = Clock(DAY0 + 1_000)
    good, wg = agent_for(store, "ada", clock)
    await chat(good, "One.")
    wg.close()
    day = next(store.iter_journals()).parent
    (day / "broken.jsonl").write_text("not a journal\n{}\n", encoding="utf-8")
    for p in store.iter_journals():
        touch_today(p, clock)
    store.root.mkdir(parents=True, exist_ok=True)
    con = duckdb.connect(str(store.db_path))  # another process's writer would hold this
    try:
        assert tokens(DailyLedger(store, "ada", clock=clock)) == 110
    finally:
        con.close()
