"""Where the store lives on disk, and how a session's journal is named.

The store is one directory (``store_dir()``: ``$DSH_STORE`` if set, else ``$XDG_DATA_HOME/dsh-kernel``,
else ``~/.local/share/dsh-kernel``)::

    <store>/
      sessions.duckdb                          the shared database (typed tables + views)
      journals/<yyyy-mm-dd>/<session-id>.jsonl one append-only journal per session

The date directory is the session's *creation* date in UTC (``SessionHeader.created_at``), so a journal's
path follows from its header alone and never moves; a session resumed days later keeps appending to the
same file. Session ids are UUIDs; an id that could escape its directory is refused. Wherever an id is
taken (``find_journal``, ``resolve_id``) a unique prefix of it is enough; a prefix two sessions share is
``StoreError(SESSION_AMBIGUOUS)``.

``Store`` is a plain value (paths only): nothing here opens the database. ``Store.open(path)`` is
where a store to write to comes from: it resolves the path (``""``: ``store_dir()``), creates the
directories and proves a file can be written there, once — the kernel calls it at start and says
clearly, once, when the store cannot be written (chat then runs in memory only).
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from dsh_kernel.errors import StoreError
from dsh_kernel.session.events import SessionHeader

DB_NAME = "sessions.duckdb"
JOURNALS = "journals"
JOURNAL_SUFFIX = ".jsonl"

_SAFE_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")


def store_dir() -> Path:
    """The store directory: ``$DSH_STORE``, else the per-user data directory (XDG)."""
    explicit = os.environ.get("DSH_STORE", "").strip()
    if explicit:
        return Path(explicit).expanduser()
    xdg = os.environ.get("XDG_DATA_HOME", "").strip()
    base = Path(xdg).expanduser() if xdg else Path.home() / ".local" / "share"
    return base / "dsh-kernel"


def check_session_id(session_id: str) -> str:
    """``session_id`` when it can name a journal file, else ``StoreError`` ``BAD_SESSION_ID``."""
    if not _SAFE_ID.match(session_id) or session_id in (".", ".."):
        raise StoreError(
            f"session id {session_id!r} cannot name a journal file (use letters, digits, '.', '_' "
            "or '-')",
            code="BAD_SESSION_ID",
        )
    return session_id


def journal_date(created_at_ms: int) -> str:
    """The UTC ``YYYY-MM-DD`` directory of a journal created at ``created_at_ms``."""
    return datetime.fromtimestamp(created_at_ms / 1000, tz=UTC).strftime("%Y-%m-%d")


@dataclass(frozen=True, slots=True, kw_only=True)
class Store:
    """A store directory. Construct with ``Store.at(path)`` or ``Store.default()``."""

    root: Path

    @staticmethod
    def at(path: str | os.PathLike[str]) -> Store:
        return Store(root=Path(path).expanduser().absolute())

    @staticmethod
    def default() -> Store:
        return Store.at(store_dir())

    @property
    def db_path(self) -> Path:
        return self.root / DB_NAME

    @property
    def journals_dir(self) -> Path:
        return self.root / JOURNALS

    def journal_path(self, header: SessionHeader) -> Path:
        """Where ``header``'s session journal lives (whether or not it exists yet)."""
        sid = check_session_id(header.id)
        return self.journals_dir / journal_date(header.created_at) / f"{sid}{JOURNAL_SUFFIX}"

    def relative(self, path: Path) -> str:
        """``path`` relative to the store root, with ``/`` separators (the key the database uses)."""
        return path.relative_to(self.root).as_posix()

    def find_journal(self, session_id: str) -> Path:
        """The journal of ``session_id``, which may be a unique prefix of the id (people type the
        8 characters a footer shows). ``StoreError`` ``SESSION_NOT_FOUND`` if no id starts with it,
        ``SESSION_AMBIGUOUS`` (naming the candidates) if several do and none is exactly it."""
        sid = check_session_id(session_id)
        matches: dict[str, Path] = {}
        if self.journals_dir.is_dir():
            for path in sorted(self.journals_dir.glob(f"*/{sid}*{JOURNAL_SUFFIX}")):
                matches.setdefault(path.name.removesuffix(JOURNAL_SUFFIX), path)
        if sid in matches:
            return matches[sid]
        if len(matches) == 1:
            return next(iter(matches.values()))
        if not matches:
            raise StoreError(
                f"no session id starts with {session_id!r} in {self.journals_dir}",
                code="SESSION_NOT_FOUND",
            )
        ids = sorted(matches)
        shown = ", ".join(ids[:5]) + (" …" if len(ids) > 5 else "")
        raise StoreError(
            f"{len(ids)} sessions start with {session_id!r} ({shown}); type more of the id",
            code="SESSION_AMBIGUOUS",
        )

    def resolve_id(self, session_id: str) -> str:
        """The full id of the one stored session ``session_id`` names (a unique prefix or the
        whole id); raises as ``find_journal`` does."""
        return self.find_journal(session_id).name.removesuffix(JOURNAL_SUFFIX)

    def iter_journals(self) -> Iterator[Path]:
        """Every journal file, oldest date directory first."""
        if not self.journals_dir.is_dir():
            return
        for day in sorted(self.journals_dir.iterdir()):
            if not day.is_dir():
                continue
            for entry in sorted(day.iterdir()):
                if entry.suffix == JOURNAL_SUFFIX and entry.is_file():
                    yield entry

    @staticmethod
    def open(path: str | os.PathLike[str] = "") -> Store:
        """The store at ``path`` (``""``: ``Store.default()``), its directories created and a file
        written there to prove it can be.

        Raises ``StoreError(STORE_NOT_WRITABLE)`` naming the directory and the OS error.
        """
        store = Store.at(path) if str(path).strip() else Store.default()
        probe = store.journals_dir / f".probe-{os.getpid()}"
        try:
            store.journals_dir.mkdir(parents=True, exist_ok=True)
            probe.write_bytes(b"")
            probe.unlink()
        except OSError as exc:
            raise StoreError(
                f"the session store {store.root} is not writable ({exc.strerror or exc}); set "
                "DSH_STORE to a writable directory — sessions are kept in memory only until then",
                code="STORE_NOT_WRITABLE",
            ) from exc
        return store
