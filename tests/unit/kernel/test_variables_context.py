"""The runtime context's list of the notebook's variables (``kernel.chat_input.variables_context``)."""

from __future__ import annotations

from dataclasses import dataclass, field

from dsh_kernel.kernel.chat_input import variables_context


@dataclass
class Shell:
    user_ns_hidden: dict[str, object] = field(default_factory=dict)


def test_lists_the_users_names_with_type_and_not_what_ipython_put_there() -> None:
    ns: dict[str, object] = {"rows": [1, 2, 3], "open": open, "name": "x"}
    ctx = variables_context(ns, Shell(user_ns_hidden={"open": open}))
    assert ctx is not None
    assert ctx.name == "notebook variables"
    lines = ctx.text.splitlines()
    assert sorted(line.split(":")[0] for line in lines) == ["- name", "- rows"]
    assert all("open" not in line for line in lines)
    assert any(line.startswith("- rows: list") for line in lines)


def test_nothing_to_list_is_no_context_and_a_long_list_is_cut_at_forty() -> None:
    assert variables_context({}, None) is None
    assert variables_context({"open": open}, Shell(user_ns_hidden={"open": open})) is None
    ns: dict[str, object] = {f"v{i:02d}": i for i in range(45)}
    ctx = variables_context(ns, object())
    assert ctx is not None
    lines = ctx.text.splitlines()
    assert len(lines) == 41
    assert lines[-1] == "- … and 5 more (use the `inspect` tool)"
