"""The model catalogue: what dsh-kernel knows about DeepSeek's, OpenAI's and Anthropic's models.

Data only, one ``ModelInfo`` per model id: context window, the provider's output cap
(``max_output_tokens``), the reasoning efforts our adapter accepts for it, whether it takes images,
and dated list prices in USD per million tokens (``prices_as_of`` is the date the figure was last
verified). Sources: ``docs/dev/model-catalogue-research-2026-12.md``; current and
legacy-but-served models only, retired ones are left out.

The catalogue is advisory. Model ids are configuration (``dsh_kernel.llm.config``) and an id it
does not list passes through with the provider's fallback (no prices: "price unknown", never $0).
A price recorded with ``dsh_kernel.store.set_price`` wins over a list price here (see
``dsh_kernel.store.prices``).

Simplifications, said once:

* **DeepSeek** bills two time bands (peak Mon–Fri 01:00–04:00 and 06:00–10:00 UTC costs double).
  The list prices here are the **off-peak** band; a turn at peak costs twice what is shown.
* **Anthropic Haiku 5.5** is priced per prompt size; the figures are the ≤100K-token band (×5 above).
* **Images**: every Anthropic and OpenAI model here takes image input; no DeepSeek model does — the
  chat-completions API answers an ``image_url`` part with HTTP 400 ``unknown variant image_url``
  (measured), whatever its pricing page says of Flash. ``DSH_VISION`` overrides this for a
  route (``kernel.magic.vision``), except that the DeepSeek profile never sends image parts.
* Cache-write prices are Anthropic's 5-minute writes and OpenAI's 30-minute retention; DeepSeek has
  no cache-write charge (``None``: billed as input, where the provider reports no such tokens).
* ``reasoning_efforts`` are the values our adapter accepts for the model, and
  ``default_reasoning_effort`` the one sent when the user sets none (``off`` disables thinking):
  DeepSeek's toggle + effort; Anthropic's ``output_config.effort`` on the Claude 5.x generation
  (adaptive thinking only — those models refuse ``budget_tokens``; Opus 5.5 and the Fables cannot
  switch thinking off) and budget-mapped efforts on Haiku 4.5; OpenAI's ``reasoning_effort`` values —
  but Chat Completions takes function tools from the GPT-5.4+ generation only with effort ``none``
  (``off`` is sent as ``none``), and the agent always sends its tools, so those models take ``off``
  and ``none`` only (``reasoning_note`` says why).
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Literal

from dsh_kernel.llm.types import ModelInfo

DEEPSEEK_EFFORTS = ("off", "low", "high", "max")
"""``off`` disables thinking; the others enable it with that ``reasoning_effort`` (WIRE §3.2)."""

ANTHROPIC_EFFORTS = ("off", "low", "medium", "high", "xhigh", "max")
"""Claude 5.x adaptive thinking: ``output_config.effort``; ``off`` sends ``thinking: disabled``."""

ANTHROPIC_ALWAYS_ON = ANTHROPIC_EFFORTS[1:]
"""Models whose adaptive thinking cannot be switched off (Opus 5.5, the Fables)."""

ANTHROPIC_BUDGET_EFFORTS = ("off", "low", "medium", "high")
"""Manual extended thinking (Haiku 4.5): mapped to ``thinking.budget_tokens``; ``off`` sends none."""

OPENAI_TOOLS_NOTE = (
    "OpenAI's Chat Completions takes function tools from this model only with reasoning effort "
    "none, and the agent always sends its tools; reasoning with tools needs OpenAI's Responses API, "
    "which dsh-kernel does not speak yet"
)
OPENAI_NO_TOOLS_NOTE = (
    "OpenAI's Chat Completions refuses function tools from this model at every reasoning effort, "
    "so the agent's tools fail on it until dsh-kernel speaks the Responses API: choose gpt-6-luna "
    "or gpt-6.1-terra"
)


def _model(
    window: int,
    max_output: int,
    efforts: tuple[str, ...],
    images: bool,
    prices: tuple[float, float, float | None, float],
    as_of: str,
    *,
    default_max_tokens: int | None = None,
    default_effort: str | None = None,
    style: Literal["adaptive", "budget"] | None = None,
    note: str | None = None,
) -> ModelInfo:
    """``prices`` is (input, cached input, cache write or ``None``, output) per million tokens."""
    inp, cached, write, out = prices
    return ModelInfo(
        reasoning_style=style,
        reasoning_note=note,
        context_window=window,
        default_max_tokens=default_max_tokens,
        max_output_tokens=max_output,
        reasoning_efforts=efforts,
        default_reasoning_effort=default_effort,
        images=images,
        input_price_per_mtok=inp,
        cached_input_price_per_mtok=cached,
        cache_write_price_per_mtok=write,
        output_price_per_mtok=out,
        prices_as_of=as_of,
    )


# --- DeepSeek (off-peak list prices; peak is double) ----------------------------------------------

_DS_FLASH = _model(
    1_000_000,
    384_000,
    DEEPSEEK_EFFORTS,
    False,  # the pricing page says Vision ✓, but the API answers 400 `unknown variant image_url`
    (0.15, 0.003, None, 0.60),
    "2026-11-15",
    default_max_tokens=256_000,
    default_effort="high",
)

DEEPSEEK_MODELS: Mapping[str, ModelInfo] = MappingProxyType(
    {
        "deepseek-flash": _DS_FLASH,
        "deepseek-v4-flash": _DS_FLASH,  # alias, served by V4.1 Flash at Flash prices
        "deepseek-v4-flash-vision-exp": _DS_FLASH,  # alias, likewise
        "deepseek-v4-pro": _model(
            1_000_000,
            384_000,
            DEEPSEEK_EFFORTS,
            False,
            (0.66, 0.022, None, 1.98),
            "2026-11-15",
            default_max_tokens=256_000,
            default_effort="high",
        ),
    }
)

DEEPSEEK_FALLBACK = ModelInfo(
    context_window=1_000_000,
    default_max_tokens=256_000,
    reasoning_efforts=DEEPSEEK_EFFORTS,
    default_reasoning_effort="high",
    images=False,
)
"""An id DeepSeek may serve that the catalogue does not list: its shape, but no price."""

# --- OpenAI ----------------------------------------------------------------------------------------

_GPT_WINDOW = 1_050_000
_TOOLS_NONE = ("off", "none")
_GPT6_NO_NONE = ("low", "medium", "high", "xhigh", "max")


def _gpt(
    prices: tuple[float, float, float | None, float],
    as_of: str,
    *,
    window: int = _GPT_WINDOW,
    efforts: tuple[str, ...] = _TOOLS_NONE,
    default: str | None = "none",
    note: str | None = OPENAI_TOOLS_NOTE,
) -> ModelInfo:
    """A GPT-5.4+ model: tools only with effort ``none`` (``OPENAI_TOOLS_NOTE``) unless told."""
    return _model(window, 128_000, efforts, True, prices, as_of, default_effort=default, note=note)


def _gpt_no_tools(prices: tuple[float, float, float | None, float], as_of: str) -> ModelInfo:
    return _gpt(prices, as_of, efforts=_GPT6_NO_NONE, note=OPENAI_NO_TOOLS_NOTE, default=None)


OPENAI_MODELS: Mapping[str, ModelInfo] = MappingProxyType(
    {
        "gpt-6-luna": _gpt((0.10, 0.01, 0.125, 0.50), "2026-10-13"),
        "gpt-6.1-terra": _gpt((1.00, 0.05, 1.25, 5.00), "2026-11-19"),
        "gpt-6.2-sol": _gpt_no_tools((2.00, 0.10, 2.50, 10.00), "2026-11-18"),
        # cached input derived ("60% cheaper than GPT-6 Astra"); cache write not published
        "gpt-6.2-astra": _gpt_no_tools((8.00, 0.40, None, 40.00), "2026-11-18"),
        "gpt-6.1-sol": _gpt_no_tools((2.00, 0.10, 2.50, 10.00), "2026-11-04"),
        "gpt-6-sol": _gpt((2.00, 0.20, 2.50, 10.00), "2026-09-22"),
        "gpt-6-astra": _gpt_no_tools((10.00, 1.00, 12.50, 50.00), "2026-09-05"),
        "gpt-5.6-sol": _gpt((4.00, 0.40, None, 20.00), "2026-10-03"),
        "gpt-5.6": _gpt((4.00, 0.40, None, 20.00), "2026-10-03"),
        "gpt-5.6-terra": _gpt((2.00, 0.20, None, 12.00), "2026-07-30"),
        "gpt-5.6-luna": _gpt((0.20, 0.02, None, 1.20), "2026-07-30"),
        # third-party copies only, undated: the research date
        "gpt-5.4-mini": _gpt((0.75, 0.075, None, 4.50), "2026-12-01", window=400_000),
        # deprecated, shut down 2026-12-11; takes tools at any effort; the server's default is
        # medium. Long-standing list price, not re-verified in 2026 (undated copies).
        "gpt-5-mini": _gpt(
            (0.25, 0.025, None, 2.00),
            "2026-12-01",
            window=400_000,
            efforts=("minimal", "low", "medium", "high"),
            note=None,
            default=None,
        ),
    }
)

# --- Anthropic (cache write = 5-minute write) ------------------------------------------------------


def _claude(
    prices: tuple[float, float, float | None, float],
    as_of: str,
    default: str,
    *,
    efforts: tuple[str, ...] = ANTHROPIC_EFFORTS,
) -> ModelInfo:
    """A Claude 5.x model: 1M window, 128K output, images, adaptive thinking at ``default`` effort."""
    return _model(
        1_000_000, 128_000, efforts, True, prices, as_of, default_effort=default, style="adaptive"
    )


_HAIKU_4_5 = _model(
    200_000,
    64_000,
    ANTHROPIC_BUDGET_EFFORTS,
    True,
    (1.00, 0.10, 1.25, 5.00),
    "2026-12-01",
    default_effort="off",
    style="budget",
)

ANTHROPIC_MODELS: Mapping[str, ModelInfo] = MappingProxyType(
    {
        # ≤100K-token prompt band; above it 0.50 / 0.05 / 0.625 / 2.50
        "claude-haiku-5-5": _claude((0.10, 0.01, 0.125, 0.50), "2026-10-24", "medium"),
        "claude-sonnet-5-5": _claude((2.00, 0.10, 2.50, 10.00), "2026-10-24", "high"),
        "claude-opus-5-5": _claude(
            (4.00, 0.20, 5.00, 20.00), "2026-10-16", "medium", efforts=ANTHROPIC_ALWAYS_ON
        ),
        "claude-fable-5-2": _claude(
            (8.00, 0.20, 10.00, 40.00), "2026-11-10", "high", efforts=ANTHROPIC_ALWAYS_ON
        ),
        "claude-fable-5-1": _claude(
            (10.00, 0.25, 12.50, 50.00), "2026-09-01", "high", efforts=ANTHROPIC_ALWAYS_ON
        ),
        "claude-sonnet-5": _claude((2.00, 0.20, 2.50, 10.00), "2026-09-01", "high"),
        # legacy models below: undated page copies, so the as-of date is the research date
        "claude-opus-5": _claude((5.00, 0.50, 6.25, 25.00), "2026-12-01", "high"),
        # window and output cap from third-party notes; adaptive + effort, thinking off by default
        "claude-sonnet-4-6": _model(
            1_000_000,
            64_000,
            ("off", "low", "medium", "high", "max"),
            True,
            (3.00, 0.30, 3.75, 15.00),
            "2026-12-01",
            default_effort="off",
            style="adaptive",
        ),
        "claude-haiku-4-5": _HAIKU_4_5,
        "claude-haiku-4-5-20251001": _HAIKU_4_5,
    }
)

CATALOGUE: Mapping[str, Mapping[str, ModelInfo]] = MappingProxyType(
    {"deepseek": DEEPSEEK_MODELS, "openai": OPENAI_MODELS, "anthropic": ANTHROPIC_MODELS}
)
"""The catalogue by provider family."""


def list_price(model: str) -> ModelInfo | None:
    """The catalogue entry for ``model`` in any family (ids do not collide), else ``None``."""
    for family in CATALOGUE.values():
        if model in family:
            return family[model]
    return None
