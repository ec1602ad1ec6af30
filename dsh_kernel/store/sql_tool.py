"""The agent's read-only ``sql`` tool: the model may look at its own (and every) session's history.

``safe_query(store, sql, ...)`` is the core; ``sql_tool(store, ...)`` wraps it as a ``ToolDefinition``.

Guarantees, each enforced twice where it can be:

* **one read-only statement**: the SQL is split with DuckDB's own parser (``extract_statements``) and
  refused (``SQL_REFUSED``, one line saying why) unless it is exactly one ``SELECT`` (``WITH``,
  ``FROM``-first, ``VALUES``, ``SHOW``, ``DESCRIBE``, ``SUMMARIZE`` parse as ``SELECT``) or an
  ``EXPLAIN [ANALYZE] [(options)]`` of exactly one ``SELECT`` — ``EXPLAIN ANALYZE`` *runs* the statement
  it wraps, so what it wraps passes the same filter (found with DuckDB's tokenizer). Writes, DDL,
  ``ATTACH``, ``DETACH``, ``COPY``, ``EXPORT``, ``IMPORT``, ``INSTALL``, ``LOAD``, ``SET``, ``PRAGMA``,
  ``CALL``, ``CHECKPOINT``, transactions, multi-statement input, more than 100,000 characters of SQL,
  and any statement type DuckDB's Python ``StatementType`` enum cannot name (``UPDATE EXTENSIONS``) are
  all refused. And the connection is opened read-only anyway, with its configuration locked;
* **no file or network access** from the query: the connection runs with
  ``enable_external_access=false`` (``read_csv('/etc/…')`` fails), so only the store's tables and views
  are reachable;
* **bounded**: the query runs in a child process of its own with its own DuckDB instance
  (``dsh_kernel.store.sql_sandbox``: 256 MB DuckDB memory, 512 MB of temp files, one thread, an
  address-space cap, two such processes at a time); the result is at most ``max_rows`` rows (default
  100, never above 1,000) and 256 kB (cells cut to 2,000 characters), within ``timeout_s`` seconds
  (default 5; the query is interrupted, the process killed 10 s later at the latest). ``%%sql`` cells
  do not share these caps: they are the user's own queries, in the kernel's process.

Like ``%%sql``, it ingests pending journal lines first (in the kernel) and falls back to the journals
when the database is busy. Results render as a Markdown table for the model; ``meta`` carries the
columns, row count and timing for the tool card.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Sequence

import duckdb

from dsh_kernel.errors import ToolError
from dsh_kernel.jsonvalue import JsonObject, JsonValue
from dsh_kernel.llm.types import ContentBlock, TextBlock
from dsh_kernel.store.journal import JournalWriter
from dsh_kernel.store.layout import Store
from dsh_kernel.store.query import QueryError, QueryResult, prepare
from dsh_kernel.store.sql_sandbox import DEFAULT_LIMITS, SandboxLimits, json_cell, run_confined
from dsh_kernel.textcap import cap_echo
from dsh_kernel.tools.types import ToolContext, ToolDefinition

DEFAULT_ROWS = 100
MAX_ROWS = 1_000
MAX_SQL_CHARS = 100_000
DEFAULT_TIMEOUT_S = 5.0
_TEXT_BUDGET = 20_000
_READS = "only SELECT, WITH, SHOW, DESCRIBE, SUMMARIZE and EXPLAIN [ANALYZE] of a SELECT"

to_json_cell = json_cell
"""A query cell as JSON (kept under its old name)."""


def _refuse(why: str) -> QueryError:
    return QueryError(f"the sql tool is read-only: {why} ({_READS})", code="SQL_REFUSED")


def _kind(statement: duckdb.Statement) -> duckdb.StatementType | None:
    """The statement's type, or ``None`` for one the Python enum cannot name."""
    try:
        return statement.type
    except ValueError:  # e.g. UPDATE EXTENSIONS: "29 is not a valid StatementType"
        return None


def _tokens(sql: str) -> list[tuple[str, bool]]:
    """DuckDB's tokens of ``sql`` as (text, is-keyword), comments dropped (positions are bytes)."""
    raw = sql.encode()
    found = duckdb.tokenize(sql)
    out: list[tuple[str, bool]] = []
    for i, (pos, kind) in enumerate(found):
        if kind == duckdb.token_type.comment:
            continue
        end = found[i + 1][0] if i + 1 < len(found) else len(raw)
        out.append(
            (raw[pos:end].decode("utf-8", "replace").strip(), kind == duckdb.token_type.keyword)
        )
    return out


