"""Session-level operations over the store: list, resume, fork, search, export, title.

These are the Python API behind the ``%agent`` subcommands (the kernel only wires them):

* ``list_sessions(store)`` — ``SessionSummary`` rows from the ``sessions`` view, newest first;
* ``resolve_session_id(store, prefix)`` — the full id from the few characters a person types;
* ``resume(store, session_id)`` — ``load_session`` (crash repair committed to the journal) and a live
  ``Session`` seeded with the whole log; attach a journal writer and new turns continue the same file;
* ``fork(header, events, turn)`` — a new ``Session`` whose seed is the prefix up to the end of ``turn``
  (``parentSession`` and ``seedLength`` recorded in its header; its first live write is
  ``session/end-seed``);
* ``search(store, text)`` — case-insensitive literal (or ``regex=True``) search over message text,
  reasoning, tool arguments and tool results (no full-text index exists offline);
* ``export_parquet(store, out_dir)`` — every event as Parquet, partitioned by ``date`` and
  ``session_id`` (Hive layout, readable by DuckDB, Spark, Trino, BigQuery), plus ``sessions.parquet``;
* ``export_markdown(events)`` — a readable transcript (prompts, answers, reasoning folded into
  ``<details>``, tool calls with arguments and results);
* ``title_data(title)`` — the ``session/title`` event data for a user rename.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from dsh_kernel.errors import StoreError, UsageError
from dsh_kernel.ids import new_session_id
from dsh_kernel.jsonvalue import JsonObject, JsonValue
from dsh_kernel.session.events import SessionEvent, SessionHeader
from dsh_kernel.session.log import Clock, Session, wall_clock_ms
from dsh_kernel.store.db import DEFAULT_TIMEOUT_S, open_db
from dsh_kernel.store.ingest import ingest
from dsh_kernel.store.journal import JournalWriter, load_session
from dsh_kernel.store.layout import Store
from dsh_kernel.store.query import QueryResult, run_query

TITLE_MAX = 120


@dataclass(frozen=True, slots=True, kw_only=True)
class SessionSummary:
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
    ids = sorted({p.stem for p in store.iter_journals() if p.stem.startswith(wanted)})
    if not ids:
        raise StoreError(
            f"no session id starts with {wanted!r} in {store.root}", code="SESSION_NOT_FOUND"
        )
    if len(ids) > 1 and wanted not in ids:
        shown = ", ".join(ids[:5]) + (" …" if len(ids) > 5 else "")
        raise StoreError(
            f"{len(ids)} sessions start with {wanted!r} ({shown}); type more of the id",
            code="SESSION_AMBIGUOUS",
        )
    return wanted if wanted in ids else ids[0]


def resume(store: Store, session_id: str, *, clock: Clock | None = None) -> Session:
    """A live session continuing ``session_id``: its journal is loaded (and repaired on disk if the
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
) -> Session:
    """A new session seeded with ``events`` up to and including the ``turn/end`` of ``turn``.

    ``turn=0`` forks before the first turn (only the events before any ``turn/start``). Raises
    ``UsageError`` when the turn does not exist or has not ended.
    """
    if turn < 0:
        raise UsageError(f"fork: turn must be >= 0, got {turn}")
    if turn == 0:
        end = next((i for i, e in enumerate(events) if e.type == "turn/start"), len(events))
    else:
        found = [
            i for i, e in enumerate(events) if e.type == "turn/end" and e.data.get("turn") == turn
        ]
        if not found:
            started = any(e.type == "turn/start" and e.data.get("turn") == turn for e in events)
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
        seed_length=len(prefix),
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


def export_parquet(
    store: Store, out_dir: str | os.PathLike[str], *, timeout_s: float = DEFAULT_TIMEOUT_S
) -> Path:
    """Write ``<out_dir>/events/date=…/session_id=…/*.parquet`` and ``<out_dir>/sessions.parquet``.

    Ingests first; needs the database (``DatabaseBusy`` when it stays locked).
    """
    out = Path(out_dir).absolute()
    out.mkdir(parents=True, exist_ok=True)
    ingest(store, timeout_s=timeout_s)
    events_dir = out / "events"
    with open_db(store, read_only=True, timeout_s=timeout_s) as con:
        con.execute(
            "COPY (SELECT CAST(time AS DATE) AS date, * FROM events) "
            f"TO {_sql_str(str(events_dir))} "
            "(FORMAT parquet, PARTITION_BY (date, session_id), OVERWRITE_OR_IGNORE true)"
        )
        con.execute(
            f"COPY (SELECT * FROM sessions) TO {_sql_str(str(out / 'sessions.parquet'))} (FORMAT parquet)"
        )
    return out


def _sql_str(s: str) -> str:
    return "'" + s.replace("'", "''") + "'"


