"""The tool registry: which tools exist, which are visible, and in what order the model sees them.

A registry is a scope. ``child()`` makes a nested scope (one per agent) whose registrations shadow the
parent's; the parent's later registrations stay visible through the child unless shadowed. Every
mutation returns a disposer (idempotent) that undoes exactly that mutation.

Visibility: a tool is visible from a scope when every ``restrict(allow, deny)`` filter of that scope
and of its ancestors lets it through — filters only ever intersect. An invisible tool is unknown to
``get``, absent from ``schemas`` and answered ``UNKNOWN_TOOL`` by the pipeline.

Guards (``guard(fn)``) are synchronous checks run by the pipeline after approval: ``fn(call, args)``
returns a denial reason or ``None``. They are monotonic — a guard can deny, never allow — so the
order they run in does not change the outcome (the first denial, ancestors first, is reported).

Order: ``schemas()`` lists the configured ``tool_order`` names first (in that order), then the rest
lexicographically, so the tool list stays byte-stable for the provider's prompt cache.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass

from dsh_kernel.errors import UsageError
from dsh_kernel.jsonvalue import JsonValue
from dsh_kernel.llm.types import ToolSchema
from dsh_kernel.tools.types import (
    RESERVED_TOOL_NAMES,
    ToolCall,
    ToolDefinition,
    ToolLike,
    definition_of,
)

Guard = Callable[[ToolCall, JsonValue], "str | None"]
Disposer = Callable[[], None]


@dataclass(frozen=True, slots=True)
class _Filter:
    allow: frozenset[str] | None
    deny: frozenset[str]

    def admits(self, name: str) -> bool:
        return (self.allow is None or name in self.allow) and name not in self.deny


class ToolRegistry:
    """One scope of tools (module docstring); every mutation returns its disposer."""

    def __init__(
        self, *, tool_order: Sequence[str] | None = None, parent: ToolRegistry | None = None
    ) -> None:
        self._parent = parent
        self._own_order = tuple(tool_order) if tool_order is not None else None
        self._tools: dict[str, ToolDefinition] = {}
        self._filters: list[_Filter] = []
        self._guards: list[Guard] = []

    # -- mutation -----------------------------------------------------------------------------------

    def register(self, tool: ToolLike, *, reserved: bool = False) -> Disposer:
        """Add ``tool`` (a ``ToolDefinition`` or an ``@tool`` function) to this scope. A name already
        registered *in this scope* is a ``UsageError``; the same name in an ancestor is shadowed.
        ``reserved=True`` is for the built-in Code Mode tool only (``run_code`` is a reserved
        name)."""
        defn = definition_of(tool)
        if defn.name in RESERVED_TOOL_NAMES and not reserved:
            raise UsageError(f"tool name {defn.name!r} is reserved")
        if defn.name in self._tools:
            raise UsageError(f"a tool named {defn.name!r} is already registered in this scope")
        self._tools[defn.name] = defn

        def dispose() -> None:
            if self._tools.get(defn.name) is defn:
                del self._tools[defn.name]

        return dispose

    def child(self, *, tool_order: Sequence[str] | None = None) -> ToolRegistry:
        """A nested scope: its registrations shadow ours, our filters and guards apply to it."""
        return ToolRegistry(tool_order=tool_order, parent=self)

    def restrict(
        self, allow: Iterable[str] | None = None, deny: Iterable[str] | None = None
    ) -> Disposer:
        """Hide tools from this scope (and its children): only ``allow`` (when given), never ``deny``."""
        f = _Filter(
            allow=frozenset(allow) if allow is not None else None, deny=frozenset(deny or ())
        )
        self._filters.append(f)
        return _remover(self._filters, f)

    def guard(self, fn: Guard) -> Disposer:
        self._guards.append(fn)
        return _remover(self._guards, fn)

    # -- lookup -------------------------------------------------------------------------------------

    @property
    def tool_order(self) -> tuple[str, ...]:
        if self._own_order is not None:
            return self._own_order
        return self._parent.tool_order if self._parent is not None else ()

    def _visible(self, name: str) -> bool:
        scope: ToolRegistry | None = self
        while scope is not None:
            if not all(f.admits(name) for f in scope._filters):
                return False
            scope = scope._parent
        return True

    def _resolve(self, name: str) -> ToolDefinition | None:
        scope: ToolRegistry | None = self
        while scope is not None:
            defn = scope._tools.get(name)
            if defn is not None:
                return defn
            scope = scope._parent
        return None

    def get(self, name: str) -> ToolDefinition | None:
        """The visible tool called ``name`` (the innermost registration), or ``None``."""
        return self._resolve(name) if self._visible(name) else None

    def names(self) -> tuple[str, ...]:
        """Visible tool names, in schema order."""
        all_names: set[str] = set()
        scope: ToolRegistry | None = self
        while scope is not None:
            all_names.update(scope._tools)
            scope = scope._parent
        visible = {n for n in all_names if self._visible(n)}
        first = [n for n in dict.fromkeys(self.tool_order) if n in visible]
        return (*first, *sorted(visible - set(first)))

    def definitions(self) -> tuple[ToolDefinition, ...]:
        out: list[ToolDefinition] = []
        for n in self.names():
            defn = self._resolve(n)
            assert defn is not None
            out.append(defn)
        return tuple(out)

    def schemas(self, *, lean: bool = False, named: Collection[str] = ()) -> tuple[ToolSchema, ...]:
        """What the model is told: name, description and parameters of each visible tool — their
        lean form (``ToolDefinition.lean_schema``) when ``lean``, where a tool that is offered lean
        only when named (``ToolDefinition.lean_when_named``) is left out unless it is in ``named``
        (the tools the turn's user message names: ``agent.request.step.tools_named``)."""
        if not lean:
            return tuple(d.schema for d in self.definitions())
        return tuple(
            d.lean_schema for d in self.definitions() if not d.lean_when_named or d.name in named
        )

    def check_guards(self, call: ToolCall, args: JsonValue) -> str | None:
        """The first denial reason of the guards in scope (ancestors first), or ``None``."""
        chain: list[ToolRegistry] = []
        scope: ToolRegistry | None = self
        while scope is not None:
            chain.append(scope)
            scope = scope._parent
        for s in reversed(chain):
            for fn in list(s._guards):
                reason = fn(call, args)
                if reason is not None:
                    return reason
        return None


def _remover(items: list[object] | list[_Filter] | list[Guard], item: object) -> Disposer:
    done = False

    def dispose() -> None:
        nonlocal done
        if done:
            return
        done = True
        for i, x in enumerate(items):
            if x is item:
                del items[i]
                return

    return dispose
