"""Store benchmark: ingest rate and canonical query latency, DuckDB store vs simonw/llm-style SQLite.

A generated store of ``--sessions`` sessions (default 1,000) of about ``--events`` events each (default
1,000: ~1,000,000 events) is written as real journals: turns of 1-4 steps, streamed text/reasoning
chunks, usage and finish chunks, tool calls and results (some failing, ``python`` runs with meta, a few
approvals), occasional rate-limited attempts followed by a retry, three models over 30 days.

Measured, in one run:

1. **ingest** — ``ingest(store)`` into an empty (migrated) database: open, plan, load, validate, derive,
   commit, close; events/s (target ≥ 300,000), with the process CPU time beside the wall time (a
   loaded machine inflates wall time) and, as the anchor, the rows/s of a bare ``INSERT … SELECT
   read_json`` of the same files into one table. ``--ingest-runs`` (default 5) pairs alternate the
   two, so both see the same machine: the ratio (target ≥ 0.5×) is the median of the pairs', printed
   with its spread and the load average;
2. **queries** — p50 over ``--reps`` warm runs (after one warm-up) of five canonical questions, each on
   an open read-only connection (targets < 100 ms; text search < 1 s):
   count by session · tool failure rate by tool · tokens and cost by model per day · one session's
   transcript · text search;
3. the same five questions on the same conversations stored the way ``simonw/llm`` logs them in SQLite
   (``conversations``, ``responses`` — one row per model response with prompt, response, tokens —
   ``tool_calls``, ``tool_results``, ``responses_fts`` FTS5 over prompt/response, an index on
   ``responses.conversation_id``), side by side, as a ratio (SQLite time / DuckDB time). llm logs one
   row per response, not every event, so its tables are ~50x smaller than ours; the text search is shown
   both as FTS5 MATCH and as a LIKE scan;
4. ``run_query`` end to end (ingest check + read-only open + query) for the count query;
5. **rebuild** — the same database marked as built by an older projection version, then ``ingest``:
   the open drops the derived tables and views and creates them again, the pass re-reads every
   journal (what an upgrade that bumps ``PROJECTION_VERSION`` costs the first query after it).

Run: ``python benchmarks/store.py [--sessions 1000] [--events 1000] [--reps 21] [--dir PATH]``;
``--quick`` runs every step once on a tiny store (so the benchmark cannot rot unnoticed).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import shutil
import sqlite3
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import duckdb

from dsh_kernel.jsonvalue import JsonObject, JsonValue
from dsh_kernel.session.codec import dumps, encode_event, header_to_json
from dsh_kernel.session.events import SessionEvent, SessionHeader
from dsh_kernel.store.db import open_db
from dsh_kernel.store.ingest.incremental import ingest, set_price
from dsh_kernel.store.layout import Store
from dsh_kernel.store.projection import PROJECTION_VERSION
from dsh_kernel.store.query.run import run_query

MODELS = (
    ("deepseek", "deepseek-chat"),
    ("deepseek", "deepseek-reasoner"),
    ("openai", "gpt-4o-mini"),
)
PRICES = {
    "deepseek-chat": (0.27, 0.07, 1.10),
    "deepseek-reasoner": (0.55, 0.14, 2.19),
    "gpt-4o-mini": (0.15, 0.075, 0.60),
}
TOOLS = {"python": 0.15, "read_file": 0.05, "search": 0.02, "sql": 0.10, "write_file": 0.08}
VOCABULARY = (
    "the data frame shows revenue by region and the plot suggests a seasonal pattern with a peak in "
    "summer while the tool output lists missing values in column price so we should clean them first "
    "then compute the rolling mean and compare against last year before writing the report"
)
WORDS = VOCABULARY.split()
DAY_MS = 86_400_000
START_MS = 1_767_225_600_000  # 2026-01-01T00:00:00Z


# --- data generation -----------------------------------------------------------------------------------


@dataclass
class _Log:
    t: int
    rng: random.Random
    events: list[SessionEvent] = field(default_factory=lambda: [])
    responses: list[dict[str, Any]] = field(default_factory=lambda: [])

    def add(
        self,
        type: str,
        data: JsonObject,
        *,
        dt: int = 3,
        surface: bool = False,
        sources: list[int] | None = None,
    ) -> int:
        self.t += dt
        seq = len(self.events)
        self.events.append(
            SessionEvent(
                type=type,
                seq=seq,
                time=self.t,
                data=data,
                surface_op="append" if surface else None,
                source_event_seqs=tuple(sources) if sources is not None else None,
            )
        )
        return seq

    def words(self, n: int) -> str:
        return " ".join(self.rng.choice(WORDS) for _ in range(n))

    def uid(self) -> str:
        return str(uuid.UUID(int=self.rng.getrandbits(128), version=4))


def _step(log: _Log, turn: int, step: int, last: bool, model: tuple[str, str], prompt: str) -> None:
    provider, name = model
    rng = log.rng
    chunk_seqs: list[int] = []

    def chunk(c: JsonObject, dt: int = 15) -> None:
        chunk_seqs.append(
            log.add("assistant/chunk", {"turn": turn, "step": step, "chunk": c}, dt=dt)
        )

    if rng.random() < 0.05:  # a rate-limited attempt, then a retry in the same step
        failure: JsonObject = {"message": "rate limited", "code": "RATE_LIMIT", "status": 429}
        chunk({"type": "block-start", "index": 0, "blockType": "text"}, dt=400)
        chunk({"type": "text-delta", "index": 0, "text": "Let me"})
        chunk({"type": "finish", "reason": {"kind": "error", "failure": failure}})
        rid = log.uid()
        retry: JsonObject = {
            "retryId": rid,
            "turn": turn,
            "step": step,
            "provider": provider,
            "mode": "normal",
        }
        log.add(
            "llm/retry",
            {**retry, "policyKey": "k", "retry": 1, "delayMs": 1000, "failure": failure},
        )
        log.add(
            "llm/retry-started", {"retryId": rid, "turn": turn, "step": step, "retry": 1}, dt=1000
        )
        chunk_seqs.clear()
    content: list[JsonObject] = []
    index = 0
    if name == "deepseek-reasoner":
        parts = [log.words(rng.randrange(2, 6)) + " " for _ in range(rng.randrange(5, 20))]
        chunk(
            {"type": "block-start", "index": index, "blockType": "reasoning"},
            dt=rng.randrange(200, 1500),
        )
        for p in parts:
            chunk({"type": "reasoning-delta", "index": index, "text": p})
        content.append({"type": "reasoning", "text": "".join(parts)})
        chunk({"type": "block-end", "index": index, "block": content[-1]})
        index += 1
    parts = [log.words(rng.randrange(1, 5)) + " " for _ in range(rng.randrange(15, 60))]
    chunk({"type": "block-start", "index": index, "blockType": "text"}, dt=rng.randrange(200, 1500))
    for p in parts:
        chunk({"type": "text-delta", "index": index, "text": p})
    content.append({"type": "text", "text": "".join(parts)})
    chunk({"type": "block-end", "index": index, "block": content[-1]})
    index += 1
    calls: list[tuple[str, str, str]] = []
    for _ in range(0 if last else rng.choice((1, 1, 1, 2))):
        tool = rng.choice(list(TOOLS))
        cid = "call_" + log.uid().replace("-", "")[:24]
        args = json.dumps(
            {"code": f"df = load('{log.words(1)}.csv')\ndf.describe()"}
            if tool == "python"
            else {"query": log.words(3)}
        )
        block: JsonObject = {"type": "tool-call", "id": cid, "name": tool, "arguments": args}
        chunk({"type": "block-start", "index": index, "blockType": "tool-call"})
        chunk(
            {
                "type": "tool-call-delta",
                "index": index,
                "id": cid,
                "name": tool,
                "argumentsDelta": args,
            }
        )
        chunk({"type": "block-end", "index": index, "block": block})
        content.append(block)
        calls.append((tool, cid, args))
        index += 1
    usage: JsonObject = {
        "inputTokens": rng.randrange(200, 4000),
        "outputTokens": rng.randrange(50, 800),
        "cacheReadTokens": rng.randrange(0, 20_000),
    }
    chunk({"type": "usage", "usage": usage})
    chunk({"type": "finish", "reason": {"kind": "tool-calls" if calls else "stop"}})
    message: JsonObject = {
        "id": log.uid(),
        "role": "assistant",
        "content": [*content],
        "source": {"kind": "model", "provider": provider, "model": name},
    }
    log.add(
        "assistant/message",
        {"turn": turn, "step": step, "message": message, "usage": usage},
        surface=True,
        sources=chunk_seqs,
    )
    results: list[dict[str, Any]] = []
    log.responses.append(
        {
            "time": log.t,
            "model": name,
            "prompt": prompt if step == 1 else "",
            "response": content[-1 - len(calls)]["text"],
            "usage": usage,
            "calls": [list(c) for c in calls],
            "results": results,
        }
    )
    for tool, cid, args in calls:
        if rng.random() < 0.03:
            aid = log.uid()
            log.add("approval/asked", {"id": aid, "toolName": tool, "callId": cid})
            log.add(
                "approval/decided",
                {"id": aid, "outcome": rng.choice(("allowed-once", "rejected"))},
                dt=rng.randrange(500, 9000),
            )
        call_seq = log.add(
            "tool/call",
            {"turn": turn, "step": step, "callId": cid, "name": tool, "arguments": args},
        )
        fails = rng.random() < TOOLS[tool]
        text = ("Error: " + log.words(6)) if fails else log.words(rng.randrange(10, 80))
        duration = rng.randrange(2, 3000)
        block = {
            "type": "tool-result",
            "toolCallId": cid,
            "content": [{"type": "text", "text": text}],
        }
        if fails:
            block["isError"] = True
        data: JsonObject = {
            "turn": turn,
            "step": step,
            "message": {
                "id": log.uid(),
                "role": "user",
                "content": [block],
                "source": {"kind": "tool", "callId": cid},
            },
            "durationMs": duration,
        }
        if fails:
            data["error"] = {"name": "ToolError", "code": "TOOL_FAILED"}
        if tool == "python":
            data["meta"] = {
                "code": json.loads(args)["code"],
                "stdout": log.words(12),
                "stderr": "Traceback" if fails else "",
                "namesChanged": ["df"],
            }
        log.add("tool/result", data, surface=True, sources=[call_seq], dt=duration)
        results.append({"name": tool, "callId": cid, "output": text, "failed": fails})


def generate_session(rng: random.Random, index: int, target: int) -> tuple[SessionHeader, _Log]:
    sid = str(uuid.UUID(int=rng.getrandbits(128), version=4))
    created = START_MS + (index * 37 % 30) * DAY_MS + rng.randrange(DAY_MS // 2)
    header = SessionHeader(
        id=sid, created_at=created, cwd="/home/user/project", notebook=f"nb{index % 40}.ipynb"
    )
    log = _Log(t=created, rng=rng)
    model = MODELS[index % len(MODELS)]
    log.add(
        "session/title",
        {"title": f"Analysis {index}: {log.words(4)}", "source": {"kind": "fallback"}},
    )
    turn = 0
    while len(log.events) < target:
        turn += 1
        log.add("turn/start", {"turn": turn}, dt=rng.randrange(5_000, 60_000))
        steps = rng.choice((1, 2, 2, 3, 4))
        prompt = log.words(rng.randrange(8, 40))
        for step in range(1, steps + 1):
            log.add("step/start", {"turn": turn, "step": step})
            if step == 1:
                msg: JsonObject = {
                    "id": log.uid(),
                    "role": "user",
                    "content": [{"type": "text", "text": prompt}],
                    "source": {"kind": "user"},
                }
                log.add("user/message", msg, surface=True)
            if turn == 1 and step == 1:
                tools: list[JsonValue] = [
                    {"name": t, "description": f"The {t} tool.", "parameters": {"type": "object"}}
                    for t in TOOLS
                ]
                header_data: JsonObject = {
                    "config": {"provider": model[0], "model": model[1]},
                    "system": "You are a data assistant. " + log.words(60),
                    "tools": tools,
                }
                log.add("request/header", {"header": header_data, "reason": "initial"})
                log.add(
                    "request/context",
                    {"provider": model[0], "model": model[1], "contextWindow": 128_000},
                )
            _step(log, turn, step, step == steps, model, prompt)
            log.add("step/end", {"turn": turn, "step": step})
        log.add("turn/end", {"turn": turn, "reason": {"kind": "completed"}})
    return header, log


def generate_store(
    root: Path, sessions: int, events: int, seed: int = 7
) -> tuple[int, list[tuple[str, str, _Log]]]:
    rng = random.Random(seed)
    store = Store.at(root)
    total = 0
    logs: list[tuple[str, str, _Log]] = []
    for i in range(sessions):
        header, log = generate_session(rng, i, events)
        path = store.journal_path(header)
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "w", encoding="utf-8") as f:
            f.write(dumps(header_to_json(header)) + "\n")
            f.writelines(encode_event(e) + "\n" for e in log.events)
        total += len(log.events)
        logs.append((header.id, MODELS[i % len(MODELS)][1], log))
    return total, logs


# --- the llm-style SQLite side ---------------------------------------------------------------------------


def build_sqlite(path: Path, logs: list[tuple[str, str, _Log]]) -> None:
    db = sqlite3.connect(path)
    db.executescript(
        """
        CREATE TABLE conversations (id TEXT PRIMARY KEY, name TEXT, model TEXT);
        CREATE TABLE responses (id TEXT PRIMARY KEY, model TEXT, prompt TEXT, system TEXT, prompt_json TEXT,
            options_json TEXT, response TEXT, response_json TEXT, conversation_id TEXT REFERENCES conversations(id),
            duration_ms INTEGER, datetime_utc TEXT, input_tokens INTEGER, output_tokens INTEGER, token_details TEXT);
        CREATE TABLE tool_calls (id INTEGER PRIMARY KEY, response_id TEXT REFERENCES responses(id), tool_id INTEGER,
            name TEXT, arguments TEXT, tool_call_id TEXT);
        CREATE TABLE tool_results (id INTEGER PRIMARY KEY, response_id TEXT REFERENCES responses(id), tool_id INTEGER,
            name TEXT, output TEXT, tool_call_id TEXT, exception TEXT);
        CREATE TABLE prices (model TEXT PRIMARY KEY, input REAL, cached REAL, output REAL);
        CREATE INDEX responses_conversation ON responses (conversation_id);
        CREATE VIRTUAL TABLE responses_fts USING fts5 (prompt, response, content='responses');
        """
    )
    for sid, model, log in logs:
        db.execute(
            "INSERT INTO conversations VALUES (?, ?, ?)", (sid, log.events[0].data["title"], model)
        )
        for r in log.responses:
            rid = log.uid()
            usage = r["usage"]
            assert isinstance(usage, dict)
            when = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(int(str(r["time"])) / 1000))
            db.execute(
                "INSERT INTO responses VALUES (?, ?, ?, NULL, NULL, NULL, ?, NULL, ?, NULL, ?, ?, ?, ?)",
                (
                    rid,
                    r["model"],
                    r["prompt"],
                    r["response"],
                    sid,
                    when,
                    usage["inputTokens"],
                    usage["outputTokens"],
                    json.dumps({"cached_tokens": usage["cacheReadTokens"]}),
                ),
            )
            for name, cid, args in r["calls"]:
                db.execute(
                    "INSERT INTO tool_calls (response_id, name, arguments, tool_call_id) VALUES (?, ?, ?, ?)",
                    (rid, name, args, cid),
                )
            for res in r["results"]:
                db.execute(
                    "INSERT INTO tool_results (response_id, name, output, tool_call_id, exception) VALUES (?, ?, ?, ?, ?)",
                    (
                        rid,
                        res["name"],
                        res["output"],
                        res["callId"],
                        "ToolError" if res["failed"] else None,
                    ),
                )
    db.executemany("INSERT INTO prices VALUES (?, ?, ?, ?)", [(m, *p) for m, p in PRICES.items()])
    db.execute(
        "INSERT INTO responses_fts (rowid, prompt, response) SELECT rowid, prompt, response FROM responses"
    )
    db.commit()
    db.close()


# --- measuring -------------------------------------------------------------------------------------------


def cpu_s() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def p50(fn: Callable[[], object], reps: int) -> float:
    fn()  # warm-up
    times: list[float] = []
    for _ in range(reps):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def floor(store: Store, total: int) -> float:
    """Rows/s of the simplest possible load of the same journals into one table: the reference."""
    files = (
        "[" + ", ".join("'" + str(p).replace("'", "''") + "'" for p in store.iter_journals()) + "]"
    )
    path = store.root.parent / "floor.duckdb"
    path.unlink(missing_ok=True)
    con = duckdb.connect(str(path))
    con.execute("SET preserve_insertion_order = false")
    con.execute("CREATE TABLE t (type VARCHAR, seq INTEGER, time BIGINT, data JSON)")
    t = time.perf_counter()
    con.execute(
        f"INSERT INTO t SELECT type, seq, time, data FROM read_json({files}, format = 'newline_delimited', "
        "columns = {'type': 'VARCHAR', 'seq': 'INTEGER', 'time': 'BIGINT', 'data': 'JSON'}) WHERE seq IS NOT NULL"
    )
    elapsed = time.perf_counter() - t
    con.close()
    path.unlink(missing_ok=True)
    return total / elapsed


def ingest_once(store: Store, total: int) -> tuple[float, float, float]:
    """``ingest(store)`` into an empty database whose schema exists: wall, CPU, and the pass alone
    (the report's ``elapsed_s``: without the open and the close)."""
    for f in (store.db_path, store.db_path.with_name(store.db_path.name + ".wal")):
        f.unlink(missing_ok=True)
    with open_db(store, read_only=False):
        pass  # the schema exists before the clock starts: measure the load itself
    c0, t0 = cpu_s(), time.perf_counter()
    report = ingest(store, timeout_s=10)
    wall, cpu = time.perf_counter() - t0, cpu_s() - c0
    assert report.events == total and not report.issues, report
    return wall, cpu, report.elapsed_s


def measure_ingest(store: Store, total: int, runs: int) -> None:
    """Step 1: ``runs`` alternating pairs of ``ingest(store)`` and the bare load of the same
    journals, so both see the same machine; the ratio is ingest's rate over the bare rate."""
    load = os.getloadavg()[0]
    ingests: list[tuple[float, float, float]] = []
    floors: list[float] = []
    ratios: list[float] = []
    for _ in range(runs):
        ingests.append(ingest_once(store, total))
        floors.append(floor(store, total))
        ratios.append((total / ingests[-1][0]) / floors[-1])
    wall = statistics.median(w for w, _, _ in ingests)
    cpu = statistics.median(c for _, c, _ in ingests)
    passed = statistics.median(p for _, _, p in ingests)
    bare = statistics.median(floors)
    ratio = statistics.median(ratios)
    print(
        f"\ningest into an empty database, {runs} runs alternating with the bare load "
        f"(load average {load:.2f} before, {os.getloadavg()[0]:.2f} after):\n"
        f"  ingest(store): {total:,} events, median {wall:.2f} s wall ({cpu:.2f} s CPU; the pass "
        f"alone, without open and close, {passed:.2f} s) = {total / wall:,.0f} events/s "
        f"(target >= 300,000)\n"
        f"  bare INSERT … SELECT read_json of the same journals into one table (no validation, no "
        f"derived tables): median {bare:,.0f} rows/s\n"
        f"  ratio ingest / bare: median {ratio:.2f}x of {runs} pairs (spread "
        f"{min(ratios):.2f}-{max(ratios):.2f}x; target >= 0.5x)"
    )


def rebuild(store: Store, total: int, size: int, sessions: int) -> None:
    """Time the rebuild of a database built by an older projection version (step 5)."""
    with open_db(store, read_only=False) as con:
        con.execute("UPDATE _projection SET version = ?", [PROJECTION_VERSION - 1])
    c0, t0 = cpu_s(), time.perf_counter()
    report = ingest(store, timeout_s=10)
    wall, cpu = time.perf_counter() - t0, cpu_s() - c0
    assert report.events == total and not report.issues, report
    with open_db(store, read_only=True) as con:
        priced = con.execute("SELECT count(*) FROM prices").fetchone()
    assert priced is not None and priced[0] == len(PRICES), "the user's prices survive a rebuild"
    print(
        f"\nrebuild of an older projection ({sessions:,} sessions, {total:,} events, "
        f"{size / 1e6:.0f} MB of journals): {wall:.2f} s wall ({cpu:.2f} s CPU) = "
        f"{size / 1e6 / wall:.0f} MB/s, {sessions / wall:,.0f} sessions/s"
    )


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--sessions", type=int, default=1000)
    ap.add_argument("--events", type=int, default=1000, help="events per session (about)")
    ap.add_argument("--reps", type=int, default=21)
    ap.add_argument(
        "--ingest-runs",
        type=int,
        default=5,
        help="alternating pairs of ingest and the bare load (the ratio is their median)",
    )
    ap.add_argument(
        "--dir", type=Path, default=None, help="work directory (kept); default: a temp dir"
    )
    ap.add_argument(
        "--quick",
        action="store_true",
        help="a tiny run that only checks the benchmark still works (make test runs it); its figures mean nothing",
    )
    args = ap.parse_args()
    if args.quick:
        args.sessions, args.events, args.reps, args.ingest_runs = 10, 100, 1, 1
    work = args.dir or Path(tempfile.mkdtemp(prefix="dsh-store-bench-"))
    root = work / "store"
    shutil.rmtree(root, ignore_errors=True)
    print(
        f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores; DuckDB {duckdb.__version__}, SQLite {sqlite3.sqlite_version}"
    )
    t = time.perf_counter()
    total, logs = generate_store(root, args.sessions, args.events)
    size = sum(p.stat().st_size for p in Store.at(root).iter_journals())
    print(
        f"generated {args.sessions} sessions, {total:,} events, {size / 1e6:.0f} MB of journals in {time.perf_counter() - t:.1f} s"
    )

    store = Store.at(root)
    measure_ingest(store, total, args.ingest_runs)
    for model, (inp, cached, out) in PRICES.items():
        provider = "openai" if model.startswith("gpt") else "deepseek"
        set_price(
            store,
            provider=provider,
            model=model,
            input_per_mtok=inp,
            cached_input_per_mtok=cached,
            output_per_mtok=out,
        )
    sqlite_path = work / "llm-logs.db"
    sqlite_path.unlink(missing_ok=True)
    build_sqlite(sqlite_path, logs)
    one = logs[len(logs) // 2][0]

    duck_q = {
        "count by session": ("SELECT session_id, count(*) FROM events GROUP BY session_id", []),
        "tool failure rate by tool": (
            "SELECT name, count(*), avg(is_error::INTEGER) FROM tool_calls GROUP BY name",
            [],
        ),
        "tokens and cost by model per day": (
            "SELECT CAST(time AS DATE) AS day, model, sum(input_tokens), sum(cached_input_tokens), sum(output_tokens), sum(cost) FROM usage GROUP BY ALL",
            [],
        ),
        "one session's transcript": (
            "SELECT seq, role, source, text FROM messages WHERE session_id = ? ORDER BY seq",
            [one],
        ),
        "text search": (
            "SELECT session_id, seq, left(text, 80) FROM messages WHERE text ILIKE '%seasonal pattern with a peak%'",
            [],
        ),
    }
    lite_q = {
        "count by session": (
            "SELECT conversation_id, count(*) FROM responses GROUP BY conversation_id",
            (),
        ),
        "tool failure rate by tool": (
            "SELECT name, count(*), avg(exception IS NOT NULL) FROM tool_results GROUP BY name",
            (),
        ),
        "tokens and cost by model per day": (
            "SELECT substr(datetime_utc, 1, 10) AS day, r.model, sum(input_tokens), sum(json_extract(token_details, '$.cached_tokens')), "
            "sum(output_tokens), sum(input_tokens * p.input / 1e6 + json_extract(token_details, '$.cached_tokens') * p.cached / 1e6 + output_tokens * p.output / 1e6) "
            "FROM responses r LEFT JOIN prices p ON p.model = r.model GROUP BY 1, 2",
            (),
        ),
        "one session's transcript": (
            "SELECT datetime_utc, prompt, response FROM responses WHERE conversation_id = ? ORDER BY datetime_utc",
            (one,),
        ),
        "text search": (
            "SELECT rowid, snippet(responses_fts, -1, '', '', '', 8) FROM responses_fts WHERE responses_fts MATCH '\"seasonal pattern with a peak\"'",
            (),
        ),
        "text search (LIKE scan)": (
            "SELECT id, substr(response, 1, 80) FROM responses WHERE prompt LIKE '%seasonal pattern with a peak%' OR response LIKE '%seasonal pattern with a peak%'",
            (),
        ),
    }
    lite = sqlite3.connect(sqlite_path)
    rows = []
    with open_db(store, read_only=True) as con:
        n_events = con.execute("SELECT count(*) FROM events").fetchone()
        n_resp = lite.execute("SELECT count(*) FROM responses").fetchone()
        print(
            f"\nDuckDB views over {n_events[0] if n_events else 0:,} events; llm-style SQLite with {n_resp[0] if n_resp else 0:,} responses"
        )
        for name, (sql, params) in duck_q.items():
            d = p50(lambda sql=sql, params=params: con.execute(sql, params).fetchall(), args.reps)
            s_sql, s_params = lite_q[name]
            s = p50(
                lambda s_sql=s_sql, s_params=s_params: lite.execute(s_sql, s_params).fetchall(),
                args.reps,
            )
            rows.append((name, d, s))
        like_sql, _ = lite_q["text search (LIKE scan)"]
        rows.append(
            (
                "text search (SQLite LIKE scan)",
                rows[-1][1],
                p50(lambda: lite.execute(like_sql).fetchall(), args.reps),
            )
        )
    lite.close()
    print(
        f"\n{'query (p50 of ' + str(args.reps) + ')':40s} {'DuckDB store':>13s} {'llm SQLite':>11s} {'SQLite/DuckDB':>14s}  target"
    )
    for name, d, s in rows:
        target = "< 1 s" if "search" in name else "< 100 ms"
        ok = d < (1.0 if "search" in name else 0.1)
        print(
            f"{name:40s} {d * 1000:10.1f} ms {s * 1000:8.1f} ms {s / d:13.2f}x  {target} {'ok' if ok else 'MISSED'}"
        )
    e2e = p50(lambda: run_query(store, duck_q["count by session"][0]), args.reps)
    print(
        f"\nrun_query end to end (ingest check + read-only open + count by session): p50 {e2e * 1000:.1f} ms"
    )
    rebuild(store, total, size, args.sessions)
    if args.dir is None:
        shutil.rmtree(work, ignore_errors=True)
    sys.stdout.flush()


if __name__ == "__main__":
    main()
