"""``%agent compact`` and compaction's line in ``%agent status``.

The compaction itself is the agent's (``dsh_kernel.agent.compaction.run``); this module is what the
kernel adds to it:

* **by hand** — a cell that is exactly ``%agent compact`` compacts the history now, between turns
  (``Agent.compact``), and prints the one line of what it did (``compacted 4 earlier turns (~9,812 →
  ~1,240 tokens)``), or ``nothing to compact: <why>``. The compaction may wait for a model's summary,
  so it is awaited on the kernel's loop: the kernel routes the cell here (``is_compact_cell``,
  ``compact_cell``) rather than through IPython, whose line magics cannot await; the Jupyter
  interrupt stops it (``ABORTED``; the history is unchanged). It is logged like every ``%agent``
  command (``command/run`` … ``command/done``). Anywhere else (beside other lines, inside Python
  code) ``%agent compact`` fails with one line saying to give it a cell of its own.
* **the automatic one** — ``%agent compact on|off`` (through the line magic, ``compact_command``);
  at start ``DSH_COMPACTION`` over ``c.DshKernel.compaction`` (``settings.parse_compaction``). The setting is
  the host's: every new agent of the kernel gets it (``%agent new``, ``resume``, ``fork``).
* ``compaction_text`` — the ``%agent status`` line: on or off, when it acts, and how many times this
  session was compacted.

A failed compaction fails its cell with the stable code (``USAGE`` when the agent is busy or
another compaction holds the lock) and ``%agent compact: <what happened>``.
"""

from __future__ import annotations

import asyncio
import re
from dataclasses import replace
from typing import TYPE_CHECKING, Final

from dsh_kernel.errors import DshError, UsageError
from dsh_kernel.ids import new_command_id
from dsh_kernel.session.payloads import CommandDone, CommandRun

if TYPE_CHECKING:
    from dsh_kernel.kernel.host.agent_host import AgentHost

USAGE: Final = (
    "usage: %agent compact (compact the history now, in a cell of its own) or %agent compact "
    "on|off (the automatic compaction)"
)

_COMPACT_CELL: Final = re.compile(r"^%agent[ \t]+compact[ \t]*$")


def is_compact_cell(code: str) -> bool:
    """Whether the cell is exactly ``%agent compact`` (blank lines and ``#`` comments aside)."""
    lines = [
        ln.strip() for ln in code.splitlines() if ln.strip() and not ln.strip().startswith("#")
    ]
    return len(lines) == 1 and _COMPACT_CELL.match(lines[0]) is not None


def compact_command(host: AgentHost, args: list[str]) -> str:
    """Carry out ``%agent compact on|off`` (the line magic's part: see the module docstring)."""
    if not args:
        raise UsageError(
            "give `%agent compact` a cell of its own (it waits for the model's summary); "
            "`%agent compact on|off` switches the automatic compaction"
        )
    if len(args) != 1 or args[0].lower() not in ("on", "off"):
        raise UsageError(USAGE)
    auto = args[0].lower() == "on"
    host.agent.compaction.auto = auto
    host.settings = replace(host.settings, compaction=auto)
    return "compaction: " + compaction_text(host)


async def compact_cell(host: AgentHost) -> str:
    """Compact the history now (the ``%agent compact`` cell); the line it prints. Raises a
    ``DshError`` (``USAGE``, or the failure's code) when it could not; ``CancelledError`` when
    interrupted. Either way the command is logged with its outcome."""
    agent = host.agent
    session = agent.session
    command_id = new_command_id()
    logged = agent.status == "idle"
    if logged:
        run = CommandRun(commandId=command_id, name="compact", source={"kind": "user"})
        session.append("command/run", run)
    kind, text = "error", ""
    try:
        if not logged:
            raise UsageError("the agent is answering: wait for its turn to end, then compact")
        result = await agent.compact()
        text = result.describe() if result is not None else "nothing to compact: " + _nothing(host)
        kind = "success"
        return text
    except asyncio.CancelledError:
        text = "stopped; the history is unchanged"
        raise
    except DshError as exc:
        text = exc.message
        raise
    except Exception as exc:
        text = f"{type(exc).__name__}: {exc}"
        raise
    finally:
        if logged:
            done = CommandDone(commandId=command_id, kind=kind)
            if text:
                done["text"] = text[:2000]
            session.append("command/done", done)


def _nothing(host: AgentHost) -> str:
    """Why a compaction by hand found nothing to replace (the engine's reasons)."""
    agent = host.agent
    window = host.windows.current(agent.provider, agent.model)
    return agent.compaction.why_nothing(
        window.tokens if window is not None else None, compacted=compactions(host) > 0
    )


def compaction_text(host: AgentHost) -> str:
    """Whether and when the history is compacted, and how often it was (``%agent status``)."""
    agent = host.agent
    settings = agent.compaction.settings
    window = host.windows.current(agent.provider, agent.model)
    if not agent.compaction.auto:
        text = "off (`%agent compact` compacts by hand; `%agent compact on` switches it back on)"
    elif window is None or window.source == "default":
        text = (
            "on, when the server refuses a request as too long (the window is not known, so "
            "nothing is compacted before that: set DSH_CONTEXT_WINDOW or `%agent context <tokens>`)"
        )
    else:
        text = f"on, at {settings.threshold:.0%} of the {window.tokens:,}-token window"
    times = compactions(host)
    if times:
        text += f"; compacted {times} time{'s' if times != 1 else ''} this session"
    return text


def compactions(host: AgentHost) -> int:
    """How many compactions changed this session's history (a summary or a cut tool output)."""
    ids: set[object] = set()
    for ev in host.agent.session.events:
        if ev.type in ("compaction/summary", "compaction/prune"):
            ids.add(ev.data.get("compactionId"))
    return len(ids)
