"""Session-level operations over the store: list, resume, fork, search, export, title.

These are the Python API behind the ``%agent`` subcommands (the kernel only wires them):

* ``list_sessions(store)`` — ``SessionSummary`` rows from the ``sessions`` view, newest first;
* ``resolve_session_id(store, prefix)`` — the full id from the few characters a person types (every
  function here that takes a stored session's id takes a unique prefix of it too);
* ``latest_notebook_session(store, notebook)`` — the notebook's most recently active session with a
  turn (``%agent resume`` with no id, and the hint after a restart);
* ``earlier_import(store, source, seed_length)`` — the session that already imported a notebook's
  conversation (``kernel.capsules``), if any;
* ``resume(store, session_id)`` — ``load_session`` (crash repair committed to the journal) and a live
  ``Session`` seeded with the whole log; attach a journal writer and new turns continue the same file;
* ``fork(header, events, turn)`` — a new ``Session`` whose seed is the prefix up to the end of ``turn``
  (``parentSession`` and ``seedLength`` recorded in its header; its first live write is
  ``session/end-seed``);
* ``search(store, text)`` — case-insensitive literal (or ``regex=True``) search over message text,
  reasoning, tool arguments and tool results (no full-text index exists offline);
* ``export_parquet(store, out_dir, force=False, since=None)`` — every event as Parquet, partitioned
  by ``date`` and ``session_id`` (Hive layout, readable by DuckDB, Spark, Trino, BigQuery), plus the
  views a report reads (``sessions``, ``turns``, ``tool_calls``, ``errors``, ``usage``, …) as
  ``<view>.parquet`` (``since``: only the sessions active on or after that day);
* ``export_markdown(events)`` — a readable transcript, written by ``transcript.markdown`` from the turn
  reader's reading of each turn (re-exported here);
* ``write_markdown(path, events, header, force=False)`` — the transcript written to ``path``, its
  images as files in ``<stem>_files/`` beside it, linked from the text (``%agent export --md``);
* ``write_export(path, text, force=False)`` — write an export file.

The Parquet export carries images by reference: ``images.parquet`` (the ``images`` view: one row per
image a message carried, by ``hash``) and ``image_data.parquet`` (``hash, media_type, bytes, data``:
the bytes once per hash); the events' ``image/data`` rows hold the hash, not the base64. It carries
``compactions.parquet`` too (the ``compactions`` view: what each compaction replaced, and how),
``notebook_edits.parquet`` (the ``notebook_edits`` view: one row per cell the agent inserted) and
``branches.parquet`` (the ``branches`` view: one row per fork, rewind or policy fork, with its lineage).

Exports never overwrite without ``force``: an existing Markdown file, or a folder that already holds
a Parquet export (``events/`` or ``sessions.parquet``), is refused with ``UsageError(EXPORT_EXISTS)``;
with ``force`` the file is replaced and the export's ``events/`` folder is cleared first. An image
file of a Markdown export already in ``<stem>_files/`` with other bytes is refused the same way (one
with the same bytes is left as it is; ``force`` replaces it); ``<stem>_files`` being a file is
``EXPORT_BAD_PATH``. A path that is
a directory (for a file) or a file (for a folder), a parent folder that does not exist, or one that
cannot be written is ``UsageError(EXPORT_BAD_PATH)``, one line naming the path; parent folders are
never created.
* ``title_data(title)`` — the ``session/title`` event data for a user rename.
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime
from pathlib import Path

import duckdb

from dsh_kernel.errors import StoreError, UsageError
from dsh_kernel.ids import new_session_id
from dsh_kernel.session.events import SessionEvent, SessionHeader
from dsh_kernel.session.log import Clock, Session, wall_clock_ms
from dsh_kernel.session.payloads import SessionTitle, payload_of
from dsh_kernel.store.db import DEFAULT_TIMEOUT_S, open_db
from dsh_kernel.store.ingest.incremental import ingest
from dsh_kernel.store.journal import JournalWriter, load_session
from dsh_kernel.store.layout import Store
from dsh_kernel.store.query.run import QueryResult, run_query
from dsh_kernel.transcript.markdown import export_markdown as export_markdown
from dsh_kernel.transcript.markdown import markdown_transcript

TITLE_MAX = 120
EXPORT_EXISTS = "EXPORT_EXISTS"
EXPORT_BAD_PATH = "EXPORT_BAD_PATH"


@dataclass(frozen=True, slots=True, kw_only=True)
class SessionSummary:
    """One row of ``list_sessions``: a session's id, title, notebook and size."""

    id: str
    title: str | None
    created: datetime
    notebook: str | None
    turns: int
    total_tokens: int
    cost: float | None
    parent_session: str | None


