"""How much text a tool result may carry back to the model.

Whatever a tool call produced — a result, an error from any layer, a refusal — is resent to the
model on every later request of the session, so the pipeline passes each outcome through
``capped(result)`` before it is logged:

* all of a result's text blocks together hold at most ``RESULT_TEXT_BYTES`` (100 kB) of UTF-8; a
  block that does not fit is cut by ``dsh_kernel.textcap.cap_text`` (head and tail around
  ``[N characters cut]``), and blocks after the budget is spent keep only a marker's worth;
* the failure message (``ToolResult.error.message``) is cut the same way.

The ``python`` tool keeps its own output under 64 KiB with its own marker, so this cap only ever cuts
what nothing else bounded (a 10 MB error message, a tool that returns a huge string). Non-text
blocks are left alone (images have their own byte cap). ``MAX_ARG_ERRORS`` bounds how many argument
problems one ``INVALID_ARGS`` message lists.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Final

from dsh_kernel.llm.types import ContentBlock, TextBlock
from dsh_kernel.textcap import cap_text
from dsh_kernel.tools.types import ToolFailure, ToolResult

RESULT_TEXT_BYTES: Final = 100_000
"""The most text one tool result carries to the model (all its text blocks together)."""
MAX_ARG_ERRORS: Final = 10
"""The argument problems one ``INVALID_ARGS`` message names; the rest are counted."""


def capped(result: ToolResult) -> ToolResult:
    """``result`` with at most ``RESULT_TEXT_BYTES`` of text in all (each text block cut to what is
    left of the budget) and its failure message cut the same way; unchanged when it fits."""
    budget = RESULT_TEXT_BYTES
    content: list[ContentBlock] = []
    changed = False
    for block in result.content:
        if isinstance(block, TextBlock):
            text = cap_text(block.text, max(budget, 100))
            budget -= len(text.encode("utf-8", "surrogatepass"))
            if text is not block.text:
                changed = True
                block = TextBlock(text=text)
        content.append(block)
    error = result.error
    if error is not None:
        message = cap_text(error.message, RESULT_TEXT_BYTES)
        if message is not error.message:
            changed = True
            error = ToolFailure(message=message, name=error.name, code=error.code)
    if not changed:
        return result
    return replace(result, content=tuple(content), error=error)


def invalid_args_message(errors: list[str]) -> str:
    """The ``INVALID_ARGS`` text for validation ``errors``: the first ``MAX_ARG_ERRORS``, then a count."""
    shown = errors[:MAX_ARG_ERRORS]
    more = len(errors) - len(shown)
    tail = f"; and {more} more problem{'s' if more != 1 else ''}" if more else ""
    return "invalid arguments: " + "; ".join(shown) + tail
