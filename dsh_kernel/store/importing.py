"""Importing a session journal file into a store, so ``%agent replay``, ``%agent resume`` and ``%%sql``
can use a session recorded elsewhere (a teaching notebook's ``data/`` folder, a student's export).

``import_journal(path, store=None)`` reads the file with the journal rules (``read_journal``: the
header line, then one event per line; a torn last line is tolerated, any other damage raises
``SessionFormatError`` naming the file and line), and copies its bytes to where the store keeps that
session (``Store.journal_path(header)``). It returns the session id.

Importing is idempotent: when the store already holds a journal for that session with the same
committed content, nothing is written. A *different* journal under the same session id is refused
with ``StoreError(SESSION_EXISTS)`` — a store never holds two versions of one session. The copy is
written to a temporary file in the destination directory and renamed into place, so a reader never
sees half a journal. The database is not touched: the next query ingests the new journal.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from dsh_kernel.errors import StoreError
from dsh_kernel.session.journal_io import read_journal
from dsh_kernel.store.layout import Store

SESSION_EXISTS = "SESSION_EXISTS"


def _committed(data: bytes) -> bytes:
    """The bytes up to and including the last newline (a torn final line is not part of the log)."""
    end = data.rfind(b"\n")
    return data[: end + 1] if end >= 0 else b""


def import_journal(path: str | os.PathLike[str], store: Store | None = None) -> str:
    """Copy the journal at ``path`` into ``store`` (default: ``Store.default()``); returns its
    session id. See the module docstring for the rules."""
    source = Path(path)
    target_store = store if store is not None else Store.default()
    try:
        data = source.read_bytes()
    except OSError as exc:
        raise StoreError(
            f"cannot read the journal {source}: {exc.strerror or exc}", code="JOURNAL_UNREADABLE"
        ) from exc
    body = _committed(data)
    loaded = read_journal(body.decode("utf-8"), name=str(source))
    dest = target_store.journal_path(loaded.header)
    if dest.exists():
        if _committed(dest.read_bytes()) == body:
            return loaded.header.id
        raise StoreError(
            f"the store {target_store.root} already holds a different journal for session "
            f"{loaded.header.id} ({dest}); a store keeps one version of a session",
            code=SESSION_EXISTS,
        )
    dest.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".import-", suffix=".tmp", dir=dest.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(body)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, dest)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return loaded.header.id
