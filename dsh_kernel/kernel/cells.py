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

``classify`` is the one reading of what a cell is: the kernel routes with it, and
``notebook_insert`` checks the cells the agent writes with it (``kernel.toolbox.notebook``), so a
cell the check lets through is never routed as chat. Its first line is found as IPython finds a
cell magic's: blank (whitespace-only) lines before it are skipped and its indentation ignored. The
magic's name runs to the first whitespace of any kind — a space, a tab — and what follows is its
arguments (IPython itself splits at a space only, so ``%%chat<TAB>hi`` would be an unknown magic
there; here it is a chat cell, for the router and the check alike).

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


_MAGIC_LINE = re.compile(r"%%(\S+)(?:\s+(.*))?", re.DOTALL)


@dataclass(frozen=True, slots=True, kw_only=True)
class CellMagic:
    """The cell magic a cell starts with (``cell_magic``)."""

    name: str
    """``sql`` for ``%%sql``."""
    args: str
    """The rest of the magic's line, stripped."""
    body: str
    """The lines after the magic's line."""


def cell_magic(code: str) -> CellMagic | None:
    """The cell magic ``code`` starts with, found as the module docstring says; ``None`` when its
    first line that is not blank is not a ``%%name`` line."""
    lines = code.split("\n")
    at = next((i for i, line in enumerate(lines) if line.strip()), None)
    if at is None:
        return None
    m = _MAGIC_LINE.fullmatch(lines[at].strip())
    if m is None:
        return None
    return CellMagic(
        name=m.group(1), args=(m.group(2) or "").strip(), body="\n".join(lines[at + 1 :])
    )


def _only_line_magics(code: str) -> bool:
    lines = [ln.strip() for ln in code.splitlines() if ln.strip()]
    return (
        bool(lines)
        and all(ln.startswith(("%", "!", "#")) and not ln.startswith("%%") for ln in lines)
        and any(ln.startswith(("%", "!")) for ln in lines)
    )


def classify(code: str, default: DefaultCell) -> Cell:
    """Decide how a cell runs (module docstring)."""
    magic = cell_magic(code)
    if magic is not None:
        if magic.name == "chat":
            return Cell(kind="chat", body=magic.body, args=magic.args)
        if magic.name == "sql":
            return Cell(kind="sql", body=magic.body, args=magic.args)
        if magic.name in ("python", "py") and default == "chat":
            return Cell(kind="python", body=magic.body, args=magic.args)
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
