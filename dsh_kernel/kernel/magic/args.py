"""The words of an ``%agent`` line (``split_args``): shell-like, but forgiving of free text.

An apostrophe inside a word is a letter (``%agent search don't`` searches for ``don't``), and quotes
group words only when they open a word and close at the end of one (``%agent export --md "my
notes.md"``). No line fails to parse.
"""

from __future__ import annotations


def split_args(line: str) -> list[str]:
    """The words of an ``%agent`` line: split at whitespace, like a shell but forgiving.

    A quote (``'`` or ``"``) groups words only when it opens a word (or follows ``=``) and a
    matching quote closes a word later on; the quotes are then dropped. Any other quote is an
    ordinary character, so free text (``don't``, ``O'Brien's``, a lone ``"``) never fails to parse.
    There are no escapes: a backslash is a character too (Windows paths survive)."""
    words: list[str] = []
    i, n = 0, len(line)
    while i < n:
        if line[i].isspace():
            i += 1
            continue
        word: list[str] = []
        while i < n and not line[i].isspace():
            ch = line[i]
            if ch in "'\"" and (not word or word[-1].endswith("=")):
                end = _closing_quote(line, ch, i + 1)
                if end is not None:
                    word.append(line[i + 1 : end])
                    i = end + 1
                    continue
            word.append(ch)
            i += 1
        words.append("".join(word))
    return words


def _closing_quote(line: str, quote: str, start: int) -> int | None:
    """The first ``quote`` at or after ``start`` that ends a word (whitespace or the end follows)."""
    at = line.find(quote, start)
    while at != -1:
        if at + 1 == len(line) or line[at + 1].isspace():
            return at
        at = line.find(quote, at + 1)
    return None
