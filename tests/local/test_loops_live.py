"""A small model's loops and silences against a real llama-cpp-python server (``make test-local``).

Qwen2.5-Coder-0.5B at temperature 0 with a pinned seed, asked outright to keep calling one tool and
to end its turn with nothing after a tool's result. What is asserted is what the kernel makes of
whatever the model did, from the server's own access log, the session log and the SQL views —
never the model's judgement:

* a model that makes the same call with the same result twice in a row never has a third run (the
  notebook namespace counts the runs), is told so in that call's result, and if it asks again the
  turn ends cleanly with ``note: repeated-call`` — the server saw no more requests than the log's
  steps, far below the 100-step bound;
* after a successful tool step the cell is never red: whatever the model answers next (text, a
  call, or nothing at all) the turn ends ``completed``, and an empty answer is ``note: no-reply``
  with the result on its card and the server asked once, not retried.

A test whose situation the model never produced is skipped with the reason. With the pinned
sampling (2026-12-03) Qwen repeats the call four times, so the loop test takes its whole path; after
the tool step it answers in text however it is asked to stay silent (three wordings tried), so the
empty-answer branch of the second test is ready for the model that does it, and the kernel tier
covers it by replaying llama-cpp-python's empty stream (``tests/kernel/test_repeats_and_empty.py``).
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.local.conftest import TEMPLATE_PROBE_POSTS, KernelFactory, chat_posts, sql
from tests.local.server import LlamaServer

pytestmark = [pytest.mark.local, pytest.mark.timeout(1200)]

LOOP_CODE = "hits.append(1); print(391)"
LOOP_PROMPT = (
    "Use the python tool to run exactly this code: `hits.append(1); print(391)`. This is a test of "
    "the tool: do not write any text. After each result, call the python tool again with exactly "
    "the same code. Never stop calling it."
)
QUIET_PROMPT = (
    "Use the python tool to run exactly this code: `print(17 * 23)`. After the tool's result, do "
    "not write anything at all: end your turn immediately with an empty reply."
)


def turn_events(k: Any) -> list[dict[str, Any]]:
    events = k.events()
    start = max(i for i, e in enumerate(events) if e["type"] == "turn/start")
    return events[start:]


def of_type(events: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [e["data"] for e in events if e["type"] == kind]


def code_of(call: dict[str, Any]) -> str | None:
    try:
        args = json.loads(call["arguments"] or "{}")
    except ValueError:
        return None
    return args.get("code") if isinstance(args, dict) else None


def steps_by_call(events: list[dict[str, Any]]) -> list[list[tuple[str, str]]]:
    """Each step that called tools: its calls' (name, canonical arguments)."""
    steps: dict[int, list[tuple[str, str]]] = {}
    for call in of_type(events, "tool/call"):
        try:
            canon = json.dumps(json.loads(call["arguments"] or "{}"), sort_keys=True)
        except ValueError:
            canon = call["arguments"]
        steps.setdefault(call["step"], []).append((call["name"], canon))
    return [steps[s] for s in sorted(steps)]


def test_a_repeated_call_loop_is_stopped_after_two(
    kernel_at: KernelFactory, qwen: LlamaServer
) -> None:
    with kernel_at(qwen) as k:
        k.python("hits = []")
        before = chat_posts(qwen)
        ex = k.execute(LOOP_PROMPT, timeout=1000)
        assert ex.status == "ok", ex.content  # never a red cell, whatever the model did
        events = turn_events(k)
        steps = steps_by_call(events)
        results = of_type(events, "tool/result")
        codes = [r.get("error", {}).get("code") for r in results]
        print(f"loop: steps {steps}, result codes {codes}")  # what the model did (pytest -s)
        if len(steps) < 3 or not (steps[0] == steps[1] == steps[2]):
            pytest.skip(
                f"Qwen did not make one call three times in a row (its steps' calls: {steps}); "
                "the guard had nothing to stop"
            )
        # Two identical calls ran; the third was not run and the model was told so.
        runs = int(k.python("print(len(hits))").strip())
        ran = [c for c in codes[:2] if c is None]
        assert runs <= 2 and codes[2] == "REPEATED_CALL", (runs, codes)
        told = json.dumps(results[2]["message"])
        assert "not run" in told and "use that result" in told
        (end,) = of_type(events, "turn/end")
        assert end["reason"]["kind"] == "completed", end
        if len(steps) >= 4 and steps[3] == steps[2]:
            assert codes[3] == "REPEATED_CALL"
            assert end["reason"] == {"kind": "completed", "note": "repeated-call"}
            assert len(steps) == 4, "the turn ended at the fourth identical call"
        # The server saw exactly the requests the log holds: no hidden retries, no runaway loop.
        posts = chat_posts(qwen) - before - TEMPLATE_PROBE_POSTS  # less the count's probe
        (turn,) = sql(k, "SELECT requests, steps, end_reason, end_note FROM turns")
        assert posts == turn["requests"] <= 5, (posts, turn)
        assert turn["end_reason"] == "completed" and turn["steps"] <= 5, turn
        assert len(ran) == 2 and runs == 2, (codes, runs)


def test_no_red_cell_after_a_successful_tool_step(
    kernel_at: KernelFactory, qwen: LlamaServer
) -> None:
    with kernel_at(qwen) as k:
        before = chat_posts(qwen)
        ex = k.execute(QUIET_PROMPT, timeout=1000)
        events = turn_events(k)
        results = of_type(events, "tool/result")
        if not any("error" not in r and "391" in json.dumps(r["message"]) for r in results):
            pytest.skip(f"Qwen never made a successful python call ({len(results)} results)")
        assert ex.status == "ok", ex.content  # the tool ran: whatever came next, no red cell
        (end,) = of_type(events, "turn/end")
        assert end["reason"]["kind"] == "completed", end
        finishes = [
            e["chunk"]["reason"]
            for e in of_type(events, "assistant/chunk")
            if e["chunk"]["type"] == "finish"
        ]
        posts = chat_posts(qwen) - before - TEMPLATE_PROBE_POSTS  # less the count's probe
        (turn,) = sql(k, "SELECT requests, end_reason, end_note, error_code FROM turns")
        assert posts == turn["requests"], (posts, turn)  # the log holds every request sent
        assert turn["end_reason"] == "completed" and turn["error_code"] is None, turn
        last = finishes[-1]
        print(f"quiet: finishes {finishes}, turn {turn}")  # what the model did (pytest -s)
        if last.get("kind") == "error":  # the model ended with nothing after the tool step
            assert last["failure"]["detail"] == "model-stopped", last
            assert end["reason"] == {"kind": "completed", "note": "no-reply"}
            assert turn["end_note"] == "no-reply"
            assert not of_type(events, "llm/retry"), "an empty answer after a tool is not retried"
            shown = ex.data("text/markdown")
            assert shown and "The model ended without a reply" in str(shown[-1])
        else:
            assert turn["end_note"] in (None, "repeated-call"), turn
