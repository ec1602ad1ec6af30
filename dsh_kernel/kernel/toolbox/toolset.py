"""The notebook's choice of tools: which are switched off, and in which form they are sent.

``%agent tools off <name>`` hides a tool from the agent (it is not offered, and a call to it is
``UNKNOWN_TOOL``); ``%agent tools on <name>`` offers it again; ``%agent tools lean|full|auto`` picks
the form of the tool list (``dsh_kernel.tools.lean``: ``auto`` sends the lean form when the model's
context window is under ``LEAN_BELOW`` tokens). The choice belongs to the kernel, not to one session:
``%agent new``, ``resume`` and ``fork`` keep it (``apply`` re-applies it to each new agent). What the
model was offered is in every request's logged header, so the log shows the choice's effect. The
AI policy (``kernel.course.policy``) filters on top of this choice: a tool switched on that the policy
withholds stays withheld, and the line says so.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from dsh_kernel.agent.agent import Agent
from dsh_kernel.errors import UsageError
from dsh_kernel.tools.lean import LEAN_BELOW, TOOL_SCHEMA_FORMS, ToolSchemaForm, lean_for

USAGE = "usage: %agent tools [on|off <name> | lean|full|auto]"


@dataclass(slots=True)
class ToolSet:
    """The kernel's tool choice (module docstring)."""

    off: set[str] = field(default_factory=lambda: set[str]())
    form: ToolSchemaForm = "auto"
    after: Callable[[Agent], object] | None = None
    """Run after every ``apply``: the AI policy's own filter, recomputed over this choice."""
    _undo: Callable[[], None] | None = None

    def apply(self, agent: Agent) -> None:
        """Make ``agent`` offer what this choice says (replacing what it applied before)."""
        if self._undo is not None:
            self._undo()
            self._undo = None
        if self.off:
            self._undo = agent.registry.restrict(deny=self.off)
        agent.tool_schemas = self.form
        if self.after is not None:
            self.after(agent)

    def command(self, agent: Agent, args: list[str]) -> str | None:
        """Carry out ``%agent tools <args>``; ``None`` for the bare listing."""
        if not args:
            return None
        if len(args) == 1 and args[0] in TOOL_SCHEMA_FORMS:
            self.form = args[0]
            self.apply(agent)
            return f"tool descriptions: {self.form_text(agent)}"
        if len(args) != 2 or args[0] not in ("on", "off"):
            raise UsageError(USAGE)
        switch, name = args
        if switch == "off":
            if agent.registry.get(name) is None:
                raise UsageError(
                    f"no tool named {name!r} is offered; tools: {', '.join(agent.registry.names())}"
                )
            self.off.add(name)
        else:
            if name not in self.off:
                policy = agent.session.header.ai_policy
                if agent.registry.get(name) is None and policy in ("explain", "off"):
                    raise UsageError(
                        f"tool {name!r} is not switched off: the AI policy in force ({policy}) "
                        "withholds it, and `%agent tools` cannot bring it back (`%agent status` "
                        "says where the policy comes from)"
                    )
                raise UsageError(
                    f"tool {name!r} is not switched off"
                    + (f"; off: {', '.join(sorted(self.off))}" if self.off else "")
                )
            self.off.discard(name)
        self.apply(agent)
        withheld = (
            f" ({name} stays withheld by the AI policy in force: `%agent status` says which)"
            if switch == "on" and agent.registry.get(name) is None
            else ""
        )
        offered = ", ".join(agent.registry.names()) or "no tools"
        return f"tool {name} {switch}; the agent is offered: {offered}{withheld}"

    def named_only_text(self, agent: Agent) -> str:
        """A line naming the tools the lean set offers only in a turn whose message names them
        (``ToolDefinition.lean_when_named``), when the set is lean and there are any; else ``""``."""
        if not lean_for(agent.tool_schemas, agent.windows.current(agent.provider, agent.model)):
            return ""
        named = [d.name for d in agent.registry.definitions() if d.lean_when_named]
        if not named:
            return ""
        return f"\nlean set: {', '.join(named)} only in a turn whose message names them"

    def form_text(self, agent: Agent) -> str:
        """``lean (auto: window 4,096 < 16,384 tokens)``, ``full``, …"""
        found = agent.windows.current(agent.provider, agent.model)
        window = found.tokens if found is not None else None
        lean = lean_for(agent.tool_schemas, found)
        text = "lean" if lean else "full"
        if self.form != "auto":
            return f"{text} (set by %agent tools {self.form})"
        if window is None:
            return f"{text} (auto: the model's context window is unknown)"
        sign = "<" if lean else "≥"
        assumed = " assumed" if found is not None and found.source == "default" else ""
        return f"{text} (auto: window {window:,}{assumed} {sign} {LEAN_BELOW:,} tokens)"
