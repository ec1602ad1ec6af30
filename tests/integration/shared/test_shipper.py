"""The kernel's shipper thread against a real PostgreSQL: an agent's session arrives exactly once
across a server stop and restart, and a server that never answers delays no checkpoint."""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from collections.abc import Callable
from pathlib import Path

from dsh_kernel import Agent
from dsh_kernel.store.journal import JournalWriter, attach_journal
from dsh_kernel.store.layout import Store
from dsh_kernel.store.shared.shipper import Shipper
from dsh_kernel.testing import ScriptedProvider, text_response
from tests.support.shared_db import SharedDb


def _agent(store: Store, turns: int) -> tuple[Agent, JournalWriter]:
    provider = ScriptedProvider([text_response(f"answer {n}", pieces=3) for n in range(turns)])
    agent = Agent(provider=provider, model="m1")
    return agent, attach_journal(agent, store)


async def _chat(agent: Agent, *prompts: str) -> float:
    started = time.monotonic()
    for p in prompts:
        agent.followup(p)
        await agent.when_idle()
    return time.monotonic() - started


async def _until(condition: Callable[[], bool], timeout_s: float = 30) -> bool:
    """Whether ``condition()`` holds within ``timeout_s`` (polled; on a loaded machine the shipper's
    thread may take a while to get its turn)."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            return False
        await asyncio.sleep(0.05)
    return True


def _journal_seqs(path: Path) -> list[int]:
    return list(range(path.read_bytes().count(b"\n") - 1))


def _server_seqs(db: SharedDb) -> list[int]:
    return [int(s) for (s,) in db.rows("SELECT seq FROM dsh_events ORDER BY seq")]


async def test_a_server_restart_loses_and_duplicates_nothing(
    shared_db: SharedDb, tmp_path: Path
) -> None:
    agent, writer = _agent(Store.at(tmp_path), 4)
    shipper = Shipper(shared_db.target, interval_s=0.05, max_backoff_s=0.2)
    try:
        shipper.follow(writer, agent.hooks)
        await _chat(agent, "one")
        assert await asyncio.to_thread(shipper.wait_idle, 10)
        assert _server_seqs(shared_db) == _journal_seqs(writer.path)

        shared_db.server.stop()
        elapsed = await _chat(agent, "two", "three")
        assert elapsed < 2  # the chat never waits for the server
        assert await _until(lambda: shipper.status().error is not None), shipper.status()
        status = shipper.status()
        assert status.behind > 0 and status.error is not None, status
        assert "events behind" in status.line()

        shared_db.server.start()
        await _chat(agent, "four")
        assert await asyncio.to_thread(shipper.wait_idle, 15), shipper.status()
        seqs = _server_seqs(shared_db)
        assert seqs == _journal_seqs(writer.path)
        assert shipper.status().line().endswith(f"up to date ({len(seqs)} events shipped)")
    finally:
        shipper.close(0.5)
        writer.close()


async def test_a_server_that_never_answers_delays_no_checkpoint(tmp_path: Path) -> None:
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(8)  # accepts connections (the kernel queues them) and never says a word
    accepted: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        silent.settimeout(0.1)
        while not stop.is_set():
            try:
                accepted.append(silent.accept()[0])
            except TimeoutError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    port = silent.getsockname()[1]
    agent, writer = _agent(Store.at(tmp_path), 3)
    shipper = Shipper(f"host=127.0.0.1 port={port} dbname=x user=x", interval_s=0.01)
    try:
        shipper.follow(writer, agent.hooks)
        elapsed = await _chat(agent, "one", "two", "three")
        assert elapsed < 1.5, elapsed  # the shipper is stuck connecting for up to 5 s meanwhile
        assert shipper.status().behind == writer.committed > 0
    finally:
        started = time.monotonic()
        shipper.close(0.2)
        assert time.monotonic() - started < 2  # shutdown is bounded too
        writer.close()
        stop.set()
        thread.join()
        for s in accepted:
            s.close()
        silent.close()


async def test_an_idle_shipper_closes_its_connection(shared_db: SharedDb, tmp_path: Path) -> None:
    agent, writer = _agent(Store.at(tmp_path), 2)
    shipper = Shipper(shared_db.target, interval_s=0.05, idle_close_s=0.3)

    def connections() -> int:
        ((n,),) = shared_db.rows(
            "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'dsh-kernel'"
        )
        return int(n)

    try:
        shipper.follow(writer, agent.hooks)
        await _chat(agent, "one")
        assert await asyncio.to_thread(shipper.wait_idle, 10)
        assert connections() == 1
        assert await _until(lambda: connections() == 0)  # idle: closed
        await _chat(agent, "two")  # and opened again when there is work
        assert await asyncio.to_thread(shipper.wait_idle, 10)
        assert _server_seqs(shared_db) == _journal_seqs(writer.path)
    finally:
        shipper.close(0.5)
        writer.close()


async def test_only_events_made_durable_by_a_checkpoint_are_shipped(
    shared_db: SharedDb, tmp_path: Path
) -> None:
    agent, writer = _agent(Store.at(tmp_path), 1)
    shipper = Shipper(shared_db.target, interval_s=0.01)
    try:
        shipper.follow(writer, agent.hooks)
        await _chat(agent, "one")
        assert await asyncio.to_thread(shipper.wait_idle, 10)
        shipped = len(_server_seqs(shared_db))
        agent.session.append(
            "session/title", {"title": "written, not yet checkpointed", "source": {"kind": "user"}}
        )
        writer.flush()  # in the file, but no checkpoint has vouched for it
        shipper.poke(now=True)
        await asyncio.sleep(0.3)
        assert len(_server_seqs(shared_db)) == shipped
        assert shipper.status().behind == 0  # it is not durable yet, so nothing is behind
        shipper.close(2.0)  # the journal is closed first at shutdown: close ships the rest
        assert _server_seqs(shared_db) == _journal_seqs(writer.path)
    finally:
        shipper.close(0.5)
        writer.close()
