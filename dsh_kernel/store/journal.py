"""The per-session journal: write-behind JSONL with durable checkpoints, and loading with crash repair.

Format: ``dsh_kernel.session.codec`` (a header line, then one event per line), at ``Store.journal_path``.

``JournalWriter`` is a session observer (SPINE §6.2):

* each committed event is encoded at once and queued (the observer never does I/O);
* the first queued event starts a batching window (``window_s``, 200 ms) on the running event loop, if
  there is one; when it closes the batch is written (no fsync: it survives a killed process, not a power
  cut). Events arriving later form the next batch;
* ``flush()`` is the barrier: it writes everything queued and fsyncs. ``aflush()`` does the same on a
  worker thread (the agent's ``checkpoint`` hook awaits it before every model request, before every
  tool body, at step boundaries and at turn end); ``close()`` flushes and releases the file;
* a failed write truncates the file back to its previous length, keeps its events queued and pauses
  the background window; the next ``flush()`` retries and raises ``StoreError(JOURNAL_WRITE_FAILED)``
  if it fails again — raised from a checkpoint, this stops the turn before the model or tool runs
  (fail closed);
* while the file is open the writer holds an advisory ``flock`` on it (POSIX), so a second process
  cannot append to, or crash-repair, a session that is live elsewhere (``StoreError(SESSION_LIVE)``,
  after waiting up to ``LOCK_WAIT_S`` for a holder that only needs the lock for an instant). The lock
  is also how other processes tell a dead writer from a live one (``writer_gone``).

The file is created lazily: a session that never appends leaves nothing behind. A writer attached to a
session whose file already exists (resume) checks the header id, writes only the events the file does
not hold yet, and refuses a file with an unrepaired torn tail.

``load_session(path)`` reads a journal with ``read_journal`` (a torn last line is dropped; any other
damage raises ``SessionFormatError`` naming the file and line), cuts a torn tail off the file, and if the
last turn is open appends the crash-repair closers (``dsh_kernel.session.repair``) to the file, fsynced,
before returning them with the events. ``read_session(path)`` does the same in memory only.
``repair_orphan(path)`` is ``load_session`` for a journal that may be live: it takes the lock without
waiting and repairs only if it got it, so a kernel's journal is never repaired under it; where the
platform or filesystem cannot lock, it does nothing (ingest uses it: ``dsh_kernel.store.ingest.incremental``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import stat
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple, Protocol

from dsh_kernel.agent.hooks import AgentHooks, Checkpoint
from dsh_kernel.errors import LosslessJsonError, SessionFormatError, StoreError
from dsh_kernel.session.codec import dumps, encode_event, header_from_json, header_to_json, loads
from dsh_kernel.session.events import SessionEvent, SessionHeader
from dsh_kernel.session.journal_io import JOURNAL_DAMAGED, read_journal
from dsh_kernel.session.log import Session
from dsh_kernel.session.repair import repair
from dsh_kernel.store.layout import Store, store_dir

try:
    import fcntl as _fcntl
except ImportError:  # pragma: no cover - Windows: no advisory locks, single-writer by convention
    _fcntl = None

__all__ = [
    "DEFAULT_WINDOW_S",
    "JournalWriter",
    "LoadedSession",
    "Store",
    "attach_journal",
    "load_session",
    "read_session",
    "repair_orphan",
    "repair_orphan_if_open",
    "store_dir",
    "writer_gone",
]

_log = logging.getLogger(__name__)

DEFAULT_WINDOW_S = 0.2


class LoadedSession(NamedTuple):
    """A session read from its journal: header, events, and whether repair closed an open turn."""

    header: SessionHeader
    events: tuple[SessionEvent, ...]
    repaired: bool
    """True when crash-repair closers were appended (to the file, for ``load_session``)."""


class JournalWriter:
    """Write-behind journal of one session. See the module docstring for the contract."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        header: SessionHeader,
        *,
        window_s: float = DEFAULT_WINDOW_S,
    ) -> None:
        self.path = Path(path)
        self.header = header
        self.window_s = window_s
        self.last_error: StoreError | None = None
        """The latest failed write (background or explicit); cleared by a successful flush."""
        self._pending: list[str] = []
        self._qlock = threading.Lock()  # guards _pending and _next_seq (observer vs. flush thread)
        self._iolock = threading.Lock()  # serialises writes, fsyncs and close
        self._fd: int | None = None
        self._dirty = False  # written but not fsynced
        self._timer: asyncio.TimerHandle | None = None
        self._paused = False
        self._closed = False
        self._broken: StoreError | None = None  # a sequencing fault: permanent
        self._dispose: list[Callable[[], None]] = []
        self.committed = 0
        """Events durable in the file (written; fsynced after a flush)."""
        self._needs_header = True
        if self.path.is_file() and self.path.stat().st_size > 0:
            try:
                self._adopt_existing()
            except BaseException:
                self._release()
                raise
        self._next_seq = self.committed

    # --- the file ----------------------------------------------------------------------------------

    def _adopt_existing(self) -> None:
        fd = self._open()
        with open(fd, "rb", closefd=False) as f:
            f.seek(0)
            first = f.readline()
            rest_newlines = sum(chunk.count(b"\n") for chunk in iter(lambda: f.read(1 << 20), b""))
            f.seek(-1, os.SEEK_END)
            ends_clean = f.read(1) == b"\n"
        try:
            existing = header_from_json(loads(first.decode("utf-8")), where=f"{self.path}:1")
        except (ValueError, SessionFormatError) as exc:
            raise StoreError(
                f"{self.path}: not a session journal ({exc})", code="JOURNAL_MISMATCH"
            ) from exc
        if existing.id != self.header.id:
            raise StoreError(
                f"{self.path} belongs to session {existing.id}, not {self.header.id}",
                code="JOURNAL_MISMATCH",
            )
        if not ends_clean:
            raise StoreError(
                f"{self.path} ends with a torn line; load it with load_session() (which repairs it) "
                "before appending",
                code="JOURNAL_TORN",
            )
        self.committed = rest_newlines
        self._needs_header = False

    def _open(self) -> int:
        if self._fd is not None:
            return self._fd
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            _lock_exclusive(fd, self.path)
        except BaseException:
            os.close(fd)
            raise
        self._fd = fd
        return fd

    # --- observing ---------------------------------------------------------------------------------

    def attach(self, session: Session, *, checkpoints: AgentHooks | None = None) -> None:
        """Queue the session's events the file lacks (a fork's seed, events before attaching) and
        observe every later append; with ``checkpoints``, flush durably at every agent checkpoint."""
        if session.id != self.header.id:
            raise StoreError(f"writer of {self.header.id} attached to session {session.id}")
        for ev in session.events[self._next_seq :]:
            self.on_event(ev)
        self._dispose.append(session.subscribe(self.on_event))
        if checkpoints is not None:
            self._dispose.append(checkpoints.checkpoint.on(self.on_checkpoint))

    def on_event(self, event: SessionEvent) -> None:
        """The session observer: encode and queue; never raises, never does I/O."""
        with self._qlock:
            if event.seq < self._next_seq:
                return  # already in the file (e.g. attached twice)
            if event.seq != self._next_seq or self._closed:
                why = (
                    "after close" if self._closed else f"seq {event.seq}, expected {self._next_seq}"
                )
                self._broken = self._broken or StoreError(
                    f"journal {self.path} cannot take event {event.type} ({why}); the events from "
                    "here on are not journaled",
                    code="JOURNAL_WRITE_FAILED",
                )
                return
            self._pending.append(encode_event(event) + "\n")
            self._next_seq += 1
        self._arm_timer()

    def _arm_timer(self) -> None:
        if self._timer is not None or self._paused or self.window_s <= 0:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return  # no loop: only explicit flushes write
        self._timer = loop.call_later(self.window_s, self._on_window)

    def _on_window(self) -> None:
        self._timer = None
        try:
            self._write(fsync=False)
        except StoreError as exc:
            _log.warning("%s (will retry at the next checkpoint)", exc)

    # --- writing -----------------------------------------------------------------------------------

    @property
    def pending(self) -> int:
        """Events queued but not yet written."""
        return len(self._pending)

    def flush(self) -> None:
        """Write everything queued and fsync. Raises ``StoreError(JOURNAL_WRITE_FAILED)``."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._write(fsync=True)

    async def aflush(self) -> None:
        """``flush()`` on a worker thread, so a slow disk never stalls the event loop."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._pending or self._dirty or self._broken is not None:
            await asyncio.to_thread(self._write, fsync=True)

    async def on_checkpoint(self, checkpoint: Checkpoint) -> None:
        """The agent ``checkpoint`` listener: a durability barrier (fail closed)."""
        del checkpoint
        await self.aflush()

    def _write(self, *, fsync: bool) -> None:
        with self._iolock:
            with self._qlock:
                n = len(self._pending)
                payload = "".join(self._pending[:n])
            if n == 0 and not self._dirty:
                if self._broken is not None:
                    raise self._broken
                return
            try:
                fd = self._open()
                if n:
                    if self._needs_header:
                        payload = dumps(header_to_json(self.header)) + "\n" + payload
                    _append(fd, payload.encode("utf-8"))
                    self._dirty = True
                if fsync and self._dirty:
                    os.fsync(fd)
                    self._dirty = False
            except OSError as exc:
                self._paused = True
                self.last_error = StoreError(
                    f"could not write the journal {self.path}: {exc.strerror or exc}",
                    code="JOURNAL_WRITE_FAILED",
                )
                raise self.last_error from exc
            except StoreError as exc:
                self._paused = True
                self.last_error = exc
                raise
            with self._qlock:
                del self._pending[:n]
                self.committed += n
                if n:
                    self._needs_header = False
                self._paused = False
                self.last_error = None
            if self._broken is not None:
                raise self._broken
            if self._pending:
                self._arm_timer_threadsafe()

    def _arm_timer_threadsafe(self) -> None:
        with contextlib.suppress(RuntimeError):
            asyncio.get_running_loop()
            self._arm_timer()

    def close(self) -> None:
        """Stop observing, flush, and release the file. Idempotent. Raises if the final flush fails;
        the events stay queued, so a later ``flush()`` (which reopens the file) may still save them."""
        for dispose in self._dispose:
            dispose()
        self._dispose.clear()
        try:
            self.flush()
        finally:
            with self._iolock:
                self._closed = True
                self._release()

    def _release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def __repr__(self) -> str:
        return f"<JournalWriter {self.path} committed={self.committed} pending={self.pending}>"