# --- Markdown transcript --------------------------------------------------------------------------------


def _blocks(message: JsonValue) -> list[JsonObject]:
    if not isinstance(message, dict):
        return []
    content = message.get("content")
    return [b for b in content if isinstance(b, dict)] if isinstance(content, list) else []


def _text_of(blocks: list[JsonObject], kind: str = "text") -> str:
    return "".join(str(b.get("text", "")) for b in blocks if b.get("type") == kind)


def _fence(body: str, lang: str = "") -> str:
    ticks = "```"
    while ticks in body:
        ticks += "`"
    return f"{ticks}{lang}\n{body}\n{ticks}"


def export_markdown(events: Sequence[SessionEvent], header: SessionHeader | None = None) -> str:
    """A readable Markdown transcript of a session log (what a person saw, not the raw stream)."""
    out: list[str] = []
    title = next(
        (str(e.data.get("title")) for e in reversed(events) if e.type == "session/title"), None
    )
    out.append(f"# {title or 'Session ' + (header.id if header else '')}".rstrip())
    if header is not None:
        created = datetime.fromtimestamp(header.created_at / 1000, tz=UTC).strftime(
            "%Y-%m-%d %H:%M UTC"
        )
        meta = [f"session `{header.id}`", f"created {created}"]
        if header.notebook:
            meta.append(f"notebook `{header.notebook}`")
        if header.parent_session:
            meta.append(f"forked from `{header.parent_session}` after {header.seed_length} events")
        out.append(" · ".join(meta))
    calls: dict[str, JsonObject] = {}
    for e in events:
        d = e.data
        match e.type:
            case "turn/start":
                out.append(f"\n## Turn {d.get('turn')}")
            case "user/message":
                text = _text_of(_blocks(d))
                source = d.get("source")
                kind = source.get("kind") if isinstance(source, dict) else None
                if kind == "user":
                    out.append("**User:**\n\n" + text)
                elif text:
                    out.append("<details><summary>Context</summary>\n\n" + text + "\n\n</details>")
            case "assistant/message":
                blocks = _blocks(d.get("message"))
                reasoning = _text_of(blocks, "reasoning")
                if reasoning:
                    out.append(
                        "<details><summary>Reasoning</summary>\n\n" + reasoning + "\n\n</details>"
                    )
                text = _text_of(blocks)
                if text:
                    suffix = " *(interrupted)*" if d.get("interrupted") is True else ""
                    out.append("**Assistant:**" + suffix + "\n\n" + text)
            case "tool/call":
                cid = str(d.get("callId"))
                calls[cid] = d
                out.append(_tool_call_md(d))
            case "tool/result":
                out.append(_tool_result_md(d))
            case "turn/end":
                reason = d.get("reason")
                kind = reason.get("kind") if isinstance(reason, dict) else None
                if kind not in (None, "completed"):
                    out.append(f"*Turn ended: {kind}*")
            case _:
                pass
    return "\n\n".join(out).strip() + "\n"


def _tool_call_md(d: JsonObject) -> str:
    name = str(d.get("name"))
    raw = str(d.get("arguments", ""))
    try:
        args: JsonValue = json.loads(raw) if raw.strip() else {}
    except ValueError:
        args = raw
    if name == "python" and isinstance(args, dict) and isinstance(args.get("code"), str):
        body = _fence(str(args["code"]), "python")
    else:
        body = _fence(
            json.dumps(args, indent=2, ensure_ascii=False) if not isinstance(args, str) else args,
            "json",
        )
    return f"**Tool call `{name}`:**\n\n{body}"


def _tool_result_md(d: JsonObject) -> str:
    blocks = _blocks(d.get("message"))
    none: JsonObject = {}
    result = next((b for b in blocks if b.get("type") == "tool-result"), none)
    inner = result.get("content")
    text = _text_of([b for b in inner if isinstance(b, dict)]) if isinstance(inner, list) else ""
    error = d.get("error")
    label = "Tool error" if result.get("isError") is True else "Tool result"
    if isinstance(error, dict) and error.get("code"):
        label += f" ({error.get('code')})"
    return f"**{label}:**\n\n" + _fence(text)


# --- titles -----------------------------------------------------------------------------------------------


def title_data(title: str, *, source: str = "user") -> JsonObject:
    """``session/title`` data for a rename: whitespace collapsed, capped at ``TITLE_MAX`` characters."""
    clean = " ".join(title.split())
    if not clean:
        raise UsageError("title: empty title")
    if len(clean) > TITLE_MAX:
        clean = clean[: TITLE_MAX - 1].rstrip() + "…"
    return {"title": clean, "source": {"kind": source}}


def set_title(session: Session, title: str) -> SessionEvent:
    """Append a user ``session/title`` to a live session (between turns or during one)."""
    return session.append("session/title", title_data(title))
