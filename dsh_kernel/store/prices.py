"""Prices the user set (``set_price``), laid over the catalogue for the footer and ``%agent cost``.

``set_price`` (``dsh_kernel.store.ingest.incremental``) writes a row of the ``prices`` table and bumps
``generation()``, so a process that caches the table (the kernel host) re-reads it only after a
change made in this process; a price set from another process is seen at the next kernel start.
``read_prices`` (beside ``set_price``, so this module needs no database connection of its own)
returns every row; ``refresh_list_prices`` keeps the ``list_prices`` table (SQL's
view of the catalogue, ``usage.cost`` falls back to it) equal to ``dsh_kernel.llm.catalogue``; ``priced`` lays one over a ``ModelInfo``: a user's price wins
(every field, ``None`` cache prices meaning the input price, as in SQL), then the catalogue's list
price, else the price is unknown.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import duckdb

from dsh_kernel.llm.catalogue import CATALOGUE
from dsh_kernel.llm.providers.offline import OFFLINE_INFO, OFFLINE_MODEL
from dsh_kernel.llm.types import ModelInfo

_generation = 0


@dataclass(frozen=True, slots=True, kw_only=True)
class UserPrice:
    """One ``prices`` row, USD (or any currency) per million tokens."""

    input_per_mtok: float | None
    cached_input_per_mtok: float | None
    cache_write_per_mtok: float | None
    output_per_mtok: float | None


def generation() -> int:
    """How many times ``set_price`` ran in this process."""
    return _generation


def bump() -> None:
    """Count one more ``set_price`` (readers compare ``generation()`` to refresh)."""
    global _generation
    _generation += 1


def priced(info: ModelInfo, price: UserPrice | None) -> ModelInfo:
    """``info`` with the user's ``price`` (if any) in place of its list prices."""
    if price is None:
        return info
    return replace(
        info,
        input_price_per_mtok=price.input_per_mtok,
        cached_input_price_per_mtok=price.cached_input_per_mtok,
        cache_write_price_per_mtok=price.cache_write_per_mtok,
        output_price_per_mtok=price.output_per_mtok,
        prices_as_of=None,
    )


ListRow = tuple[str, str, float | None, float | None, float | None, float | None, str | None]


def list_rows() -> list[ListRow]:
    """The catalogue as ``list_prices`` rows, keyed by the provider ids ``deepseek``, ``openai`` and
    ``anthropic`` (a provider configured under another id has no SQL list price), and the offline
    demo model's zero price."""
    listed = {**CATALOGUE, "offline": {OFFLINE_MODEL: OFFLINE_INFO}}
    return sorted(
        (
            family,
            model,
            i.input_price_per_mtok,
            i.cached_input_price_per_mtok,
            i.cache_write_price_per_mtok,
            i.output_price_per_mtok,
            i.prices_as_of,
        )
        for family, models in listed.items()
        for model, i in models.items()
    )


def refresh_list_prices(con: duckdb.DuckDBPyConnection) -> None:
    """Make ``list_prices`` equal the catalogue (a no-op when it already is). Never touches
    ``prices``: a price the user set stays."""
    want = list_rows()
    have = con.execute(
        "SELECT provider, model, input_per_mtok, cached_input_per_mtok, cache_write_per_mtok, "
        "output_per_mtok, strftime(prices_as_of, '%Y-%m-%d') FROM list_prices ORDER BY provider, model"
    ).fetchall()
    if [tuple(r) for r in have] == want:
        return
    con.execute("BEGIN TRANSACTION")
    try:
        con.execute("DELETE FROM list_prices")
        con.executemany("INSERT INTO list_prices VALUES (?, ?, ?, ?, ?, ?, ?::DATE)", want)
        con.execute("COMMIT")
    except BaseException:
        con.execute("ROLLBACK")
        raise
