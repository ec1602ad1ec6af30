"""A course's daily budgets through real kernels and the loopback server (issue 17, item 1).

A token budget (``DSH_BUDGET_TOKENS``) and a dollar budget (``DSH_BUDGET_USD``, the loopback
playing DeepSeek so its catalogued model has a list price) each let a turn through with its output
cap lowered to what is left, then stop the next turn **before any byte is sent** — the server
receives no request — with ``BUDGET_EXCEEDED``, what was used, the limit, and who sets it. Neither
``%agent new`` nor a restart (a second kernel on the same store and user) resets the count; another
user's count is their own; a price set in the notebook cannot lower what the budget counts; a
dollar budget on a model with no price refuses with one line. ``%agent status`` and the footer
show what is left.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any

from tests.kernel.conftest import provider_env
from tests.support.frontend import markdown_footer
from tests.support.kernel import Execution, Kernel, start_kernel
from tests.support.sse_server import SseServer, sse_reply
from tests.support.wire_transcripts import chat_chunk, sse

ADMIN = "set by your course's administrator"


def reply(text: str, usage: dict[str, int]) -> Any:
    return sse_reply(
        sse(
            chat_chunk({"role": "assistant", "content": ""}),
            chat_chunk({"content": text}),
            chat_chunk({}, finish_reason="stop"),
            {"id": "chatcmpl-B", "choices": [], "usage": usage},
            "[DONE]",
        )
    )


def footer(ex: Execution) -> str:
    return markdown_footer(ex.data("text/markdown")[-1])


def status_line(k: Kernel) -> str:
    out = k.execute("%agent status").stdout
    (line,) = [ln for ln in out.splitlines() if ln.startswith("budget:")]
    return line


def refused(k: Kernel, server: SseServer, text: str, code: str = "BUDGET_EXCEEDED") -> str:
    """Run a chat cell that the budget must stop; return its error line. Nothing reaches the
    server."""
    server.script(reply("never sent", {"prompt_tokens": 1, "completion_tokens": 1}))
    ex = k.execute(text)
    assert ex.status == "error", ex.content
    assert ex.content["ename"] == code, ex.content
    assert server.requests == []  # not a byte of a model request was sent
    evalue = str(ex.content["evalue"])
    assert "\n" not in evalue
    return evalue


def budget_hits(k: Kernel) -> dict[str, int]:
    """Turns that ended ``BUDGET_EXCEEDED``, by user, from SQL's ``errors`` view."""
    k.python("get_ipython().kernel.host.flush()")
    ex = k.execute(
        '%%sql _hits <<\nSELECT "user", count(*) AS n FROM errors JOIN sessions USING (session_id)'
        " WHERE code = 'BUDGET_EXCEEDED' GROUP BY \"user\""
    )
    assert ex.status == "ok", ex.content
    rows = json.loads(k.python("print(_hits.to_json(orient='records'))"))
    return {r["user"]: r["n"] for r in rows}


def test_a_token_budget_stops_the_turn_before_sending_and_nothing_resets_it(
    tmp_path: Path,
) -> None:
    store = tmp_path / "store"
    with SseServer() as server:

        def env(name: str, user: str) -> dict[str, str]:
            return provider_env(
                server, tmp_path / name, DSH_BUDGET_TOKENS="20000", JUPYTERHUB_USER=user
            )

        with start_kernel(tmp_path / "k1", env=env("k1", "ada"), store=store) as k:
            server.script(reply("Hello.", {"prompt_tokens": 5_000, "completion_tokens": 15_000}))
            ex = k.execute("Say hello.")
            assert ex.status == "ok", ex.content
            (request,) = server.requests
            cap = request.json["max_tokens"]  # lowered to what the budget left
            assert 15_000 < cap < 20_000, cap
            assert "budget left today 0 tokens" in footer(ex)
            line = status_line(k)
            assert "20,000 of 20,000 tokens used today (UTC), 0 left (DSH_BUDGET_TOKENS)" in line
            assert ADMIN in line
            evalue = refused(k, server, "Say more.")
            assert "20,000 of today's 20,000 tokens used (UTC day), 0 left" in evalue
            assert f"the limit is DSH_BUDGET_TOKENS, {ADMIN}" in evalue
            k.execute("%agent new")
            refused(k, server, "A new session.")
            assert budget_hits(k) == {"ada": 2}  # the errors view counts them (the report does)
        with start_kernel(tmp_path / "k2", env=env("k2", "ada"), store=store) as k2:
            evalue = refused(k2, server, "After a restart.")
            assert "20,000 of today's 20,000 tokens used" in evalue
        with start_kernel(tmp_path / "k3", env=env("k3", "bob"), store=store) as k3:
            assert "0 of 20,000 tokens used today" in status_line(k3)


