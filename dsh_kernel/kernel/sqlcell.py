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
import contextlib
import re
import signal
from collections.abc import Callable, Generator
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from dsh_kernel.errors import StoreError
from dsh_kernel.failures import describe_failure
from dsh_kernel.kernel._ipy import display_object, user_namespace
from dsh_kernel.kernel.cells import Cell

if TYPE_CHECKING:
    from dsh_kernel.kernel.kernel import DshKernel

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


async def run_sql_cell(kernel: DshKernel, cell: Cell, count: int, started: float) -> dict[str, Any]:
    from dsh_kernel.llm.provider import REPLAY_PROVIDER_ID
    from dsh_kernel.store.query import QueryInterrupt, run_query

    del started
    host = kernel.host
    assert kernel.shell is not None
    ns = user_namespace(kernel.shell)
    try:
        target = parse_target(cell.args)
        params = parameters(cell.body, ns)
    except (ValueError, KeyError) as exc:
        return kernel.error_reply(count, "SQL_USAGE", str(exc).strip('"'))
    if not cell.body.strip():
        return kernel.error_reply(
            count, "SQL_USAGE", "the %%sql cell is empty: write a query below the %%sql line"
        )
    if host.store is None:
        return kernel.error_reply(
            count, "STORE", host.store_warning or "no session store is configured"
        )
    interrupt = QueryInterrupt()
    try:
        with _sigint_calls(interrupt):
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
        return kernel.error_reply(count, "SQL_INTERRUPTED", "the %%sql cell was interrupted")
    except StoreError as exc:
        code = exc.code
        if code.startswith("SQL_"):
            return kernel.error_reply(count, code, exc.message)
        return kernel.error_reply(count, code, describe_failure(code, exc.message))
    if host.agent.provider.id == REPLAY_PROVIDER_ID:
        # While a notebook replays, its saved outputs must not change between runs: no timing.
        result = replace(result, timed=False)
    try:
        value: object = result.frame()
    except Exception:
        value = result
    ns[target or "_sql"] = value
    display_object(result)
    return kernel.ok_reply(count)


@contextlib.contextmanager
def _sigint_calls(fn: Callable[[], None]) -> Generator[None, None, None]:
    """Route SIGINT to ``fn`` while the query runs (restoring the default handler after, as the
    chat cell's turn does); without a usable loop signal handler the query is not interruptible."""
    loop = asyncio.get_running_loop()
    installed = False
    with contextlib.suppress(ValueError, RuntimeError, NotImplementedError):
        loop.add_signal_handler(signal.SIGINT, fn)
        installed = True
    try:
        yield
    finally:
        if installed:
            loop.remove_signal_handler(signal.SIGINT)
            signal.signal(signal.SIGINT, signal.default_int_handler)
