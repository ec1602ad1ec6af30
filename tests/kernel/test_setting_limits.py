"""Integer settings that reach the session log are held to what it keeps, where they are set.

The log refuses an integer past 2^53 (``NOT_LOSSLESS_JSON``). A context window or a token budget
that large used to be accepted and then fail every chat cell, since the window and the output cap
the budget leaves are logged with each request. Now each is refused with one line naming the
setting, its limit and what to give instead: ``%agent context`` keeps the window in force and the
next chat works; ``DSH_CONTEXT_WINDOW`` at start refuses chat with that line (as any value it cannot
read); ``DSH_BUDGET_TOKENS`` at start refuses chat as a course setting that does not parse (the
configuration is fixed: no budget is never the fallback). The kernel lives on in each case.
"""

from __future__ import annotations

from pathlib import Path

from tests.kernel.conftest import Live, provider_env
from tests.support import scenarios as sc
from tests.support.frontend import Frontend
from tests.support.kernel import start_kernel
from tests.support.sse_server import SseServer

HUGE = "9007199254740993"  # 2^53 + 1
# a budget whose room after the input is still past 2^53: the output cap the log used to refuse
HUGE_BUDGET = str(2**60)


def test_agent_context_past_the_limit_is_refused_and_the_window_stays(live: Live) -> None:
    fe = live.fe
    assert fe.run("%agent context 16384").status == "ok"
    try:
        ex = fe.run(f"%agent context {HUGE}")
        assert ex.status == "error" and ex.content["ename"] == "USAGE", ex.content
        line = ex.content["evalue"]
        assert f"'{HUGE}' is not a context window" in line
        assert "at most 100,000,000" in line and "'default'" in line
        assert "16,384 tokens (configured)" in fe.run("%agent status").stdout
        live.server.script(sc.text("Still here."))
        ex = fe.run("Say something.")
        assert ex.status == "ok", ex.content
        assert len(live.server.requests) == 1
    finally:
        fe.run("%agent context default")


def test_a_context_window_past_the_limit_at_start_is_refused_with_one_line(
    server: SseServer, tmp_path: Path
) -> None:
    server.script(sc.text("never sent"))
    env = provider_env(server, tmp_path, DSH_CONTEXT_WINDOW=HUGE)
    with start_kernel(tmp_path, "dsh", env=env) as kernel:
        fe = Frontend(kernel)
        ex = fe.run("Hello?")
        assert ex.status == "error" and ex.content["ename"] == "USAGE", ex.content
        line = ex.content["evalue"]
        assert f"DSH_CONTEXT_WINDOW='{HUGE}' is not a context window" in line
        assert "at most 100,000,000" in line and "\n" not in line
        assert fe.python("print(6 * 7)").strip() == "42"
    assert server.requests == []


def test_a_token_budget_past_the_limit_at_start_is_refused_with_one_line(
    server: SseServer, tmp_path: Path
) -> None:
    server.script(sc.text("never sent"))
    env = provider_env(server, tmp_path, DSH_BUDGET_TOKENS=HUGE_BUDGET)
    with start_kernel(tmp_path, "dsh", env=env) as kernel:
        fe = Frontend(kernel)
        ex = fe.run("Hello?")
        assert ex.status == "error" and ex.content["ename"] == "AI_POLICY_INVALID", ex.content
        line = ex.content["evalue"]
        assert f"DSH_BUDGET_TOKENS='{HUGE_BUDGET}' is not a token budget" in line
        assert "at most 9,007,199,254,740,992" in line and "\n" not in line
        assert fe.python("print(6 * 7)").strip() == "42"
    assert server.requests == []