def _append(fd: int, data: bytes) -> None:
    """Append all of ``data`` or, on failure, cut the file back to where it was."""
    start = os.fstat(fd).st_size
    view = memoryview(data)
    try:
        while view:
            written = os.write(fd, view)
            view = view[written:]
    except OSError:
        with contextlib.suppress(OSError):
            os.ftruncate(fd, start)
        raise


LOCK_WAIT_S = 2.0
"""How long taking a journal's lock waits for another process that holds it only briefly (an ingest
committing crash repair, or probing whether the writer is gone) before calling the session live."""


def _lock_exclusive(fd: int, path: Path, *, wait_s: float = LOCK_WAIT_S) -> None:
    if _fcntl is None or not stat.S_ISREG(os.fstat(fd).st_mode):
        return  # no flock on this platform, or not a regular file (nothing to protect)
    deadline = time.monotonic() + wait_s
    delay = 0.01
    while True:
        try:
            _fcntl.flock(fd, _fcntl.LOCK_EX | _fcntl.LOCK_NB)
            return
        except BlockingIOError as exc:
            if time.monotonic() >= deadline:
                raise StoreError(
                    f"session journal {path} is open for writing in another process (a live "
                    "kernel); open it read-only, or stop that kernel first",
                    code="SESSION_LIVE",
                ) from exc
            time.sleep(delay)
            delay = min(delay * 2, 0.1)
        except OSError:
            return  # the filesystem has no flock (some network mounts): single writer by convention


