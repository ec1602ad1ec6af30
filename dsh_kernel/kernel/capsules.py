"""Opening a notebook elsewhere: the first chat cell imports the conversation its capsules carry.

When a kernel's first chat cell runs (its session has no turn yet) in a notebook saved with
capsules (``capsule``; the saved file the server named, ``kernel.notebook.snapshot.fallback_file``),
the capsules of the cells present are joined (``capsule.conversation.join``). If that conversation
is a session this store does not hold, it is imported (or, when this store imported the same
conversation before — the notebook reopened —, that import is resumed): a new session seeded with its log, linked
to it with ``parent_kind = 'import'`` (what it holds is self-reported), and the cell continues it
with its full context — then re-running an earlier chat cell rewinds it (``kernel.rewind``), as on
the machine it came from. A session the store already holds is left alone (``%agent resume`` it).

``%agent replay <id>`` of a session the store does not hold replays the notebook's own capsules
when they carry it (``replay_from_notebook``): a shared, replayed notebook needs nothing beside it.

A capsule that is malformed or altered fails the chat cell with one line naming its cell
(``CAPSULE_INVALID``, ``CAPSULE_ALTERED``) before anything is sent; the next chat cell tries again.
Reading capsules never sends anything to a model and runs nothing they hold.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import TYPE_CHECKING

from dsh_kernel.capsule.format import Capsule, CapsuleError
from dsh_kernel.errors import StoreError
from dsh_kernel.session.payloads import payload_of

if TYPE_CHECKING:
    from dsh_kernel.kernel.host.agent_host import AgentHost
    from dsh_kernel.store.replay import ReplayProvider


def import_notebook(host: AgentHost) -> str | None:
    """Import the conversation the notebook's capsules carry, if there is one to import (module
    docstring): the line that says so, else ``None``. Raises ``CapsuleError``."""
    from dsh_kernel.capsule.conversation import imported_session, join

    desk = host.desk
    path = desk.saved_file() if desk is not None else None
    if path is None:
        return None
    joined = join(_read(path))
    source = joined.header
    left = _left_lines(joined.left)
    if source is None:
        return (
            "\n".join(["no conversation imported from this notebook's capsules:", *left])
            if left
            else None
        )
    if _holds(host, source.id):
        return (
            f"this notebook's conversation is session {source.id[:8]} of this store: "
            f"`%agent resume {source.id[:8]}` continues it"
        )
    earlier = _earlier_import(host, source.id, len(joined.events))
    if earlier is not None and host.store is not None:
        from dsh_kernel.store.sessions import resume

        try:  # this notebook was opened here before: go on with that import
            agent = host.new_session(resume(host.store, earlier))
        except StoreError:  # e.g. another kernel has it open: import anew
            pass
        else:
            return (
                f"continuing the conversation this notebook carries, imported here before: "
                f"session {earlier[:8]} ({agent.session.last_turn} turns)"
            )
    session = imported_session(
        joined,
        notebook=host.notebook,
        user=host.settings.course.user,
        ai_policy=host.policy.in_force().policy,
    )
    if session is None:
        return None
    agent = host.new_session(session)
    turns = len(joined.turns)
    lines = [
        f"imported the conversation this notebook carries: {turns} turn{'s' if turns != 1 else ''} "
        f"of session {source.id[:8]} (self-reported, from the notebook's capsules), now session "
        f"{agent.session.id[:8]}"
    ]
    return "\n".join([*lines, *left])


MAX_LEFT_LINES = 5


def _left_lines(left: list[str]) -> list[str]:
    lines = [f"  left out: {why}" for why in left[:MAX_LEFT_LINES]]
    if len(left) > MAX_LEFT_LINES:
        lines.append(f"  and {len(left) - MAX_LEFT_LINES} more cells left out")
    return lines


def _earlier_import(host: AgentHost, source: str, seed_length: int) -> str | None:
    """The session that imported this conversation into this store before, if any (a store that
    cannot be queried now: none, and the import goes ahead)."""
    store = host.store
    if store is None:
        return None
    from dsh_kernel.store.sessions import earlier_import

    try:
        return earlier_import(store, source, seed_length)
    except StoreError:
        return None


def _holds(host: AgentHost, session_id: str) -> bool:
    """Whether the store holds exactly ``session_id`` (not merely one it is a prefix of)."""
    store = host.store
    if store is None:
        return False
    try:
        from dsh_kernel.store.layout import JOURNAL_SUFFIX

        return store.find_journal(session_id).name == session_id + JOURNAL_SUFFIX
    except StoreError:
        return False


_FAILED: dict[tuple[str, int, int], CapsuleError] = {}
"""A notebook file (path, size, mtime) whose capsules were refused, and why: refused again at once,
not decoded again at every chat cell, until the file changes."""


def _read(path: Path) -> list[tuple[str, Capsule]]:
    from dsh_kernel.capsule.conversation import notebook_capsules

    try:
        st = path.stat()
        key = (str(path), st.st_size, st.st_mtime_ns)
    except OSError:
        key = None
    if key is not None and key in _FAILED:
        raise _FAILED[key]
    try:
        return notebook_capsules(path)
    except CapsuleError as exc:
        if key is not None:
            _FAILED.clear()
            _FAILED[key] = exc
        raise


def replay_from_notebook(
    host: AgentHost, session_id: str | None, path: Path | None = None
) -> tuple[ReplayProvider, str, str] | None:
    """A replay of the conversation the capsules of the notebook at ``path`` (default: this
    kernel's saved notebook) carry, when its session's id starts with ``session_id`` (``None``:
    whatever it is): the provider, the session's id and the model it talked to; else ``None``.
    Raises ``CapsuleError`` for a bad capsule."""
    from dsh_kernel.capsule.conversation import join
    from dsh_kernel.store.replay import ReplayProvider

    if path is None:
        desk = host.desk
        path = desk.saved_file() if desk is not None else None
    if path is None:
        return None
    joined = join(_read(path))
    source = joined.header
    if source is None or (session_id is not None and not source.id.startswith(session_id)):
        return None
    header = dataclasses.replace(source, seed_length=None)  # the notebook's whole conversation
    provider = ReplayProvider(joined.events, header=header)
    model = next(
        (
            payload_of(ev, "request/context")["model"]
            for ev in joined.events
            if ev.type == "request/context"
        ),
        "replay",
    )
    return provider, source.id, model