def list_sessions(
    store: Store, *, limit: int = 50, live: Sequence[JournalWriter] = ()
) -> list[SessionSummary]:
    """The most recent sessions (title, created, notebook, turns, tokens, cost)."""
    result = run_query(
        store,
        "SELECT session_id, title, created, notebook, turns, total_tokens, cost, parent_session "
        "FROM sessions ORDER BY created DESC LIMIT ?",
        [limit],
        live=live,
    )
    return _summaries(result)


def _summaries(result: QueryResult) -> list[SessionSummary]:
    out: list[SessionSummary] = []
    for r in result.rows:
        created = r[2]
        assert isinstance(created, datetime)
        out.append(
            SessionSummary(
                id=str(r[0]),
                title=None if r[1] is None else str(r[1]),
                created=created.replace(tzinfo=UTC),
                notebook=None if r[3] is None else str(r[3]),
                turns=int(str(r[4])),
                total_tokens=int(str(r[5])),
                cost=None if r[6] is None else float(str(r[6])),
                parent_session=None if r[7] is None else str(r[7]),
            )
        )
    return out


def resolve_session_id(store: Store, prefix: str) -> str:
    """The full id of the one session whose id starts with ``prefix`` (users type short ids).

    Raises ``StoreError`` ``SESSION_NOT_FOUND`` or ``SESSION_AMBIGUOUS`` (naming the candidates)."""
    wanted = prefix.strip()
    if not wanted or any(c in wanted for c in "/\\*?[]"):
        raise StoreError(f"not a session id: {prefix!r}", code="SESSION_NOT_FOUND")
    return store.resolve_id(wanted)


def latest_notebook_session(
    store: Store,
    notebook: str,
    *,
    exclude: str | None = None,
    live: Sequence[JournalWriter] = (),
) -> SessionSummary | None:
    """The session of ``notebook`` (its path, as the server gave it) active most recently, with at
    least one turn, other than ``exclude``; ``None`` when the store has none."""
    result = run_query(
        store,
        "SELECT session_id, title, created, notebook, turns, total_tokens, cost, parent_session "
        "FROM sessions WHERE notebook = ? AND turns > 0 AND session_id IS DISTINCT FROM ? "
        "ORDER BY last_active DESC NULLS LAST, created DESC LIMIT 1",
        [notebook, exclude],
        live=live,
    )
    return _summaries(result)[0] if result.rows else None


def earlier_import(store: Store, source: str, seed_length: int) -> str | None:
    """The newest session of this store that imported session ``source``'s first
    ``seed_length`` events from a notebook's capsules (``parent_kind = 'import'``), else
    ``None``: opening the same notebook again continues it rather than importing it twice."""
    result = run_query(
        store,
        "SELECT session_id FROM sessions WHERE parent_session = ? AND parent_kind = 'import' "
        "AND seed_length = ? ORDER BY last_active DESC NULLS LAST, created DESC LIMIT 1",
        [source, seed_length],
    )
    return str(result.rows[0][0]) if result.rows else None


def resume(store: Store, session_id: str, *, clock: Clock | None = None) -> Session:
    """A live session continuing ``session_id`` (or the session a unique prefix of it names): its journal is loaded (and repaired on disk if the
    last turn was left open), and the whole log becomes the seed. Attach a ``JournalWriter`` (e.g.
    ``attach_journal``) to keep journaling into the same file."""
    loaded = load_session(store.find_journal(session_id))
    return Session(header=loaded.header, seed=loaded.events, clock=clock)