def _name(sql: str) -> str:
    """What to call a refused statement: its type, else its leading keywords (``UPDATE EXTENSIONS``)."""
    try:
        statements = duckdb.extract_statements(sql)
    except duckdb.Error:
        statements = []
    kind = _kind(statements[0]) if len(statements) == 1 else None
    if kind is not None:
        return str(kind).rsplit(".", 1)[-1]
    words: list[str] = []
    for text, keyword in _tokens(sql)[:3]:
        if not keyword:
            break
        words.append(text.upper())
    return cap_echo(" ".join(words), 40) or "this"


def _explained(sql: str) -> str | None:
    """What ``EXPLAIN [ANALYZE] [(options)]`` wraps, or ``None`` if that cannot be told."""
    raw = sql.encode()  # token positions are byte offsets
    found = duckdb.tokenize(sql)
    starts = [p for p, kind in found if kind != duckdb.token_type.comment]
    texts = [t.upper() for t, _ in _tokens(sql)]
    if not texts or texts[0] != "EXPLAIN":
        return None
    i = 1
    if i < len(texts) and texts[i] in ("ANALYZE", "ANALYSE"):
        i += 1
    if i >= len(texts):
        return None
    rest = raw[starts[i] :].decode("utf-8", "replace")
    if _single_select(rest) or texts[i] != "(":
        return rest
    depth = 0
    for j in range(i, len(texts)):  # skip the "(FORMAT json, …)" option list
        depth += texts[j].count("(") - texts[j].count(")")
        if depth <= 0:
            return raw[starts[j + 1] :].decode("utf-8", "replace") if j + 1 < len(texts) else None
    return None


def _single_select(sql: str) -> bool:
    try:
        statements = duckdb.extract_statements(sql)
    except duckdb.Error:
        return False
    return len(statements) == 1 and _kind(statements[0]) == duckdb.StatementType.SELECT


def check_read_only(sql: str) -> None:
    """Refuse anything but exactly one read (see the module docstring) with a one-line
    ``QueryError`` (``SQL_REFUSED``; ``SQL_SYNTAX`` for SQL DuckDB cannot parse)."""
    if len(sql) > MAX_SQL_CHARS:
        raise QueryError(
            f"the sql tool takes at most {MAX_SQL_CHARS:,} characters of SQL; got {len(sql):,}",
            code="SQL_REFUSED",
        )
    try:
        statements = duckdb.extract_statements(sql)
    except duckdb.Error as exc:
        raise QueryError(str(exc), code="SQL_SYNTAX") from exc
    if len(statements) != 1:
        raise QueryError(
            f"the sql tool runs exactly one statement; got {len(statements)}", code="SQL_REFUSED"
        )
    kind = _kind(statements[0])
    if kind == duckdb.StatementType.EXPLAIN:
        inner = _explained(sql)
        if inner is None:
            raise _refuse("this EXPLAIN is not allowed: write EXPLAIN [ANALYZE] SELECT …")
        if not _single_select(inner):
            raise _refuse(
                f"EXPLAIN may only wrap a SELECT (EXPLAIN ANALYZE runs what it wraps), and "
                f"{_name(inner)} statements are not allowed"
            )
    elif kind != duckdb.StatementType.SELECT:
        raise _refuse(f"{_name(sql)} statements are not allowed")


def safe_query(
    store: Store,
    sql: str,
    *,
    max_rows: int = DEFAULT_ROWS,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    live: Sequence[JournalWriter] = (),
    limits: SandboxLimits = DEFAULT_LIMITS,
    stop: threading.Event | None = None,
) -> QueryResult:
    """Run one read-only statement under the limits above (``stop``, set from any thread, ends it at
    once). Raises ``QueryError``."""
    check_read_only(sql)
    return run_confined(
        store,
        sql,
        prepared=prepare(store, live),
        max_rows=max(1, min(max_rows, MAX_ROWS)),
        timeout_s=timeout_s,
        lock_timeout_s=1.0,
        limits=limits,
        stop=stop,
    )


def result_json(result: QueryResult) -> JsonObject:
    return {
        "columns": list(result.columns),
        "rows": [[to_json_cell(v) for v in r] for r in result.rows],
        "truncated": result.truncated,
        "elapsedMs": round(result.elapsed_s * 1000, 1),
        "source": result.source,
        "notices": list(result.notices),
    }