def _try_lock(fd: int) -> bool:
    """Take the journal lock if nobody holds it. False when a writer holds it — and also when this
    platform or filesystem cannot tell (no flock): then the writer may be alive, so never repair."""
    if _fcntl is None:
        return False
    try:
        _fcntl.flock(fd, _fcntl.LOCK_EX | _fcntl.LOCK_NB)
    except OSError:  # BlockingIOError: held; anything else: no flock here
        return False
    return True


def writer_gone(path: str | os.PathLike[str]) -> bool:
    """Whether nobody holds ``path``'s journal lock right now (its writer, if any, is gone). Takes the
    lock for an instant; ``False`` when the file is missing or locking cannot tell."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return False
    try:
        return _try_lock(fd)
    finally:
        os.close(fd)


# --- loading -----------------------------------------------------------------------------------------


def _decode(data: bytes, name: str) -> tuple[list[str], bool]:
    """Split journal bytes into lines; the unterminated tail is kept as a last line unless it is not
    even UTF-8 (then it is torn for sure: second result True)."""
    cut = data.rfind(b"\n") + 1
    try:
        text = data[:cut].decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise SessionFormatError(
            f"{name}:{line}: not UTF-8 text: the journal is damaged", code=JOURNAL_DAMAGED
        ) from exc
    lines = text.split("\n")[:-1]
    tail = data[cut:]
    if not tail:
        return lines, False
    try:
        lines.append(tail.decode("utf-8"))
    except UnicodeDecodeError:
        return lines, True
    return lines, False


def read_session(path: str | os.PathLike[str]) -> LoadedSession:
    """Read a journal and repair it in memory only (the file is not touched)."""
    p = Path(path)
    lines, torn_bytes = _decode(p.read_bytes(), str(p))
    del torn_bytes  # already left out of ``lines``
    loaded = read_journal(lines, name=str(p))
    events = repair(loaded.events)
    return LoadedSession(loaded.header, tuple(events), len(events) > len(loaded.events))


def load_session(path: str | os.PathLike[str]) -> LoadedSession:
    """Read a journal, cut a torn tail off the file, and commit crash repair to it (fsynced).

    Raises ``SessionFormatError`` (damage, naming file and line) or ``StoreError(SESSION_LIVE)`` when a
    live writer in another process holds the journal.
    """
    p = Path(path)
    fd = os.open(p, os.O_RDWR)
    try:
        _lock_exclusive(fd, p)
        return _repair_locked(fd, p)
    finally:
        os.close(fd)


def repair_orphan(path: str | os.PathLike[str]) -> bool:
    """Commit crash repair to ``path`` if its writer is gone: take the journal lock without waiting
    and, only if that succeeds, do what ``load_session`` does. Returns True when closers (or a cut
    torn tail) were written. A journal whose lock is held (a live kernel) or cannot be taken on this
    platform is left alone (False). Idempotent: a repaired journal needs nothing more. Raises
    ``SessionFormatError`` for a damaged journal."""
    p = Path(path)
    try:
        fd = os.open(p, os.O_RDWR)
    except FileNotFoundError:
        return False
    try:
        if not _try_lock(fd):
            return False
        return _repair_locked(fd, p, report_cut=True).repaired
    finally:
        os.close(fd)


def repair_orphan_if_open(path: str | os.PathLike[str]) -> bool | None:
    """``repair_orphan``, but a journal is first judged from its end: ``None`` when its writer is
    gone and it ends with a newline, and its last ``turn/start`` or ``turn/end`` event is a
    ``turn/end`` (or it has neither) — then crash repair would append nothing and cut nothing, so
    only the end was read and nothing was written. Otherwise what ``repair_orphan`` returns (or
    raises), having done what it does.

    ``None`` trusts the lines before the end: a journal that is damaged somewhere (a line
    ``read_journal`` refuses) is not found out here, so a caller that reads it on the strength of
    ``None`` must hold each line to ``read_journal``'s rules as it goes and, at the first it cannot
    vouch for, call ``repair_orphan`` — which then raises for the damage, as it would have."""
    p = Path(path)
    try:
        fd = os.open(p, os.O_RDWR)
    except FileNotFoundError:
        return False
    try:
        if not _try_lock(fd):
            return False
        if _ends_closed(fd):
            return None
        return _repair_locked(fd, p, report_cut=True).repaired
    finally:
        os.close(fd)


_TAIL_PIECE = 1 << 16
"""How much of a journal's end one backward read takes (64 KiB)."""

