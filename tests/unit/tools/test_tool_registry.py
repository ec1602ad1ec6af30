"""ToolRegistry: disposers, scoped shadowing, restrict/guard, deterministic order."""

from __future__ import annotations

import pytest

from dsh_kernel.errors import UsageError
from dsh_kernel.ids import CallId
from dsh_kernel.jsonvalue import JsonObject, JsonValue
from dsh_kernel.tools import ToolCall, ToolContext, ToolDefinition, ToolRegistry


def make(name: str, description: str = "d") -> ToolDefinition:
    def execute(args: JsonObject, ctx: ToolContext) -> JsonValue:
        return name

    return ToolDefinition(
        name=name,
        description=description,
        parameters={"type": "object", "properties": {}},
        execute=execute,
    )


CALL = ToolCall(call_id=CallId("c"), name="x", arguments="{}")


def test_register_and_dispose() -> None:
    reg = ToolRegistry()
    a = make("a")
    dispose = reg.register(a)
    assert reg.get("a") is a
    with pytest.raises(UsageError, match="already registered"):
        reg.register(make("a"))
    dispose()
    dispose()  # idempotent
    assert reg.get("a") is None
    reg.register(make("a"))  # the name is free again
    assert reg.names() == ("a",)


def test_disposer_does_not_remove_a_later_registration() -> None:
    reg = ToolRegistry()
    dispose = reg.register(make("a"))
    dispose()
    newer = make("a", "newer")
    reg.register(newer)
    dispose()
    assert reg.get("a") is newer


def test_reserved_name() -> None:
    reg = ToolRegistry()
    with pytest.raises(UsageError, match="reserved"):
        reg.register(make("run_code"))
    reg.register(make("run_code"), reserved=True)
    assert reg.names() == ("run_code",)


def test_child_scope_shadows_parent_and_sees_later_parent_tools() -> None:
    parent = ToolRegistry()
    parent.register(make("a", "parent"))
    child = parent.child()
    mine = make("a", "child")
    dispose = child.register(mine)
    assert child.get("a") is mine
    assert parent.get("a") is not None and parent.get("a") is not mine
    parent.register(make("b"))
    assert child.names() == ("a", "b")
    assert parent.names() == ("a", "b")
    dispose()
    assert child.get("a") is parent.get("a")


def test_restrict_filters_intersect_across_scopes() -> None:
    parent = ToolRegistry()
    for n in ("a", "b", "c", "d"):
        parent.register(make(n))
    child = parent.child()
    undo_allow = parent.restrict(allow=["a", "b", "c"])
    child.restrict(allow=["b", "c", "d"], deny=["c"])
    assert parent.names() == ("a", "b", "c")
    assert child.names() == ("b",)
    assert child.get("a") is None and child.get("c") is None and child.get("d") is None
    assert [s.name for s in child.schemas()] == ["b"]
    undo_allow()
    assert child.names() == ("b", "d")
    assert parent.names() == ("a", "b", "c", "d")


def test_guards_deny_and_are_disposable() -> None:
    parent = ToolRegistry()
    child = parent.child()
    seen: list[str] = []

    def no_x(call: ToolCall, args: JsonValue) -> str | None:
        seen.append("parent")
        return "x is off limits" if call.name == "x" else None

    def child_guard(call: ToolCall, args: JsonValue) -> str | None:
        seen.append("child")
        return "child says no" if args == {"bad": True} else None

    undo = parent.guard(no_x)
    child.guard(child_guard)
    assert child.check_guards(CALL, {}) == "x is off limits"
    assert seen == ["parent"]  # ancestors first, first denial wins
    assert child.check_guards(CALL, {"bad": True}) == "x is off limits"
    undo()
    assert child.check_guards(CALL, {"bad": True}) == "child says no"
    assert child.check_guards(CALL, {}) is None
    assert parent.check_guards(CALL, {"bad": True}) is None


def test_schema_order_is_configured_then_lexicographic() -> None:
    reg = ToolRegistry(tool_order=["python", "missing", "ask"])
    for n in ("zeta", "ask", "alpha", "python", "Beta"):
        reg.register(make(n, f"about {n}"))
    assert reg.names() == ("python", "ask", "Beta", "alpha", "zeta")
    schemas = reg.schemas()
    assert [s.name for s in schemas] == list(reg.names())
    assert schemas[0].description == "about python"
    assert schemas[0].parameters == {"type": "object", "properties": {}}
    child = reg.child()
    child.register(make("aaa"))
    assert child.names() == ("python", "ask", "Beta", "aaa", "alpha", "zeta")
    assert reg.child(tool_order=["zeta"]).names()[0] == "zeta"
