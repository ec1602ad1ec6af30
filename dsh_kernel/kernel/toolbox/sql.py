"""The agent's read-only ``sql`` tool: the model may look at its own (and every) session's history.

``sql_tool(store, ...)`` wraps the store's ``safe_query`` (``store.query.sandbox``) as a
``ToolDefinition``.

Guarantees, each enforced twice where it can be:

* **one read-only statement** (``dsh_kernel.store.query.readonly``): the SQL is split with DuckDB's own parser (``extract_statements``) and
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
  (``dsh_kernel.store.query.sandbox``: 256 MB DuckDB memory, 512 MB of temp files, one thread, an
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

from dsh_kernel.errors import ToolError
from dsh_kernel.jsonvalue import JsonObject, JsonValue
from dsh_kernel.llm.types import ContentBlock, TextBlock
from dsh_kernel.store.journal import JournalWriter
from dsh_kernel.store.layout import Store
from dsh_kernel.store.query.run import QueryError, QueryResult
from dsh_kernel.store.query.sandbox import (
    DEFAULT_LIMITS,
    DEFAULT_ROWS,
    DEFAULT_TIMEOUT_S,
    MAX_ROWS,
    SandboxLimits,
    json_cell,
    safe_query,
)
from dsh_kernel.tools.types import ToolContext, ToolDefinition

_TEXT_BUDGET = 20_000


def result_json(result: QueryResult) -> JsonObject:
    """``result`` as the ``sql`` tool's JSON value: columns, rows, truncation, timing and source."""
    return {
        "columns": list(result.columns),
        "rows": [[json_cell(v) for v in r] for r in result.rows],
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
        lean_description="Read-only DuckDB SELECT over the agent's log (views: turns, messages, tool_calls).",
        lean_when_named=True,
        lean_parameters={
            "type": "object",
            "properties": {"sql": {"type": "string"}},
            "required": ["sql"],
            "additionalProperties": False,
        },
        description=(
            "Run one read-only SQL query (DuckDB dialect) over the session store: every session's "
            "events and the views sessions, turns, messages, events, tool_calls, requests, usage, "
            "compactions, notebook_edits, approvals, code_runs, errors, images, mcp_calls, branches. "
            "Use it to "
            "look up what happened earlier (in this session or others, also what a compaction "
            "summarised: messages keeps "
            "every original turn), what tools failed, what a turn cost. "
            "Only SELECT/WITH/SHOW/DESCRIBE/EXPLAIN; "
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