def fork(
    header: SessionHeader,
    events: Sequence[SessionEvent],
    turn: int,
    *,
    new_id: str | None = None,
    clock: Clock | None = None,
    cwd: str | None = None,
    user: str | None = None,
    ai_policy: str | None = None,
    kind: str = "fork",
) -> Session:
    """A new session seeded with ``events`` up to and including the ``turn/end`` of ``turn``.

    ``kind`` is recorded as the child's ``parent_kind``: ``fork`` (``%agent fork``), ``rewind`` (a
    re-run chat cell: ``kernel.rewind``) or ``policy`` (the course's AI policy changed).

    ``turn=0`` forks before the first turn (only the events before any ``turn/start``). Raises
    ``UsageError`` when the turn does not exist or has not ended. The child's ``user`` and
    ``ai_policy`` are the parent's unless given (the kernel gives the current ones).
    """
    if turn < 0:
        raise UsageError(f"fork: turn must be >= 0, got {turn}")
    if turn == 0:
        end = next((i for i, e in enumerate(events) if e.type == "turn/start"), len(events))
    else:
        found = [
            i
            for i, e in enumerate(events)
            if e.type == "turn/end" and payload_of(e, "turn/end")["turn"] == turn
        ]
        if not found:
            started = any(
                e.type == "turn/start" and payload_of(e, "turn/start")["turn"] == turn
                for e in events
            )
            why = "has not ended" if started else "does not exist"
            raise UsageError(f"fork: turn {turn} of session {header.id} {why}")
        end = found[0] + 1
    prefix = list(events[:end])
    now = (clock or wall_clock_ms)()
    child = SessionHeader(
        id=new_id or new_session_id(),
        created_at=now,
        cwd=cwd if cwd is not None else (header.cwd or os.getcwd()),
        notebook=header.notebook,
        parent_session=header.id,
        parent_kind=kind,
        seed_length=len(prefix),
        user=user if user is not None else header.user,
        ai_policy=ai_policy if ai_policy is not None else header.ai_policy,
    )
    return Session(header=child, seed=prefix, clock=clock)


def search(
    store: Store,
    text: str,
    *,
    limit: int = 50,
    regex: bool = False,
    session_id: str | None = None,
    live: Sequence[JournalWriter] = (),
) -> QueryResult:
    """Matches of ``text`` in messages (text and reasoning) and tool calls (arguments and results),
    newest first: ``session_id, seq, time, kind, snippet``."""
    if not text:
        raise UsageError("search: empty text")
    if regex:
        try:
            re.compile(text)
        except re.error as exc:
            raise UsageError(f"search: invalid regular expression: {exc}") from exc
        match = "regexp_matches({col}, $pat, 'i')"
        pattern = text
    else:
        match = "{col} ILIKE $pat ESCAPE '\\'"
        pattern = "%" + text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
    where_sid = " AND session_id = $sid" if session_id is not None else ""
    sql = f"""
        SELECT session_id, seq, time, kind, left(body, 300) AS snippet FROM (
            SELECT session_id, seq, time, CASE WHEN type = 'tool/result' THEN 'tool result'
                   ELSE role END AS kind, text AS body
            FROM messages WHERE {match.format(col="text")}{where_sid}
            UNION ALL
            SELECT session_id, seq, time, 'reasoning', reasoning
            FROM messages WHERE reasoning IS NOT NULL AND {match.format(col="reasoning")}{where_sid}
            UNION ALL
            SELECT session_id, call_seq, started_at, 'tool call ' || name, arguments
            FROM tool_calls WHERE {match.format(col="arguments")}{where_sid}
        ) ORDER BY time DESC, seq DESC LIMIT $limit
    """
    params: dict[str, object] = {"pat": pattern, "limit": limit}
    if session_id is not None:
        params["sid"] = session_id
    return run_query(store, sql, params, live=live)


EXPORT_VIEWS: tuple[tuple[str, str], ...] = (
    ("sessions", "session_id"),
    ("turns", "session_id, turn"),
    ("tool_calls", "session_id, call_seq"),
    ("errors", "session_id, seq"),
    ("usage", "session_id, request"),
    ("images", "session_id, seq, position"),
    ("compactions", "session_id, start_seq"),
    ("notebook_edits", "session_id, seq, position"),
    ("branches", "session_id"),
)
"""The views a Parquet export writes as ``<view>.parquet`` beside ``events/``, with their row order
(so an export of the same store is the same rows in the same order); ``image_data`` comes after."""

