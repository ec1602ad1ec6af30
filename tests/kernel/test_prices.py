"""One price source, through a real kernel and the loopback server as DeepSeek (issue 12, item 3).

The kernel runs the ``deepseek`` provider with ``DEEPSEEK_BASE_URL`` at the loopback server and no
price configured. A catalogued model's turn costs its list price (DeepSeek's off-peak band) in the
footer, in ``%agent cost`` and in SQL's ``usage.cost`` alike; after ``set_price`` all three use the
user's price; a model the catalogue does not know says "price unknown" (never $0) and SQL's cost is
NULL; ``set_price(…, 0, 0)`` is a real price: $0 in the footer and SQL, "free" in ``%agent cost``.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from tests.support.frontend import markdown_footer
from tests.support.kernel import Kernel, start_kernel
from tests.support.sse_server import SseServer, sse_reply
from tests.support.wire_transcripts import chat_chunk, sse

# DeepSeek's usage shape: 0.3M cache hits, 0.3M misses, 0.1M out
USAGE = {
    "prompt_tokens": 600_000,
    "prompt_cache_hit_tokens": 300_000,
    "prompt_cache_miss_tokens": 300_000,
    "completion_tokens": 100_000,
}
LIST_COST = 0.3 * 0.15 + 0.3 * 0.003 + 0.1 * 0.60  # deepseek-flash off-peak list price: $0.1059
USER_COST = 0.3 * 1.0 + 0.3 * 1.0 + 0.1 * 2.0  # set_price(1, 2): cache hits at the input price


def reply(text: str) -> Any:
    return sse_reply(
        sse(
            chat_chunk({"role": "assistant", "content": ""}),
            chat_chunk({"content": text}),
            chat_chunk({}, finish_reason="stop"),
            {"id": "chatcmpl-P", "choices": [], "usage": USAGE},
            "[DONE]",
        )
    )


@pytest.fixture(scope="module")
def rig(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Kernel, SseServer]]:
    tmp = tmp_path_factory.mktemp("prices")
    with SseServer() as server:
        env = {
            "DSH_PROVIDER": "deepseek",
            "DEEPSEEK_BASE_URL": server.url,
            "DEEPSEEK_API_KEY": "sk-prices-test-key",
            "IPYTHONDIR": str(tmp / "ipython"),
        }
        with start_kernel(tmp, "dsh", env=env) as k:
            yield k, server


def turn(k: Kernel, server: SseServer, text: str) -> str:
    """Run one chat turn; return its footer (the last line of the turn's final markdown)."""
    server.script(reply(text))
    ex = k.execute(f"Say {text}.")
    assert ex.status == "ok", ex.content
    final = ex.data("text/markdown")[-1]
    assert text in final
    return markdown_footer(final)


def sql_costs(k: Kernel) -> list[float | None]:
    """``usage.cost`` of this session's requests, in order."""
    sid = k.python("print(get_ipython().kernel.host.agent.session.id)").strip()
    k.python("get_ipython().kernel.host.flush()")
    ex = k.execute(
        f"%%sql _rows <<\nSELECT cost FROM usage WHERE session_id = '{sid}' ORDER BY request"
    )
    assert ex.status == "ok", ex.content
    rows = json.loads(k.python("print(_rows.to_json(orient='records'))"))
    return [r["cost"] for r in rows]


def set_price(k: Kernel, model: str, inp: float, out: float) -> None:
    k.python(
        "from dsh_kernel.store import Store, set_price\n"
        f"set_price(Store.default(), provider='deepseek', model={model!r}, "
        f"input_per_mtok={inp}, output_per_mtok={out})"
    )


def test_a_catalogued_model_costs_its_list_price_everywhere_with_no_configuration(
    rig: tuple[Kernel, SseServer],
) -> None:
    k, server = rig
    k.execute("%agent new")
    footer = turn(k, server, "hello")
    assert "deepseek:deepseek-flash" in footer and f"${LIST_COST:.4f}" in footer, footer
    assert k.execute("%agent cost").stdout.strip().endswith(f"${LIST_COST:.4f}")
    [cost] = sql_costs(k)
    assert cost == pytest.approx(LIST_COST)


def test_set_price_wins_in_the_footer_agent_cost_and_sql(rig: tuple[Kernel, SseServer]) -> None:
    k, server = rig
    k.execute("%agent new")
    set_price(k, "deepseek-flash", 1.0, 2.0)
    footer = turn(k, server, "priced")
    assert f"${USER_COST:.4f}" in footer, footer
    assert k.execute("%agent cost").stdout.strip().endswith(f"${USER_COST:.4f}")
    assert sql_costs(k) == [pytest.approx(USER_COST)]


def test_an_unknown_model_says_price_unknown_until_an_explicit_zero_price(
    rig: tuple[Kernel, SseServer],
) -> None:
    k, server = rig
    k.execute("%agent new")
    k.execute("%agent model deepseek:deepseek-local-x")
    footer = turn(k, server, "unknown")
    assert "price unknown" in footer and "$" not in footer, footer
    out = k.execute("%agent cost").stdout
    assert "price unknown" in out and "$" not in out, out
    assert sql_costs(k) == [None]

    set_price(k, "deepseek-local-x", 0, 0)  # a local server: free is a real price
    footer = turn(k, server, "free")
    assert "$0.0000" in footer and "price unknown" not in footer, footer
    assert k.execute("%agent cost").stdout.strip().endswith(", free")
    assert sql_costs(k) == [0.0, 0.0]
