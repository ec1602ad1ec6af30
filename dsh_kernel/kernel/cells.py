"""Cell routing and prompt syntax — pure functions, no kernel state.

Routing (ARCHITECTURE §2):

==================  =====================  =============================================
kernelspec          a plain cell is        other cells
==================  =====================  =============================================
``dsh``             a message (chat)       ``%%python`` / ``%%py`` → Python, ``%%sql`` → SQL
``dsh-python``      Python                 ``%%chat`` → a message, ``%%sql`` → SQL
==================  =====================  =============================================

In both, ``%%chat`` is a message and a cell made only of line magics / shell escapes / comments
(``%agent status``, ``%pip install x``, ``!ls``) is handled by IPython. Any other ``%%magic`` cell is
IPython's (so ``%%time``, ``%%writefile`` … keep working).

Prompt syntax (Solveit-compatible): ``$`expr``` inserts a description of a namespace value;
``&`fn``` offers a notebook function as a tool for this message. A bare ``$`` (prices, shell
snippets) is never touched, and a backslash escapes the sigil (``\\$`x```) .
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal, TypeAlias

CellKind: TypeAlias = Literal["chat", "python", "sql"]
DefaultCell: TypeAlias = Literal["chat", "python"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Cell:
    """One routed cell: its kind and the text that kind runs."""

    kind: CellKind
    body: str
    """The cell without its routing magic line."""
    args: str = ""
    """Whatever followed the routing magic on its line (e.g. ``%%sql result <<``)."""


_MAGIC_LINE = re.compile(r"^%%([A-Za-z_][\w-]*)[ \t]*(.*)$")


def _only_line_magics(code: str) -> bool:
    lines = [ln.strip() for ln in code.splitlines() if ln.strip()]
    return (
        bool(lines)
        and all(ln.startswith(("%", "!", "#")) and not ln.startswith("%%") for ln in lines)
        and any(ln.startswith(("%", "!")) for ln in lines)
    )


def classify(code: str, default: DefaultCell) -> Cell:
    """Decide how a cell runs. Leading blank lines before a ``%%magic`` are ignored."""
    stripped = code.lstrip("\n")
    first, _, rest = stripped.partition("\n")
    m = _MAGIC_LINE.match(first.rstrip())
    if m is not None:
        name, args = m.group(1), m.group(2).strip()
        if name == "chat":
            return Cell(kind="chat", body=rest, args=args)
        if name == "sql":
            return Cell(kind="sql", body=rest, args=args)
        if name in ("python", "py") and default == "chat":
            return Cell(kind="python", body=rest, args=args)
        return Cell(kind="python", body=code)
    if default == "python" or _only_line_magics(code):
        return Cell(kind="python", body=code)
    return Cell(kind="chat", body=code)


# --- prompt references ------------------------------------------------------------------------------

_REF = re.compile(r"(\\?)([$&])`([^`\n]+)`")


@dataclass(frozen=True, slots=True, kw_only=True)
class Reference:
    """One ``$`expr``` or ``&`expr``` in a prompt: its sigil, expression and span in the text."""

    sigil: Literal["$", "&"]
    expr: str
    start: int
    end: int


def find_references(text: str) -> list[Reference]:
    """``$`…``` and ``&`…``` references, in order; escaped ones (``\\$`x```) are skipped."""
    out: list[Reference] = []
    for m in _REF.finditer(text):
        if m.group(1):
            continue
        sigil = "$" if m.group(2) == "$" else "&"
        out.append(Reference(sigil=sigil, expr=m.group(3).strip(), start=m.start(), end=m.end()))
    return out


def unescape(text: str) -> str:
    """Drop the backslash of escaped references (``\\$`x``` → ``$`x```)."""
    return _REF.sub(lambda m: m.group(0)[1:] if m.group(1) else m.group(0), text)
