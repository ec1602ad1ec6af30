"""``%agent context`` and the context window's lines in ``%agent status``.

The window itself is ``agent.request.window``'s: the host keeps one ``ContextWindows`` for every session of
the kernel (``AgentHost.windows``), so a window set here — like ``DSH_CONTEXT_WINDOW`` and
``c.DshKernel.context_window`` at start — stays for ``%agent new``, ``resume`` and ``fork`` until
``%agent context default`` clears it. Nothing here asks the server: the texts say what is known now
(``; asking the server`` while a lookup runs), and setting or clearing a window starts the lookup
again in the background when the route needs one.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from dsh_kernel.agent.request.meter import measure
from dsh_kernel.errors import UsageError
from dsh_kernel.kernel.host.settings import parse_context_window

if TYPE_CHECKING:
    from dsh_kernel.kernel.host.agent_host import AgentHost

USAGE = "usage: %agent context [<tokens>|default] (e.g. %agent context 8192)"


def window_text(host: AgentHost) -> str:
    """The current route's window and where it came from: ``8,192 tokens (discovered from /props)``."""
    agent = host.agent
    window = host.windows.current(agent.provider, agent.model)
    if window is None:
        return "not known (this model does not say)"
    text = window.describe()
    if host.windows.asking(agent.provider, agent.model):
        text += "; asking the server"
    return text


def context_text(host: AgentHost) -> str:
    """How much of the window the session's history uses (the meter's reading, calibrated as the
    next request would be: what this kernel learned of the route, else what the log last used)."""
    agent = host.agent
    window = host.windows.current(agent.provider, agent.model)
    learned = agent.calibration()
    return measure(
        agent.session,
        context_window=window.tokens if window else None,
        calibration=learned if learned.calibrated else None,
    ).describe()


def context_command(host: AgentHost, args: list[str]) -> str:
    """Carry out ``%agent context [<tokens>|default]``."""
    if len(args) > 1:
        raise UsageError(USAGE)
    if args:
        tokens = parse_context_window(args[0])
        host.windows.configured = tokens
        host.settings = replace(host.settings, context_window=tokens)
        host.windows.prefetch(host.agent.provider, host.agent.model)
    return "context window: " + window_text(host)
