"""``%%sql`` cells: query every session in the store, joinable with the notebook's DataFrames.

``%%sql`` runs the cell's SQL and shows the result as a table (row count, elapsed time, a notice when
rows were cut or when the answer came from the journals; no elapsed time while the session replays a
recording, so a replayed notebook saves the same output every run); the result is kept in the
namespace as ``_sql`` (a pandas DataFrame when pandas is installed, else a ``QueryResult``), or under
a name with ``%%sql name <<``. ``$name`` in the SQL is a *bound* parameter taken from the namespace —
values are never pasted into the SQL text. The current session's latest events are always in the
answer (its journal is flushed first). The query runs on a worker thread while the kernel's SIGINT
handler stands by: the Jupyter interrupt stops it (``SQL_INTERRUPTED``) at once — DuckDB itself
would notice the signal only between its own tasks, sometimes not before the query ends.
"""

from __future__ import annotations

import asyncio
import re
from dataclasses import replace
from typing import TYPE_CHECKING

from dsh_kernel.errors import StoreError
from dsh_kernel.failures import describe_failure
from dsh_kernel.kernel._ipy import display_object
from dsh_kernel.kernel.cells import Cell
from dsh_kernel.kernel.interrupts import sigint_calls

if TYPE_CHECKING:
    from dsh_kernel.kernel.host.agent_host import AgentHost

_TARGET = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)\s*<<$")
_PARAM = re.compile(r"(?<![\w$])\$([A-Za-z_][A-Za-z0-9_]*)")
_STRING = re.compile(r"'(?:[^']|'')*'|\"(?:[^\"]|\"\")*\"")
MAX_ROWS = 10_000


def parse_target(args: str) -> str | None:
    """``name <<`` → ``name``; empty → ``None``; anything else is a usage error."""
    if not args.strip():
        return None
    m = _TARGET.match(args.strip())
    if m is None:
        raise ValueError(
            f"%%sql {args!r}: use `%%sql` or `%%sql name <<` to keep the result as `name`"
        )
    return m.group(1)


def parameters(sql: str, namespace: dict[str, object]) -> dict[str, object]:
    """The ``$name`` parameters the SQL uses (outside string literals), bound from ``namespace``."""
    names = _PARAM.findall(_STRING.sub("''", sql))
    out: dict[str, object] = {}
    for name in names:
        if name not in namespace:
            raise KeyError(
                f"${name}: there is no variable {name!r} in the notebook; define it, e.g. {name} = 'value'"
            )
        out[name] = namespace[name]
    return out


SqlFailure = tuple[str, str]
"""``(code, evalue)`` of a failed ``%%sql`` cell, for the kernel's error reply."""


async def run_sql_cell(host: AgentHost, ns: dict[str, object], cell: Cell) -> SqlFailure | None:
    """Run the cell's query over ``host``'s store, keep the result in ``ns`` and display it;
    ``None`` on success, else what failed."""
    from dsh_kernel.llm.provider import REPLAY_PROVIDER_ID
    from dsh_kernel.store.query.run import QueryInterrupt, run_query

    try:
        target = parse_target(cell.args)
        params = parameters(cell.body, ns)
    except (ValueError, KeyError) as exc:
        return ("SQL_USAGE", str(exc).strip('"'))
    if not cell.body.strip():
        return ("SQL_USAGE", "the %%sql cell is empty: write a query below the %%sql line")
    if host.store is None:
        return ("STORE", host.store_warning or "no session store is configured")
    interrupt = QueryInterrupt()
    try:
        with sigint_calls(interrupt):
            result = await asyncio.to_thread(
                run_query,
                host.store,
                cell.body,
                params or None,
                namespace=ns,
                max_rows=MAX_ROWS,
                live=[host.journal] if host.journal is not None else [],
                interrupt=interrupt,
            )
    except KeyboardInterrupt:
        # SIGINT before the handler was in place: the cell still owes a reply
        return ("SQL_INTERRUPTED", "the %%sql cell was interrupted")
    except StoreError as exc:
        code = exc.code
        if code.startswith("SQL_"):
            return (code, exc.message)
        return (code, describe_failure(code, exc.message))
    if host.agent.provider.id == REPLAY_PROVIDER_ID:
        # While a notebook replays, its saved outputs must not change between runs: no timing.
        result = replace(result, timed=False)
    try:
        value: object = result.frame()
    except Exception:
        value = result
    ns[target or "_sql"] = value
    display_object(result)
    return None