def test_a_dollar_budget_counts_at_the_list_price_and_a_notebook_price_cannot_lower_it(
    tmp_path: Path,
) -> None:
    usage = {  # DeepSeek's usage shape: 0.3M cache hits, 0.3M misses, 0.1M out: $0.1059
        "prompt_tokens": 600_000,
        "prompt_cache_hit_tokens": 300_000,
        "prompt_cache_miss_tokens": 300_000,
        "completion_tokens": 100_000,
    }
    with SseServer() as server:
        env = {
            "DSH_PROVIDER": "deepseek",
            "DEEPSEEK_BASE_URL": server.url,
            "DEEPSEEK_API_KEY": "sk-budget-test-key",
            "IPYTHONDIR": str(tmp_path / "ipython"),
            "DSH_BUDGET_USD": "0.10",
            "JUPYTERHUB_USER": "ada",
        }
        with start_kernel(tmp_path, "dsh", env=env) as k:
            assert "$0.0000 of $0.1000 spent today (UTC), $0.1000 left" in status_line(k)
            server.script(reply("Hello.", usage))
            ex = k.execute("Say hello.")
            assert ex.status == "ok", ex.content
            assert len(server.requests) == 1
            assert "budget left today $0.0000" in footer(ex)
            assert "$0.1059 of $0.1000 spent today (UTC), $0.0000 left (DSH_BUDGET_USD)" in (
                status_line(k)
            )
            evalue = refused(k, server, "Say more.")
            assert "$0.1059 of today's $0.1000 spent (UTC day)" in evalue
            assert f"the limit is DSH_BUDGET_USD, {ADMIN}" in evalue
            k.python(
                "from dsh_kernel.store import Store, set_price\n"
                "set_price(Store.default(), provider='deepseek', model='deepseek-flash', "
                "input_per_mtok=0, output_per_mtok=0)"
            )
            assert "$0.1059 of today's $0.1000 spent" in refused(k, server, "Now it is free?")
            k.execute("%agent model deepseek:deepseek-unlisted-x")
            evalue = refused(k, server, "Hello.", "BUDGET_UNPRICED")
            assert "deepseek:deepseek-unlisted-x has no known price" in evalue
            assert f"(DSH_BUDGET_USD, {ADMIN})" in evalue


PARTIAL = "The first half of an answer that never finishes. " * 160  # 8,000 characters


def fails_mid_answer() -> Any:
    """Text, then the server's in-stream error (WIRE §2.8): no usage, no ``[DONE]``; ``SERVER``,
    which the agent retries."""
    return sse_reply(
        sse(
            chat_chunk({"role": "assistant", "content": ""}),
            chat_chunk({"content": PARTIAL}),
            {"error": {"message": "The server had an error.", "type": "server_error"}},
        )
    )


def used_today(line: str) -> tuple[int, int]:
    """``(used, limit)`` of a ``%agent status`` budget line."""
    m = re.search(r"([\d,]+) of ([\d,]+) tokens used today", line)
    assert m is not None, line
    return int(m[1].replace(",", "")), int(m[2].replace(",", ""))


def session_tokens(k: Kernel) -> int:
    """The current session's tokens from SQL's ``usage`` view."""
    k.python("get_ipython().kernel.host.flush()")
    sid = k.python("print(get_ipython().kernel.host.agent.session.id)").strip()
    ex = k.execute(
        "%%sql _spent <<\nSELECT sum(total_tokens)::BIGINT AS n FROM usage "
        f"WHERE session_id = '{sid}'"
    )
    assert ex.status == "ok", ex.content
    return int(k.python("print(int(_spent['n'][0]))"))


def test_a_failed_attempt_counts_and_a_retry_the_budget_cannot_pay_for_is_not_sent(
    tmp_path: Path,
) -> None:
    """An attempt that streams text and then fails counts its input and what streamed, in the
    footer, ``%agent status`` and SQL alike (before: zero); a retry the budget cannot pay for is
    not sent, and the error names the failure, the budget and what to do."""
    store = tmp_path / "store"
    with SseServer() as server:

        def env(name: str, budget: int) -> dict[str, str]:
            return provider_env(
                server, tmp_path / name, DSH_BUDGET_TOKENS=str(budget), JUPYTERHUB_USER="ada"
            )

        with start_kernel(tmp_path / "k1", env=env("k1", 1_000_000), store=store) as k:
            server.script(
                fails_mid_answer(), reply("Hello.", {"prompt_tokens": 10, "completion_tokens": 5})
            )
            ex = k.execute("Say hello.")
            assert ex.status == "ok", ex.content
            assert len(server.requests) == 2  # the failed attempt and its retry
            used, limit = used_today(status_line(k))
            failed = used - 15  # what the failed attempt counted: its input and what streamed
            sent = failed - (math.ceil(len(PARTIAL) / 4) + 4)  # its input: prompt, tools, history
            assert sent > 0, used
            assert f"budget left today {limit - used:,} tokens" in footer(ex)
            assert session_tokens(k) == used  # SQL counts what the budget counts
        # a second kernel of the same user: room for one such attempt, not for its retry
        budget = used + failed + sent // 2
        with start_kernel(tmp_path / "k2", env=env("k2", budget), store=store) as k2:
            server.script(fails_mid_answer(), reply("never sent", {"prompt_tokens": 1}))
            ex = k2.execute("Say hello again.")
            assert ex.status == "error", ex.content
            assert ex.content["ename"] == "BUDGET_EXCEEDED", ex.content
            assert len(server.requests) == 1  # the retry was not sent
            evalue = str(ex.content["evalue"])
            assert "the answer failed (SERVER: " in evalue and "its retry was not sent" in evalue
            assert f"(the limit is DSH_BUDGET_TOKENS, {ADMIN})" in evalue
            assert "starts again at midnight UTC" in evalue  # what to do
            used2, _ = used_today(status_line(k2))
            assert used2 > used + failed - sent // 2  # the second failed attempt counted too
            assert "llm/retry" not in k2.python(
                "print([e.type for e in get_ipython().kernel.host.agent.session.events])"
            )