EXPORT_FILES: tuple[str, ...] = (*(view for view, _ in EXPORT_VIEWS), "image_data")
"""Every ``<name>.parquet`` a Parquet export writes beside ``events/``, in the order written (what
the CLI's success line names)."""


def export_parquet(
    store: Store,
    out_dir: str | os.PathLike[str],
    *,
    force: bool = False,
    since: date | None = None,
    timeout_s: float = DEFAULT_TIMEOUT_S,
) -> Path:
    """Write ``<out_dir>/events/date=…/session_id=…/*.parquet`` and one ``<view>.parquet`` per view
    of ``EXPORT_VIEWS`` (``sessions``, ``turns``, ``tool_calls``, ``errors``, ``usage``, ``images``,
    ``compactions``, ``notebook_edits``, ``branches``), plus ``image_data.parquet`` (the images by reference: module docstring).

    ``since`` keeps the sessions active on or after that UTC day (``last_active``), whole. Ingests
    first; needs the database (``DatabaseBusy`` when it stays locked). See the module docstring for
    ``force`` and the path errors.
    """
    out = Path(out_dir).expanduser().absolute()
    events_dir = out / "events"
    files = {view: out / f"{view}.parquet" for view, _ in EXPORT_VIEWS}
    files["image_data"] = out / "image_data.parquet"
    if out.exists() and not out.is_dir():
        raise UsageError(
            f"{out} is a file; the Parquet export writes a folder — give a folder path",
            code=EXPORT_BAD_PATH,
        )
    _check_parent(out)
    held = [p.name for p in (events_dir, *files.values()) if p.exists()]
    if held and not force:
        raise UsageError(
            f"{out} already holds an export ({', '.join(held)}); add --force to replace it, or "
            "give another folder",
            code=EXPORT_EXISTS,
        )
    try:
        out.mkdir(exist_ok=True)
    except OSError as exc:
        raise _path_error(exc, out) from exc
    ingest(store, timeout_s=timeout_s)
    kept = (
        ""
        if since is None
        else " WHERE session_id IN (SELECT session_id FROM sessions WHERE last_active >= "
        f"{_sql_str(since.isoformat())}::DATE)"
    )
    with open_db(store, read_only=True, timeout_s=timeout_s) as con:
        if force and events_dir.is_dir():
            shutil.rmtree(events_dir)  # no partition of the export it replaces may stay behind
        try:
            con.execute(
                f"COPY (SELECT CAST(time AS DATE) AS date, * FROM events{kept} "
                f"ORDER BY session_id, seq) TO {_sql_str(str(events_dir))} "
                "(FORMAT parquet, PARTITION_BY (date, session_id))"
            )
            for view, order in EXPORT_VIEWS:
                con.execute(
                    f"COPY (SELECT * FROM {view}{kept} ORDER BY {order}) "
                    f"TO {_sql_str(str(files[view]))} (FORMAT parquet)"
                )
            used = "" if since is None else f" WHERE hash IN (SELECT hash FROM images{kept})"
            con.execute(
                f"COPY (SELECT * FROM image_data{used} ORDER BY hash) "
                f"TO {_sql_str(str(files['image_data']))} (FORMAT parquet)"
            )
        except duckdb.Error as exc:
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise StoreError(
                f"the Parquet export to {out} failed: {first}", code="EXPORT_FAILED"
            ) from exc
    return out


@dataclass(frozen=True, slots=True, kw_only=True)
class MarkdownExport:
    """Where ``write_markdown`` wrote the transcript, and its images (``None``: it has none)."""

    path: Path
    images_dir: Path | None
    images: int

    def describe(self) -> str:
        """Where it went, in words: the file, and the folder of its images if any."""
        if not self.images:
            return str(self.path)
        files = "1 image" if self.images == 1 else f"{self.images} images"
        return f"{self.path} (its {files} in {self.images_dir})"


