"""The ``sql`` tool's query process: one model-written query in a child process with hard limits.

Why a process, and not just DuckDB settings on a connection: ``memory_limit`` bounds DuckDB's buffer
pool (sorts, hash tables, cached blocks), not every allocation. Measured on DuckDB 2.0.1 with
``memory_limit = 256MB``: ``SELECT repeat('x', 1000000) FROM range(1000)`` reached 1 GB of RSS to fetch
its first row, and ``SELECT repeat('x', 1000000000)`` peaked at 3.9 GB. Only the operating system can
bound that, and only for a whole process. So ``run_confined`` runs each query in a fresh
``python -m dsh_kernel.store.query.sandbox`` and the kernel's memory never sees the query.

The child opens **its own DuckDB instance** — read-only, ``enable_external_access = false``, nothing
else of the store open in that process, so these settings are really the instance's (PLATFORM: settings
are per instance, and connections to one path in one process share it) — with ``SandboxLimits``:

* ``memory_limit`` 256 MB, ``threads`` 1 (every thread needs its own buffers and ~70 MB of address
  space), ``temp_directory`` a private directory for this call (next to the store; removed after it)
  with ``max_temp_directory_size`` 512 MB; the configuration is locked before the query runs
  (``lock_configuration``), so not even ``EXPLAIN ANALYZE SET …`` could lift a cap;
* an address-space limit (``RLIMIT_AS``, Linux): what the process has mapped once its DuckDB instance
  is open, plus 1 GiB — set after the connect, so a machine whose DuckDB reserves more address space
  up front is not refused. DuckDB reports an allocation over it as ``Out of Memory``;
* the result: at most ``max_rows`` rows and 256 kB of JSON (the byte cap is a notice on the result),
  every text cell cut to 2,000 characters and every list to 200 items, with a marker; an error
  message cut to 4,000 bytes;
* time: the query is interrupted at ``timeout_s`` (``SQL_TIMEOUT``); a child that has not answered
  ``grace_s`` (10 s) later is killed (and ends itself 5 s after that, should the kernel be gone).
  Cancelling the call (``stop``) kills it at once;
* at most two such processes per kernel at a time (a step may make many ``sql`` calls at once);
* the environment: only what Python needs (``PATH``, ``HOME``, locale, ``TMPDIR``, ``PYTHONPATH``,
  ``VIRTUAL_ENV``) — no API keys reach it.

``%%sql`` cells are the user's own queries: they stay in the kernel process without these caps (they
can join notebook DataFrames, and the Jupyter interrupt stops them). Flushing the live journals and
the ingest pass (``query.prepare``) also stay in the kernel; the child only reads.

Protocol: the parent writes the request as JSON into the call's directory and starts the child with
its path; the child prints one JSON object, ``{"ok": true, "result": {...}}`` or ``{"ok": false,
"code": ..., "message": ...}``, and the parent reads at most ``2 × result_bytes + 64 kB`` of it. A
child killed by a signal (the kernel's memory is never at risk, the child's is) is ``SQL_MEMORY``;
any other answer that is not that JSON is ``SQL_ERROR`` quoting the child's last stderr line.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import decimal
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Final, cast

import duckdb

from dsh_kernel.errors import StoreError
from dsh_kernel.jsonvalue import JsonObject, JsonValue
from dsh_kernel.store.journal import JournalWriter
from dsh_kernel.store.layout import Store
from dsh_kernel.store.query.readonly import check_read_only
from dsh_kernel.store.query.run import (
    Confinement,
    Prepared,
    QueryError,
    QueryResult,
    Row,
    answer,
    prepare,
)
from dsh_kernel.textcap import cap_text

MAX_PARALLEL: Final = 2
ERROR_BYTES: Final = 4_000
_ENV_KEEP: Final = frozenset(
    {"PATH", "HOME", "LANG", "LANGUAGE", "TZ", "TMPDIR", "PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV"}
)
_FETCH_BATCH: Final = 32
_slots = threading.BoundedSemaphore(MAX_PARALLEL)


@dataclass(frozen=True, slots=True, kw_only=True)
class SandboxLimits:
    """The caps of one ``sql`` tool query (see the module docstring)."""

    memory_mb: int = 256
    temp_mb: int = 512
    threads: int = 1
    address_space_mb: int = 1024
    """Beyond what the child has mapped once its DuckDB instance is open."""
    result_bytes: int = 256_000
    cell_chars: int = 2_000
    grace_s: float = 10.0

    def describe(self) -> str:
        return (
            f"{self.memory_mb} MB for DuckDB, {self.temp_mb} MB of temp files, "
            f"{self.address_space_mb} MB more for the query process in all"
        )


DEFAULT_LIMITS: Final = SandboxLimits()


# --- the parent --------------------------------------------------------------------------------------


DEFAULT_ROWS = 100
MAX_ROWS = 1_000
DEFAULT_TIMEOUT_S = 5.0


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
    """Run one read-only statement (``check_read_only``) confined as ``run_confined`` is, at most
    ``max_rows`` rows (never above ``MAX_ROWS``); ``stop``, set from any thread, ends it at once.
    Raises ``QueryError``."""
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


def run_confined(
    store: Store,
    sql: str,
    *,
    prepared: Prepared,
    max_rows: int,
    timeout_s: float,
    lock_timeout_s: float,
    limits: SandboxLimits = DEFAULT_LIMITS,
    stop: threading.Event | None = None,
) -> QueryResult:
    """Answer ``sql`` (already checked read-only) in a child process. Raises ``QueryError``."""
    while not _slots.acquire(timeout=0.05):
        if stop is not None and stop.is_set():
            raise QueryError("the query was cancelled before it started", code="SQL_INTERRUPTED")
    try:
        parent = store.root if os.access(store.root, os.W_OK) else None
        with tempfile.TemporaryDirectory(prefix=".sql-tool-", dir=parent) as tmp:
            work = Path(tmp)
            request: JsonObject = {
                "root": str(store.root),
                "sql": sql,
                "maxRows": max_rows,
                "timeoutS": timeout_s,
                "lockTimeoutS": lock_timeout_s,
                "notices": list(prepared.notices),
                "stale": prepared.stale,
                "tempDir": str(work / "duckdb-temp"),
                "limits": cast("JsonObject", asdict(limits)),
            }
            (work / "request.json").write_text(json.dumps(request), encoding="utf-8")
            code = _run_child(work, timeout_s + limits.grace_s, timeout_s, stop)
            return _read_answer(work, code, limits)
    finally:
        _slots.release()


def child_env() -> dict[str, str]:
    """The environment of the query process: what Python needs, no keys."""
    return {k: v for k, v in os.environ.items() if k in _ENV_KEEP or k.startswith("LC_")}


def _run_child(work: Path, limit_s: float, timeout_s: float, stop: threading.Event | None) -> int:
    argv = [sys.executable, "-m", "dsh_kernel.store.query.sandbox", str(work / "request.json")]
    deadline = time.monotonic() + limit_s
    with open(work / "out", "wb") as out, open(work / "err", "wb") as err:
        proc = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=err,
            cwd=work,
            env=child_env(),
            start_new_session=True,  # the kernel's SIGINT is for the kernel; we stop the child
        )
        try:
            while True:
                with contextlib.suppress(subprocess.TimeoutExpired):
                    return proc.wait(timeout=0.05)
                if stop is not None and stop.is_set():
                    raise QueryError("the query was interrupted", code="SQL_INTERRUPTED")
                if time.monotonic() > deadline:
                    raise QueryError(
                        f"the query ran longer than {timeout_s:g} s and was stopped",
                        code="SQL_TIMEOUT",
                    )
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()


def _read_answer(work: Path, returncode: int, limits: SandboxLimits) -> QueryResult:
    with open(work / "out", "rb") as f:
        raw = f.read(2 * limits.result_bytes + 65_536 + 1)
    if len(raw) > 2 * limits.result_bytes + 65_536:
        raise QueryError("the sql tool's query process answered too much", code="SQL_ERROR")
    try:
        reply = json.loads(raw)
    except ValueError:
        reply = None
    if not isinstance(reply, dict):
        if returncode < 0:
            name = signal.Signals(-returncode).name if -returncode in signal.valid_signals() else ""
            raise QueryError(
                f"the sql tool's query process was killed by {name or f'signal {-returncode}'} "
                f"(usually: it ran out of memory; the limits are {limits.describe()}); select "
                "fewer or shorter columns, filter, or aggregate",
                code="SQL_MEMORY",
            )
        lines = (work / "err").read_bytes()[-2_000:].decode("utf-8", "replace").strip()
        last = lines.splitlines()[-1] if lines else f"exit status {returncode}"
        raise QueryError(f"the sql tool's query process failed: {last}", code="SQL_ERROR")
    reply = cast("JsonObject", reply)
    if reply.get("ok") is not True:
        message = cap_text(str(reply.get("message")), ERROR_BYTES)
        raise QueryError(message, code=str(reply.get("code") or "SQL_ERROR"))
    return _result_from_json(cast("JsonObject", reply["result"]))


def _result_from_json(obj: JsonObject) -> QueryResult:
    rows = cast("list[list[JsonValue]]", obj["rows"])
    return QueryResult(
        columns=tuple(str(c) for c in cast("list[str]", obj["columns"])),
        types=tuple(str(t) for t in cast("list[str]", obj["types"])),
        rows=tuple(tuple(r) for r in rows),
        truncated=obj["truncated"] is True,
        elapsed_s=float(cast("float", obj["elapsedS"])),
        source="journals" if obj["source"] == "journals" else "database",
        notices=tuple(str(n) for n in cast("list[str]", obj["notices"])),
    )


def _result_to_json(result: QueryResult) -> JsonObject:
    return {
        "columns": list(result.columns),
        "types": list(result.types),
        "rows": [list(cast("Sequence[JsonValue]", r)) for r in result.rows],
        "truncated": result.truncated,
        "elapsedS": result.elapsed_s,
        "source": result.source,
        "notices": list(result.notices),
    }


# --- cells -------------------------------------------------------------------------------------------


def json_cell(value: object, max_chars: int | None = None) -> JsonValue:
    """A query cell as JSON (timestamps as ISO text, decimals as numbers, anything else as text);
    with ``max_chars``, text is cut to that many characters and lists to a tenth as many items."""
    if value is None or isinstance(value, bool | int):
        return value
    if isinstance(value, str):
        if max_chars is not None and len(value) > max_chars:
            return f"{value[:max_chars]}… [{len(value) - max_chars} characters cut]"
        return value
    if isinstance(value, float):
        return value if value == value and abs(value) != float("inf") else str(value)
    if isinstance(value, decimal.Decimal):
        return float(value)
    if isinstance(value, _dt.datetime | _dt.date | _dt.time):
        return value.isoformat()
    if isinstance(value, uuid.UUID):
        return str(value)
    if isinstance(value, list | tuple):
        items = cast("Sequence[object]", value)
        keep = len(items) if max_chars is None else min(len(items), max(max_chars // 10, 1))
        out: list[JsonValue] = [json_cell(v, max_chars) for v in items[:keep]]
        if keep < len(items):
            out.append(f"… [{len(items) - keep} more items]")
        return out
    if isinstance(value, dict):
        pairs = list(cast("dict[object, object]", value).items())
        keep = len(pairs) if max_chars is None else min(len(pairs), max(max_chars // 10, 1))
        return {str(k): json_cell(v, max_chars) for k, v in pairs[:keep]}
    return json_cell(str(value), max_chars)


def _fetch_capped(
    max_bytes: int, shrink: Callable[[Row], Row]
) -> Callable[[duckdb.DuckDBPyConnection, int, list[str]], tuple[list[Row], bool]]:
    def fetch(
        cur: duckdb.DuckDBPyConnection, max_rows: int, notices: list[str]
    ) -> tuple[list[Row], bool]:
        rows: list[Row] = []
        used = 0
        while True:
            batch = cur.fetchmany(min(_FETCH_BATCH, max_rows + 1 - len(rows)))
            if not batch:
                return rows, False
            for raw in batch:
                if len(rows) == max_rows:
                    return rows, True
                row = shrink(tuple(raw))
                used += len(json.dumps(row, ensure_ascii=False).encode("utf-8", "replace"))
                if used > max_bytes:
                    n = len(rows)
                    notices.append(
                        f"the result was cut at the sql tool's {max_bytes:,}-byte cap after {n} "
                        f"row{'s' if n != 1 else ''}; select fewer or shorter columns, or aggregate"
                    )
                    return rows, True
                rows.append(row)

    return fetch


# --- the child ---------------------------------------------------------------------------------------


def _bound_address_space(extra_mb: int) -> Callable[[duckdb.DuckDBPyConnection], None]:
    done = False

    def bound(con: duckdb.DuckDBPyConnection) -> None:
        del con
        nonlocal done
        if done:
            return
        done = True
        try:
            import resource

            status = Path("/proc/self/status").read_text()
        except (ImportError, OSError):
            return  # not Linux: DuckDB's own memory_limit is the only cap
        mapped = int(status.split("VmSize:")[1].split()[0]) * 1024
        limit = mapped + extra_mb * 1024 * 1024
        _soft, hard = resource.getrlimit(resource.RLIMIT_AS)
        if hard != resource.RLIM_INFINITY:
            limit = min(limit, hard)
        resource.setrlimit(resource.RLIMIT_AS, (limit, hard))

    return bound


def _child_query(request: JsonObject) -> QueryResult:
    sql = str(request["sql"])
    check_read_only(sql)  # the parent checked; a second look costs nothing
    given = cast("dict[str, int | float]", request["limits"])
    limits = SandboxLimits(
        memory_mb=int(given["memory_mb"]),
        temp_mb=int(given["temp_mb"]),
        threads=int(given["threads"]),
        address_space_mb=int(given["address_space_mb"]),
        result_bytes=int(given["result_bytes"]),
        cell_chars=int(given["cell_chars"]),
        grace_s=float(given["grace_s"]),
    )
    settings: dict[str, str | int] = {
        "memory_limit": f"{limits.memory_mb}MB",
        "threads": limits.threads,
        "temp_directory": str(request["tempDir"]),
        "max_temp_directory_size": f"{limits.temp_mb}MB",
    }
    confined = Confinement(
        settings=settings,
        on_connect=_bound_address_space(limits.address_space_mb),
        fetch=_fetch_capped(
            limits.result_bytes,
            lambda row: tuple(json_cell(v, limits.cell_chars) for v in row),
        ),
    )
    notices = cast("list[str]", request["notices"])
    try:
        return answer(
            Store.at(str(request["root"])),
            sql,
            prepared=Prepared(notices=tuple(notices), stale=request["stale"] is True),
            max_rows=int(cast("int", request["maxRows"])),
            timeout_s=float(cast("float", request["timeoutS"])),
            lock_timeout_s=float(cast("float", request["lockTimeoutS"])),
            external_access=False,
            confined=confined,
        )
    except QueryError as exc:
        if exc.code != "SQL_MEMORY":
            raise
        first = exc.message.strip().splitlines()[0] if exc.message.strip() else ""
        raise QueryError(_memory_text(limits, first[:200]), code="SQL_MEMORY") from exc
    except MemoryError as exc:
        raise QueryError(_memory_text(limits, "MemoryError"), code="SQL_MEMORY") from exc


def _memory_text(limits: SandboxLimits, detail: str) -> str:
    return (
        f"the query needs more memory than the sql tool allows ({limits.describe()}): select fewer "
        f"or shorter columns, filter, or aggregate ({detail})"
    )


def main(argv: Sequence[str] | None = None) -> int:
    """The child: answer the request file named by ``argv[0]`` on stdout (see the docstring)."""
    args = list(sys.argv[1:] if argv is None else argv)
    request = cast("JsonObject", json.loads(Path(args[0]).read_text(encoding="utf-8")))
    limits = cast("dict[str, float]", request["limits"])
    # The parent kills us at this point; if the parent is gone, nobody would: end ourselves.
    lifetime = float(cast("float", request["timeoutS"])) + float(limits["grace_s"]) + 5
    watchdog = threading.Timer(lifetime, os._exit, args=(3,))
    watchdog.daemon = True
    watchdog.start()
    reply: JsonObject
    try:
        reply = {"ok": True, "result": _result_to_json(_child_query(request))}
    except StoreError as exc:  # QueryError included
        reply = {"ok": False, "code": exc.code, "message": cap_text(exc.message, ERROR_BYTES)}
    except MemoryError:
        reply = {"ok": False, "code": "SQL_MEMORY", "message": "the query ran out of memory"}
    except Exception as exc:
        text = cap_text(f"{type(exc).__name__}: {exc}", ERROR_BYTES)
        reply = {"ok": False, "code": "SQL_ERROR", "message": text}
    sys.stdout.buffer.write(json.dumps(reply, ensure_ascii=False).encode("utf-8", "replace"))
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
