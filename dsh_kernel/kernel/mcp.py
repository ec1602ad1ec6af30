"""The kernel's side of MCP (``dsh_kernel.mcp``): its servers made and started at kernel start,
the wait a chat cell makes for them, and the ``%agent mcp`` / ``%agent status`` lines.

``start_servers(traits, env, store_root)`` reads the settings (``mcp_config``, ``mcp_trusted``,
``mcp_idle_timeout``), finds the configuration from the kernel's working directory (where
jupyter-server starts a notebook's kernel: its folder) and the Jupyter config path, and starts every
server in the background once the loop runs. Their state (logs, allowed project files) lives in
``<store>/mcp``; without a writable store, in a temporary directory for this kernel.

``before_turn(servers, seconds, show, interrupted)`` is awaited by a chat cell before its turn: while servers are
still starting it shows "starting MCP servers…" (``show``: a transient line, cleared after) and
waits at most ``seconds``; it returns the line the cell prints when some are still not ready (the
turn goes without their tools), else ``None``.
"""

from __future__ import annotations

import asyncio
import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path

from dsh_kernel.mcp.servers import McpServers
from dsh_kernel.mcp.tools import CallLimits


def start_servers(
    traits: Mapping[str, object], env: Mapping[str, str], store_root: Path | None
) -> McpServers:
    """The kernel's servers, started in the background on the running loop (module docstring)."""
    from jupyter_core.paths import jupyter_config_path

    from dsh_kernel.kernel.configuration import setting_value
    from dsh_kernel.llm.secrets import REDACTOR

    trusted = str(setting_value("mcp_trusted", traits, env))
    idle = setting_value("mcp_idle_timeout", traits, env)
    state = (
        store_root / "mcp" if store_root is not None else Path(tempfile.mkdtemp(prefix="dsh-mcp-"))
    )
    servers = McpServers(
        notebook_dir=Path.cwd(),
        jupyter_dirs=[Path(p) for p in jupyter_config_path()],
        explicit=str(setting_value("mcp_config", traits, env)),
        state_dir=state,
        limits=CallLimits(idle_s=float(idle) if isinstance(idle, (int, float)) else 120.0),
        trusted=frozenset(n.strip() for n in trusted.split(",") if n.strip()),
        add_secret=REDACTOR.add,
    )
    asyncio.get_event_loop().call_soon(servers.start)
    return servers


async def before_turn(
    servers: McpServers,
    seconds: float,
    show: Callable[[str | None], None],
    interrupted: asyncio.Event | None = None,
) -> str | None:
    """See the module docstring (``interrupted``: ends the wait early)."""
    if not servers.starting:
        return None
    show("starting MCP servers… (" + ", ".join(servers.starting) + ")")
    try:
        late = await servers.wait_ready(seconds, interrupted)
    finally:
        show(None)
    servers.sync()
    if not late:
        return None
    why = (
        "not ready (the wait was interrupted)"
        if interrupted is not None and interrupted.is_set()
        else f"not ready after {seconds:g} s"
    )
    return (
        f"MCP: {', '.join(late)} {why}; this turn goes without "
        f"{'its' if len(late) == 1 else 'their'} tools (`%agent mcp` shows the state)"
    )


def status_text(servers: McpServers | None) -> str | None:
    """``%agent status``'s ``mcp:`` line (``None``: no line when nothing is configured)."""
    if servers is None or (not servers.servers and not servers.waiting and not servers.problems):
        return None
    by_state: dict[str, list[str]] = {}
    for name, server in sorted(servers.servers.items()):
        by_state.setdefault(server.state, []).append(name)
    parts = [f"{state}: {', '.join(names)}" for state, names in by_state.items()]
    if servers.waiting:
        parts.append(
            f"{sum(len(v.entries) for v in servers.waiting.values())} waiting for `%agent mcp allow`"
        )
    if servers.problems:
        parts.append(f"{len(servers.problems)} file problem(s)")
    return "; ".join(parts) + f"; {len(servers.offered)} tool(s) offered (`%agent mcp`)"
