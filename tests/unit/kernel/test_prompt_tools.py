"""`` &`fn` `` in a chat message: a plain function, an ``@tool`` function and a ``ToolDefinition`` are
all offered to the model for that message (notebook 05 shows the first two); anything else is one
line saying what is wrong."""

from __future__ import annotations

import pytest

from dsh_kernel import tool
from dsh_kernel.kernel.chat_input import PromptError, expand_prompt


def convert(amount: float, rate: float) -> float:
    """Convert an amount at a rate."""
    return amount * rate


def test_a_plain_function_a_tool_function_and_a_definition_are_all_offered() -> None:
    prompt = expand_prompt("Use &`f`.", {"f": convert})
    assert prompt is not None
    assert [t.name for t in prompt.tools] == ["convert"]
    assert "(offered to you as the tool `convert`)" in prompt.message.text()
    assert not hasattr(convert, "tool_definition")  # offering a function leaves it as it was

    def rate(amount: float, rate: float) -> float:
        """Convert an amount at a rate."""
        return amount * rate

    fx = tool(name="fx", read_only=True)(rate)
    for value in (fx, fx.tool_definition):  # the attached definition, its name and flags
        prompt = expand_prompt("Use &`f`.", {"f": value})
        assert prompt is not None
        assert [(t.name, t.read_only) for t in prompt.tools] == [("fx", True)]
        assert "(offered to you as the tool `fx`)" in prompt.message.text()


def test_a_value_that_is_neither_is_refused_in_one_line() -> None:
    with pytest.raises(PromptError, match=r"'n' is a int, not a function"):
        expand_prompt("Use &`n`.", {"n": 3})


def test_an_error_names_the_sigil_the_user_wrote() -> None:
    with pytest.raises(PromptError) as tool_ref:
        expand_prompt("Use &`undefined`.", {})
    assert str(tool_ref.value).startswith("&`undefined`: there is no variable 'undefined'")
    with pytest.raises(PromptError) as tool_expr:
        expand_prompt("Use &`tools[0]`.", {"tools": []})
    assert str(tool_expr.value).startswith("&`tools[0]` could not be evaluated: IndexError")
    with pytest.raises(PromptError) as value_ref:
        expand_prompt("See $`undefined`.", {})
    assert str(value_ref.value).startswith("$`undefined`: there is no variable 'undefined'")


def test_a_reference_to_the_environment_inserts_its_names_not_its_values(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import os

    secret = "hub-token-Zc4Mw9Qs2Ke7Ya1"
    monkeypatch.setenv("JUPYTERHUB_API_TOKEN", secret)
    prompt = expand_prompt("Which variables are set? $`os.environ`", {"os": os})
    assert prompt is not None
    text = str(prompt.message.content[0])
    assert "JUPYTERHUB_API_TOKEN" in text and secret not in text
    # a value the user takes out of it is theirs to send
    prompt = expand_prompt("Is it $`os.getenv('JUPYTERHUB_API_TOKEN')`?", {"os": os})
    assert prompt is not None and secret in str(prompt.message.content[0])