_TAIL_LINE_BYTES = 1 << 20
"""A line at the end longer than this (1 MiB) is not parsed to judge the end: the full read does."""


def _ends_closed(fd: int) -> bool:
    """Whether the journal open as ``fd`` ends with a newline and, reading its event lines backwards,
    a ``turn/end`` comes before any ``turn/start`` (or the header comes first). False — the full read
    decides — for anything else: a torn or unreadable line, a line over ``_TAIL_LINE_BYTES``."""
    end = os.fstat(fd).st_size
    if end == 0 or os.pread(fd, 1, end - 1) != b"\n":
        return False
    carry = b""  # the start of the file's bytes read so far, back to ``pos``
    pos = end - 1  # the final newline is not the start of a line
    while True:
        # the last complete line in ``carry`` is after its last newline; read until there is one
        nl = carry.rfind(b"\n")
        while nl < 0 and pos > 0:
            if len(carry) > _TAIL_LINE_BYTES:
                return False
            take = min(_TAIL_PIECE, pos)
            pos -= take
            carry = os.pread(fd, take, pos) + carry
            nl = carry.rfind(b"\n")
        if nl < 0:  # back at the header: no turn bracket in the journal
            try:
                header_from_json(loads(carry.decode("utf-8")))
            except (ValueError, SessionFormatError, LosslessJsonError, RecursionError):
                return False
            return True
        line, carry = carry[nl + 1 :], carry[:nl]
        if len(line) > _TAIL_LINE_BYTES:
            return False
        try:
            obj = loads(line.decode("utf-8"))
        except (ValueError, LosslessJsonError, RecursionError):
            return False  # a torn last line or damage: the full read says which
        kind = obj.get("type") if isinstance(obj, dict) else None
        if not isinstance(kind, str):
            return False
        if kind == "turn/end":
            return True
        if kind == "turn/start":
            return False


