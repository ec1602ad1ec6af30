"""Prices the user set (``set_price``), read back for the footer and ``%agent cost``.

``set_price`` (``dsh_kernel.store.ingest``) writes a row of the ``prices`` table and bumps
``generation()``, so a process that caches the table (the kernel host) re-reads it only after a
change made in this process; a price set from another process is seen at the next kernel start.
``read_prices`` returns every row; ``priced`` lays one over a ``ModelInfo``: a user's price wins
(every field, ``None`` cache prices meaning the input price, as in SQL), then the catalogue's list
price, else the price is unknown.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from dsh_kernel.llm.types import ModelInfo
from dsh_kernel.store.db import open_db
from dsh_kernel.store.layout import Store

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
    global _generation
    _generation += 1


def read_prices(store: Store, *, timeout_s: float = 2.0) -> dict[tuple[str, str], UserPrice]:
    """Every ``prices`` row by ``(provider, model)``; empty when the database does not exist yet."""
    if not store.db_path.exists():
        return {}
    with open_db(store, read_only=True, timeout_s=timeout_s) as con:
        rows = con.execute(
            "SELECT provider, model, input_per_mtok, cached_input_per_mtok, "
            "cache_write_per_mtok, output_per_mtok FROM prices"
        ).fetchall()
    return {
        (str(r[0]), str(r[1])): UserPrice(
            input_per_mtok=r[2],
            cached_input_per_mtok=r[3],
            cache_write_per_mtok=r[4],
            output_per_mtok=r[5],
        )
        for r in rows
    }


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
