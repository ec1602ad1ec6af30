"""Importing a session journal file into a store, so ``%agent replay``, ``%agent resume`` and ``%%sql``
can use a session recorded elsewhere (a teaching notebook's ``data/`` folder, a student's export).

``import_journal(path, store=None)`` returns the session id, or raises ``StoreError`` with a stable
code and a one-line message naming the file (and the line, where one is at fault). Nothing reaches the
store unless all of this holds:

* the file can be read (``JOURNAL_UNREADABLE``) and every line is UTF-8 (``JOURNAL_NOT_UTF8``);
* it reads with the journal rules (``read_journal``): the header first, then one event per line, seqs
  without gap or repeat (``JOURNAL_DAMAGED``), envelopes of the right shape (``JOURNAL_BAD_SHAPE``),
  times and ``createdAt`` between 1970 and the end of 9999 (``JOURNAL_OUT_OF_RANGE``), nothing nested too
  deeply to read (``JOURNAL_TOO_DEEP``), no unknown event type that is not ignorable;
* every event is one ``Session`` would have appended and its readers can decode, and together they
  form a valid log (``check_journal``: ``JOURNAL_BAD_SHAPE``, ``JOURNAL_TOO_DEEP``, ``JOURNAL_INVALID``);
* the session id can name a file (``BAD_SESSION_ID``) and is new to the store (``SESSION_EXISTS``): a
  store keeps one journal per session, whatever its date folder, so a journal reusing the id of a
  stored session cannot shadow it. Importing a file whose content equals the stored journal is a no-op
  that returns the id (importing is idempotent).

A torn last line (invalid JSON, no newline: a crash mid-write) is left out; a complete last event
without its newline is kept and written with one. The copy is written to a temporary file in the
destination directory and linked into place — never over an existing file — so a reader never sees
half a journal. The database is not touched: the next query ingests the new journal.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from datetime import UTC, datetime
from pathlib import Path

from dsh_kernel.errors import SessionFormatError, StoreError
from dsh_kernel.session.check.journal import check_journal
from dsh_kernel.session.events import SessionHeader
from dsh_kernel.session.journal_io import LoadedJournal, read_journal, split_journal_bytes
from dsh_kernel.store.layout import JOURNAL_SUFFIX, Store, check_session_id

SESSION_EXISTS = "SESSION_EXISTS"
JOURNAL_UNREADABLE = "JOURNAL_UNREADABLE"


def _committed(data: bytes) -> bytes:
    """The bytes up to and including the last newline (a torn final line is not part of the log)."""
    end = data.rfind(b"\n")
    return data[: end + 1] if end >= 0 else b""


def _read(source: Path) -> bytes:
    try:
        return source.read_bytes()
    except IsADirectoryError as exc:
        raise StoreError(
            f"cannot import {source}: it is a directory; give the path of a .jsonl journal file",
            code=JOURNAL_UNREADABLE,
        ) from exc
    except OSError as exc:
        raise StoreError(
            f"cannot read the journal {source}: {exc.strerror or exc}", code=JOURNAL_UNREADABLE
        ) from exc


def _validated(data: bytes, name: str) -> tuple[LoadedJournal, bytes]:
    """The journal read and checked, and the exact bytes the store will hold."""
    try:
        split = split_journal_bytes(data, name=name)
        loaded = read_journal(split.lines, name=name)
        check_journal(loaded, name=name)
    except SessionFormatError as exc:
        raise StoreError(exc.message, code=exc.code) from exc
    except RecursionError as exc:  # every reader above guards its own; this is the last line
        raise StoreError(f"{name}: nested too deeply to read", code="JOURNAL_TOO_DEEP") from exc
    body = data[: split.committed]
    if split.tail_kept and not loaded.torn_tail:
        body += data[split.committed :] + b"\n"  # a whole last event that only lacked its newline
    return loaded, body


def _created(header: SessionHeader) -> str:
    return datetime.fromtimestamp(header.created_at / 1000, tz=UTC).strftime("%Y-%m-%d %H:%M UTC")


def _existing(store: Store, session_id: str) -> list[Path]:
    if not store.journals_dir.is_dir():
        return []
    return sorted(store.journals_dir.glob(f"*/{session_id}{JOURNAL_SUFFIX}"))


def _refuse_existing(store: Store, header: SessionHeader, source: Path, found: Path) -> StoreError:
    return StoreError(
        f"cannot import {source}: the store {store.root} already holds session {header.id} "
        f"({found}); this journal (created {_created(header)}) differs from it, and a store keeps "
        "one journal per session — import it into another store (DSH_STORE) instead",
        code=SESSION_EXISTS,
    )


def import_journal(path: str | os.PathLike[str], store: Store | None = None) -> str:
    """Copy the journal at ``path`` into ``store`` (default: ``Store.default()``); returns its
    session id. See the module docstring for the rules."""
    source = Path(path)
    target_store = store if store is not None else Store.default()
    loaded, body = _validated(_read(source), str(source))
    header = loaded.header
    check_session_id(header.id)
    dest = target_store.journal_path(header)
    for found in _existing(target_store, header.id):
        if found == dest and _committed(found.read_bytes()) == body:
            return header.id
        raise _refuse_existing(target_store, header, source, found)
    try:
        _write_new(dest, body)
    except FileExistsError:  # another import won the race: fine if it is this very journal
        if _committed(dest.read_bytes()) != body:
            raise _refuse_existing(target_store, header, source, dest) from None
    except OSError as exc:
        raise StoreError(
            f"cannot import {source} into {target_store.root}: {exc.strerror or exc}",
            code="STORE_NOT_WRITABLE",
        ) from exc
    return header.id


def _write_new(dest: Path, body: bytes) -> None:
    """Write ``body`` to a new file ``dest`` whole or not at all; ``FileExistsError`` if it exists."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".import-", suffix=".tmp", dir=dest.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(body)
            f.flush()
            os.fsync(f.fileno())
        try:
            os.link(tmp, dest)  # never replaces an existing file
        except FileExistsError:
            raise
        except OSError:  # a filesystem without hard links
            if dest.exists():
                raise FileExistsError(dest) from None
            os.replace(tmp, dest)
    finally:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