def _repair_locked(fd: int, p: Path, *, report_cut: bool = False) -> LoadedSession:
    with open(fd, "rb", closefd=False) as f:
        data = f.read()
    lines, torn_bytes = _decode(data, str(p))
    loaded = read_journal(lines, name=str(p))
    keep = len(data)
    if torn_bytes:
        keep = data.rfind(b"\n") + 1
    elif loaded.torn_tail:  # the last line, terminated or not
        keep = data.rfind(b"\n", 0, len(data) - 1 if data.endswith(b"\n") else len(data)) + 1
    if keep != len(data):
        _log.warning("%s: dropped a torn last line (%d bytes)", p, len(data) - keep)
        os.ftruncate(fd, keep)
    events = repair(loaded.events)
    added = events[len(loaded.events) :]
    prefix = b"" if keep == 0 or data[keep - 1 : keep] == b"\n" else b"\n"
    if added or prefix:
        payload = prefix + "".join(encode_event(e) + "\n" for e in added).encode("utf-8")
        os.lseek(fd, 0, os.SEEK_END)
        _append(fd, payload)
    changed = bool(added or prefix or keep != len(data))
    if changed:
        os.fsync(fd)
    return LoadedSession(loaded.header, tuple(events), changed if report_cut else bool(added))


# --- wiring --------------------------------------------------------------------------------------------


class _AgentLike(Protocol):
    @property
    def session(self) -> Session: ...
    @property
    def hooks(self) -> AgentHooks: ...


def attach_journal(
    target: Session | _AgentLike,
    store: Store | None = None,
    *,
    window_s: float = DEFAULT_WINDOW_S,
) -> JournalWriter:
    """Journal ``target``'s session into ``store`` (default: ``Store.default()``).

    For an agent, the writer's ``on_checkpoint`` is registered on ``agent.hooks.checkpoint``, so every
    harness checkpoint is a durable flush and a failed flush stops the turn. Returns the writer; call
    ``close()`` on shutdown (``detach`` of the hook happens there too).
    """
    st = store or Store.default()
    session = target if isinstance(target, Session) else target.session
    writer = JournalWriter(st.journal_path(session.header), session.header, window_s=window_s)
    writer.attach(session, checkpoints=None if isinstance(target, Session) else target.hooks)
    return writer