def write_markdown(
    path: str | os.PathLike[str],
    events: Sequence[SessionEvent],
    header: SessionHeader | None = None,
    *,
    force: bool = False,
) -> MarkdownExport:
    """Write the Markdown transcript of ``events`` to ``path`` and its images to ``<stem>_files/``
    beside it (created when there is an image to write); see the module docstring for the rules.
    Nothing is written when the transcript itself would be refused."""
    target = Path(path).expanduser().absolute()
    folder = target.with_name(target.stem + "_files")
    transcript = markdown_transcript(events, header, image_dir=folder.name)
    if not transcript.images:
        return MarkdownExport(
            path=write_export(target, transcript.text, force=force), images_dir=None, images=0
        )
    if target.is_dir():
        raise UsageError(
            f"{target} is a directory; give a file name for the export (e.g. {target / 'session.md'})",
            code=EXPORT_BAD_PATH,
        )
    _check_parent(target)
    if target.exists() and not force:
        raise UsageError(
            f"{target} already exists; add --force to replace it, or give another file name",
            code=EXPORT_EXISTS,
        )
    if folder.exists() and not folder.is_dir():
        raise UsageError(
            f"{folder} is a file; the images of {target.name} go to that folder — move it, or "
            "give another file name",
            code=EXPORT_BAD_PATH,
        )
    clash = [
        n
        for n, raw in transcript.images.items()
        if (folder / n).is_file() and (folder / n).read_bytes() != raw
    ]
    if clash and not force:
        raise UsageError(
            f"{folder / clash[0]} already exists with other bytes; add --force to replace it, or "
            "give another file name",
            code=EXPORT_EXISTS,
        )
    try:
        folder.mkdir(exist_ok=True)
        for name, raw in transcript.images.items():
            file = folder / name
            if not file.is_file() or name in clash:  # the same bytes already there stay
                file.write_bytes(raw)
    except OSError as exc:
        raise _path_error(exc, folder) from exc
    written = write_export(target, transcript.text, force=force)
    return MarkdownExport(path=written, images_dir=folder, images=len(transcript.images))


def write_export(path: str | os.PathLike[str], text: str, *, force: bool = False) -> Path:
    """Write ``text`` to the file ``path`` (UTF-8); see the module docstring for the rules."""
    target = Path(path).expanduser().absolute()
    if target.is_dir():
        raise UsageError(
            f"{target} is a directory; give a file name for the export (e.g. {target / 'session.md'})",
            code=EXPORT_BAD_PATH,
        )
    _check_parent(target)
    try:
        f = open(target, "w" if force else "x", encoding="utf-8")  # noqa: SIM115 - closed below
    except FileExistsError as exc:
        raise UsageError(
            f"{target} already exists; add --force to replace it, or give another file name",
            code=EXPORT_EXISTS,
        ) from exc
    except OSError as exc:
        raise _path_error(exc, target) from exc
    try:
        with f:
            f.write(text)
    except OSError as exc:
        if not force:
            target.unlink(missing_ok=True)  # the file is ours: leave no half export behind
        raise _path_error(exc, target) from exc
    return target


def _check_parent(target: Path) -> None:
    parent = target.parent
    if not parent.exists():
        raise UsageError(
            f"the folder {parent} does not exist; create it first, or give another path",
            code=EXPORT_BAD_PATH,
        )
    if not parent.is_dir():
        raise UsageError(f"{parent} is not a folder; give another path", code=EXPORT_BAD_PATH)


def _path_error(exc: OSError, target: Path) -> UsageError:
    match exc:
        case PermissionError():
            why = f"no permission to write {target}"
        case IsADirectoryError():
            why = f"{target} is a directory"
        case _:
            why = f"cannot write {target}: {exc.strerror or exc}"
    return UsageError(why, code=EXPORT_BAD_PATH)


def _sql_str(s: str) -> str:
    return "'" + s.replace("'", "''") + "'"


# --- titles -----------------------------------------------------------------------------------------------


def title_data(title: str, *, source: str = "user") -> SessionTitle:
    """``session/title`` data for a rename: whitespace collapsed, capped at ``TITLE_MAX`` characters."""
    clean = " ".join(title.split())
    if not clean:
        raise UsageError("title: empty title")
    if len(clean) > TITLE_MAX:
        clean = clean[: TITLE_MAX - 1].rstrip() + "…"
    return SessionTitle(title=clean, source={"kind": source})


def set_title(session: Session, title: str) -> SessionEvent:
    """Append a user ``session/title`` to a live session (between turns or during one)."""
    return session.append("session/title", title_data(title))
