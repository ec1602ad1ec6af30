"""`` &`fn` `` in a chat message: a plain function and a ``@tool`` definition are both offered to the
model for that message (notebook 05 shows both); anything else is one line saying what is wrong."""

from __future__ import annotations

import pytest

from dsh_kernel import tool
from dsh_kernel.kernel.prompt import PromptError, expand_prompt


def convert(amount: float, rate: float) -> float:
    """Convert an amount at a rate."""
    return amount * rate


def test_a_plain_function_and_a_tool_definition_are_both_offered() -> None:
    as_tool = tool(convert)
    for value in (convert, as_tool):
        prompt = expand_prompt("Use &`f`.", {"f": value})
        assert prompt is not None
        assert [t.name for t in prompt.tools] == ["convert"]
        assert "(offered to you as the tool `convert`)" in prompt.message.text()


def test_a_value_that_is_neither_is_refused_in_one_line() -> None:
    with pytest.raises(PromptError, match=r"'n' is a int, not a function"):
        expand_prompt("Use &`n`.", {"n": 3})