def render_markdown(value: JsonValue) -> str:
    """The tool result the model reads: a Markdown table, then the row count and notices."""
    if not isinstance(value, dict):
        return str(value)
    cols = value.get("columns")
    rows = value.get("rows")
    if not isinstance(cols, list) or not isinstance(rows, list):
        return str(value)

    def cell(v: JsonValue) -> str:
        text = "NULL" if v is None else (v if isinstance(v, str) else str(v))
        return text.replace("|", "\\|").replace("\n", " ")[:500]

    lines = ["| " + " | ".join(cell(c) for c in cols) + " |", "|" + "---|" * len(cols)]
    used = sum(len(x) for x in lines)
    shown = 0
    for r in rows:
        line = "| " + " | ".join(cell(v) for v in r) + " |" if isinstance(r, list) else str(r)
        if used + len(line) > _TEXT_BUDGET:
            break
        lines.append(line)
        used += len(line)
        shown += 1
    n = len(rows)
    tail = f"{n} row{'s' if n != 1 else ''}"
    if shown < n:
        tail += f" ({n - shown} not shown: output budget)"
    if value.get("truncated") is True:
        tail += "; more rows exist — narrow the query or aggregate"
    lines.append(tail)
    notices = value.get("notices")
    if isinstance(notices, list):
        lines += [f"note: {x}" for x in notices]
    return "\n".join(lines)


def sql_tool(
    store: Store,
    *,
    live: Callable[[], Sequence[JournalWriter]] | None = None,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    limits: SandboxLimits = DEFAULT_LIMITS,
) -> ToolDefinition:
    """The ``sql`` tool over ``store``; ``live()`` returns the journals to flush first (the current
    session's, so the model sees its own latest events)."""

    async def run(args: JsonObject, ctx: ToolContext) -> JsonValue:
        del ctx
        sql = args.get("sql")
        limit = args.get("max_rows", DEFAULT_ROWS)
        if not isinstance(sql, str) or not sql.strip():
            raise ToolError("sql must be a non-empty SQL string", code="INVALID_ARGS")
        rows = limit if isinstance(limit, int) and not isinstance(limit, bool) else DEFAULT_ROWS
        writers = tuple(live()) if live is not None else ()
        stop = threading.Event()
        try:
            result = await asyncio.to_thread(
                safe_query,
                store,
                sql,
                max_rows=rows,
                timeout_s=timeout_s,
                live=writers,
                limits=limits,
                stop=stop,
            )
        except QueryError as exc:
            raise ToolError(exc.message, code=exc.code) from exc
        finally:
            stop.set()  # a cancelled call kills its query process at once
        return result_json(result)

    def render(args: JsonObject, value: JsonValue) -> tuple[ContentBlock, ...]:
        del args
        return (TextBlock(text=render_markdown(value)),)

    def meta(args: JsonObject, value: JsonValue) -> JsonValue:
        out: JsonObject = {"sql": args.get("sql")}  # at most MAX_SQL_CHARS: longer is refused
        if isinstance(value, dict):
            rows = value.get("rows")
            out.update(
                columns=value.get("columns"),
                rowCount=len(rows) if isinstance(rows, list) else 0,
                truncated=value.get("truncated"),
                elapsedMs=value.get("elapsedMs"),
                source=value.get("source"),
            )
        return out

    return ToolDefinition(
        name="sql",
        description=(
            "Run one read-only SQL query (DuckDB dialect) over the session store: every session's "
            "events and the views sessions, turns, messages, events, tool_calls, requests, usage, "
            "approvals, code_runs, errors. Use it to look up what happened earlier (in this session "
            "or others), what tools failed, what a turn cost. Only SELECT/WITH/SHOW/DESCRIBE/EXPLAIN; "
            f"at most {MAX_ROWS} rows (default {DEFAULT_ROWS}) and {limits.result_bytes // 1000} kB; "
            f"{timeout_s:g} s time limit; {limits.memory_mb} MB of memory."
        ),
        parameters={
            "type": "object",
            "properties": {
                "sql": {"type": "string", "description": "One SELECT statement."},
                "max_rows": {
                    "type": "integer",
                    "description": f"Rows to return (1-{MAX_ROWS}, default {DEFAULT_ROWS}).",
                },
            },
            "required": ["sql"],
            "additionalProperties": False,
        },
        execute=run,
        render=render,
        presentation_meta=meta,
        timeout_ms=int((timeout_s + 10) * 1000),
        read_only=True,
        is_concurrency_safe=lambda _args: True,
    )
