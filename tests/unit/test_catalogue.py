"""The model catalogue (``dsh_kernel.llm.catalogue``) and the one price source built on it.

Every entry carries a context window, an output cap, reasoning efforts, whether it takes images,
list prices and the date they were verified; both adapters read it; retired models are not in it;
SQL's ``list_prices`` is refreshed from it without touching a price the user set; a model without a
price says "price unknown", never $0, and a zero price is a price.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest

from dsh_kernel.llm.catalogue import ANTHROPIC_MODELS, CATALOGUE, DEEPSEEK_MODELS, OPENAI_MODELS
from dsh_kernel.llm.providers.anthropic.adapter import MessagesProvider
from dsh_kernel.llm.providers.anthropic.serialize import DEFAULT_MAX_TOKENS
from dsh_kernel.llm.providers.offline import OFFLINE_MODEL, OfflineProvider
from dsh_kernel.llm.providers.openai_compat.adapter import ChatCompletionsProvider
from dsh_kernel.llm.providers.openai_compat.profiles import DEEPSEEK, GENERIC, OPENAI, ChatProfile
from dsh_kernel.llm.types import ModelInfo
from dsh_kernel.session.usage import UsageTotals
from dsh_kernel.store import Store, set_price
from dsh_kernel.store.db import open_db
from dsh_kernel.store.ingest.incremental import read_prices
from dsh_kernel.store.prices import UserPrice, list_rows, priced
from dsh_kernel.transcript.model import TurnModel, UsageSummary
from dsh_kernel.views.format import footer_parts

ENTRIES = [(f, m, i) for f, models in CATALOGUE.items() for m, i in models.items()]


@pytest.mark.parametrize(("family", "model", "info"), ENTRIES, ids=[e[1] for e in ENTRIES])
def test_every_entry_is_complete_and_dated(family: str, model: str, info: ModelInfo) -> None:
    assert info.context_window and info.context_window >= 128_000
    assert info.max_output_tokens and 0 < info.max_output_tokens < info.context_window
    assert info.reasoning_efforts
    default = info.default_reasoning_effort
    assert default is None or default in info.reasoning_efforts
    assert info.images is not None
    for price in (
        info.input_price_per_mtok,
        info.cached_input_price_per_mtok,
        info.output_price_per_mtok,
    ):
        assert price is not None and price > 0
    assert info.cached_input_price_per_mtok is not None and info.input_price_per_mtok is not None
    assert info.cached_input_price_per_mtok < info.input_price_per_mtok  # cache hits apart
    assert info.prices_as_of is not None
    assert dt.date(2025, 1, 1) <= dt.date.fromisoformat(info.prices_as_of) <= dt.date(2026, 12, 1)


def test_the_catalogue_keeps_current_models_and_leaves_retired_ones_out() -> None:
    assert {"deepseek-flash", "deepseek-v4-pro"} <= set(DEEPSEEK_MODELS)
    assert {"gpt-6-luna", "gpt-6.1-terra", "gpt-5-mini"} <= set(OPENAI_MODELS)
    assert {"claude-haiku-5-5", "claude-sonnet-5-5", "claude-opus-5-5"} <= set(ANTHROPIC_MODELS)
    every = {m for models in CATALOGUE.values() for m in models}
    for retired in ("deepseek-chat", "deepseek-reasoner", "claude-sonnet-4-5", "gpt-4"):
        assert retired not in every
    assert DEEPSEEK_MODELS["deepseek-flash"].input_price_per_mtok == 0.15  # the off-peak band


def test_which_models_take_images() -> None:
    """DeepSeek answers an image part with 400 ``unknown variant image_url`` (issue 15): none of its
    models, listed or not, takes images; every Claude and GPT model listed does."""
    assert [m for m, i in DEEPSEEK_MODELS.items() if i.images is not False] == []
    assert DEEPSEEK.fallback.images is False and not DEEPSEEK.image_parts
    assert all(i.images for i in OPENAI_MODELS.values())
    assert all(i.images for i in ANTHROPIC_MODELS.values())
    assert GENERIC.fallback.images is None and GENERIC.image_parts  # unknown: DSH_VISION decides


def test_both_adapters_read_the_catalogue_and_unknown_ids_have_no_price() -> None:
    def chat(profile: ChatProfile) -> ChatCompletionsProvider:
        return ChatCompletionsProvider(
            id="p", base_url="http://127.0.0.1:9", profile=profile, api_key=lambda: "k"
        )

    deepseek = chat(DEEPSEEK).model_info("deepseek-flash")
    assert deepseek == DEEPSEEK_MODELS["deepseek-flash"]
    assert deepseek.default_max_tokens == 256_000 and deepseek.default_reasoning_effort == "high"
    assert chat(OPENAI).model_info("gpt-6-luna") == OPENAI_MODELS["gpt-6-luna"]
    claude = MessagesProvider(
        id="a", base_url="http://127.0.0.1:9", api_key=lambda: "k"
    ).model_info("claude-haiku-5-5")
    assert claude.output_price_per_mtok == 0.50 and claude.default_max_tokens == DEFAULT_MAX_TOKENS
    for info in (
        chat(DEEPSEEK).model_info("deepseek-local-x"),
        chat(OPENAI).model_info("my-fine-tune"),
        chat(GENERIC).model_info("gpt-6-luna"),  # a compatible server is not OpenAI's price list
        MessagesProvider(id="a", base_url="http://127.0.0.1:9", api_key=lambda: "k").model_info(
            "claude-unknown"
        ),
    ):
        assert info.input_price_per_mtok is None and info.output_price_per_mtok is None


def test_a_user_price_wins_field_by_field_and_a_zero_price_is_a_price() -> None:
    listed = DEEPSEEK_MODELS["deepseek-flash"]
    mine = priced(
        listed,
        UserPrice(
            input_per_mtok=1.0,
            cached_input_per_mtok=None,
            cache_write_per_mtok=None,
            output_per_mtok=2.0,
        ),
    )
    assert (mine.input_price_per_mtok, mine.cached_input_price_per_mtok) == (1.0, None)
    assert mine.prices_as_of is None and mine.context_window == listed.context_window
    used = UsageTotals(
        requests=1, input_tokens=1_000_000, cache_read_tokens=1_000_000, output_tokens=1_000_000
    )
    assert used.cost(mine) == pytest.approx(4.0)  # cache hits at the input price, as SQL
    assert used.cost(listed) == pytest.approx(0.15 + 0.003 + 0.60)
    free = priced(
        ModelInfo(),
        UserPrice(
            input_per_mtok=0,
            cached_input_per_mtok=None,
            cache_write_per_mtok=None,
            output_per_mtok=0,
        ),
    )
    assert used.describe(free).endswith(", free")  # %agent cost says so: no price to set
    estimated = UsageTotals(requests=1, input_tokens=10, output_tokens=2, estimated_requests=1)
    assert estimated.cost(free) == 0 and estimated.cost(listed) is None


def test_the_offline_demo_is_free_in_agent_cost_and_sql() -> None:
    info = OfflineProvider().model_info(OFFLINE_MODEL)
    used = UsageTotals(requests=2, input_tokens=600, output_tokens=200)
    assert used.describe(info).endswith(", free"), used.describe(info)
    assert ("offline", OFFLINE_MODEL, 0.0, None, None, 0.0, None) in list_rows()


def test_an_unknown_price_says_so_and_never_shows_zero() -> None:
    used = UsageSummary(requests=1, input_tokens=1000, output_tokens=100)
    turn = TurnModel(provider="deepseek", model="deepseek-local-x", usage=used)
    footer = footer_parts(turn, info=ModelInfo())
    assert "price unknown" in footer and not any(p.startswith("$") for p in footer)
    assert "$0.0000" in footer_parts(
        turn, info=ModelInfo(input_price_per_mtok=0, output_price_per_mtok=0)
    )
    text = UsageTotals(requests=1, input_tokens=1000, output_tokens=100).describe(ModelInfo())
    assert "price unknown" in text and "$" not in text


def test_sql_list_prices_follow_the_catalogue_and_never_overwrite_a_user_price(
    tmp_path: Path,
) -> None:
    store = Store.at(tmp_path)
    set_price(
        store, provider="deepseek", model="deepseek-flash", input_per_mtok=9.0, output_per_mtok=9.0
    )
    with open_db(store, read_only=False) as con:
        con.execute("DELETE FROM list_prices WHERE model = 'gpt-6-luna'")  # a stale table
    with open_db(store, read_only=False) as con:  # the next read-write open refreshes it
        rows = con.execute(
            "SELECT provider, model, input_per_mtok, cached_input_per_mtok, cache_write_per_mtok, "
            "output_per_mtok, strftime(prices_as_of, '%Y-%m-%d') FROM list_prices "
            "ORDER BY provider, model"
        ).fetchall()
        book = con.execute(
            "SELECT source, input_per_mtok FROM price_book WHERE model = 'deepseek-flash'"
        ).fetchall()
    assert [tuple(r) for r in rows] == list_rows()
    assert book == [("user", 9.0)]
    assert read_prices(store)[("deepseek", "deepseek-flash")].input_per_mtok == 9.0
