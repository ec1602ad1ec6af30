"""``%agent`` argument splitting (free text with apostrophes, quoted words, flags) and the error a
failed command raises (its class, and so the cell's ``ename``, is the stable code)."""

from __future__ import annotations

import pytest

from dsh_kernel.errors import CommandError, DshError, command_error
from dsh_kernel.kernel.magic.args import split_args


@pytest.mark.parametrize(
    ("line", "words"),
    [
        ("search don't", ["search", "don't"]),
        ("search it's won't", ["search", "it's", "won't"]),  # two apostrophes are not a quote
        ("search O'Brien's \"exact words\"", ["search", "O'Brien's", "exact words"]),
        ("search 'don't'", ["search", "don't"]),
        ("search 'like red'", ["search", "like red"]),
        ('export --md "my notes.md"', ["export", "--md", "my notes.md"]),
        ('export --out="a b.md"', ["export", "--out=a b.md"]),
        ('title a "lone quote', ["title", "a", '"lone', "quote"]),
        ("export C:\\data\\x.md", ["export", "C:\\data\\x.md"]),
        ("  resume   abc  ", ["resume", "abc"]),
        ("", []),
    ],
)
def test_split_args(line: str, words: list[str]) -> None:
    assert split_args(line) == words


def test_command_error_is_named_by_its_code() -> None:
    err = command_error("SESSION_NOT_FOUND", "%agent resume: no such session")
    assert type(err).__name__ == "SESSION_NOT_FOUND"  # IPython's ename is the class name
    assert isinstance(err, CommandError) and isinstance(err, DshError)
    assert err.code == "SESSION_NOT_FOUND" and str(err) == "%agent resume: no such session"
    assert err._render_traceback_() == ["SESSION_NOT_FOUND: %agent resume: no such session"]
    assert type(command_error("SESSION_NOT_FOUND", "again")) is type(err)
