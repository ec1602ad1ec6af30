"""Cell routing and prompt references (pure functions)."""

from __future__ import annotations

import pytest

from dsh_kernel.kernel.cells import classify, find_references, unescape


@pytest.mark.parametrize(
    ("code", "default", "kind", "body", "args"),
    [
        ("hello there", "chat", "chat", "hello there", ""),
        ("hello there", "python", "python", "hello there", ""),
        ("%%python\nx = 1", "chat", "python", "x = 1", ""),
        ("%%py\nx = 1", "chat", "python", "x = 1", ""),
        ("%%chat\nhi", "python", "chat", "hi", ""),
        ("%%chat\nhi", "chat", "chat", "hi", ""),
        ("%%sql\nSELECT 1", "chat", "sql", "SELECT 1", ""),
        ("%%sql result <<\nSELECT 1", "python", "sql", "SELECT 1", "result <<"),
        ("%agent status", "chat", "python", "%agent status", ""),
        (
            "%agent status\n%pip list\n# note",
            "chat",
            "python",
            "%agent status\n%pip list\n# note",
            "",
        ),
        ("!ls", "chat", "python", "!ls", ""),
        ("%%time\nx = 1", "chat", "python", "%%time\nx = 1", ""),
        ("\n\n%%sql\nSELECT 2", "chat", "sql", "SELECT 2", ""),
        ("what does %timeit do?", "chat", "chat", "what does %timeit do?", ""),
        ("# just a comment", "chat", "chat", "# just a comment", ""),
        # the magic's name ends at any whitespace, as the notebook_insert check reads it too
        ("%%chat\tsummarise df", "python", "chat", "", "summarise df"),
        ("%%chat\t\nhi", "python", "chat", "hi", ""),
        ("%%sql\tresult <<\nSELECT 1", "python", "sql", "SELECT 1", "result <<"),
        ("%%chat\u00a0hi", "python", "chat", "", "hi"),
        # blank lines and indentation before the magic, as IPython skips them
        (" \t\n  %%chat\nhi", "python", "chat", "hi", ""),
        ("\t%%sql\nSELECT 2", "chat", "sql", "SELECT 2", ""),
        ("%%chatter\nhi", "python", "python", "%%chatter\nhi", ""),
        ("%%chat.x\nhi", "python", "python", "%%chat.x\nhi", ""),
        ("%%\nhi", "chat", "chat", "%%\nhi", ""),
    ],
)
def test_classify(code: str, default: str, kind: str, body: str, args: str) -> None:
    cell = classify(code, default)  # type: ignore[arg-type]
    assert (cell.kind, cell.body, cell.args) == (kind, body, args)


def test_python_magic_in_python_kernel_is_plain_python() -> None:
    # In the dsh-python kernel %%python is not special; IPython would report it as unknown.
    assert classify("%%python\nx=1", "python").body == "%%python\nx=1"


def test_references() -> None:
    text = r"Compare $`df` with $`df.head(2)` and use &`fit`; it costs $5 and \$`not_me`."
    refs = find_references(text)
    assert [(r.sigil, r.expr) for r in refs] == [("$", "df"), ("$", "df.head(2)"), ("&", "fit")]
    assert unescape(r"keep \$`x` literal") == "keep $`x` literal"


def test_bare_dollar_is_never_touched() -> None:
    assert find_references("price: $5, shell: echo $HOME, `code` and $ `x`") == []
