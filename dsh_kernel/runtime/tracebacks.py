"""Short tracebacks for code runs: the user's frames, not ours.

``short_traceback(exc, filename)`` formats ``exc`` (and its ``__cause__`` / ``__context__`` chain,
three deep at most) the way Python does, but:

- the top exception's frames start at the run's own code (``filename``, the name the runner gave the
  source in ``linecache``): the runner, the private event loop and asyncio's task machinery above it
  are dropped; when the run's code is not on the stack at all (a ``SyntaxError``, or a signal that
  landed inside the event loop) only the exception lines remain;
- frames of ``dsh_kernel.runtime`` itself (the output writer, the timeout handler) are dropped;
- a stack deeper than 12 frames keeps the first 3 and the last 7, saying how many were omitted.

Frames inside libraries the code called (pandas, numpy, …) are the user's business and are kept.
``exception_message(exc)`` is the one-line ``"KeyError: 'x'"`` form, at most 300 characters.
"""

from __future__ import annotations

import os
import traceback
from types import TracebackType
from typing import Final

from dsh_kernel.runtime.text import clean_text

_RUNTIME_DIR: Final = os.path.dirname(os.path.abspath(__file__)) + os.sep
_MAX_FRAMES: Final = 12
_HEAD: Final = 3
_TAIL: Final = 7
_MAX_CHAIN: Final = 3
_MAX_MESSAGE: Final = 300

_CAUSE: Final = "\nThe above exception was the direct cause of the following exception:\n\n"
_CONTEXT: Final = "\nDuring handling of the above exception, another exception occurred:\n\n"


def exception_message(exc: BaseException) -> str:
    """``Name: message`` for ``exc`` (a ``SyntaxError`` with its line)."""
    name = type(exc).__name__
    if isinstance(exc, SyntaxError):
        where = f" (line {exc.lineno})" if exc.lineno is not None else ""
        return f"{name}: {exc.msg}{where}"
    try:
        text = str(exc)
    except Exception:
        text = "<the exception's str() failed>"
    first = text.strip().splitlines()[0] if text.strip() else ""
    message = f"{name}: {first}" if first else name
    message = clean_text(message)
    return message if len(message) <= _MAX_MESSAGE else message[: _MAX_MESSAGE - 1] + "…"


def short_traceback(exc: BaseException, filename: str) -> str | None:
    """The traceback of ``exc`` from the run's code in ``filename`` on (module docstring); ``None`` if empty."""
    text = clean_text("".join(_format_chain(exc, filename, depth=0, seen=set())))
    return text or None


def _format_chain(exc: BaseException, filename: str, *, depth: int, seen: set[int]) -> list[str]:
    seen.add(id(exc))
    lines: list[str] = []
    if depth < _MAX_CHAIN:
        cause = exc.__cause__
        context = None if exc.__suppress_context__ else exc.__context__
        if cause is not None and id(cause) not in seen:
            lines += _format_chain(cause, filename, depth=depth + 1, seen=seen)
            lines.append(_CAUSE)
        elif context is not None and id(context) not in seen:
            lines += _format_chain(context, filename, depth=depth + 1, seen=seen)
            lines.append(_CONTEXT)
    lines += _format_one(exc, filename, top=depth == 0)
    return lines


def _format_one(exc: BaseException, filename: str, *, top: bool) -> list[str]:
    frames = _user_frames(exc.__traceback__, filename, top=top)
    lines: list[str] = []
    if frames:
        lines.append("Traceback (most recent call last):\n")
        if len(frames) > _MAX_FRAMES:
            omitted = len(frames) - _HEAD - _TAIL
            lines += _format_frames(frames[:_HEAD])
            lines.append(f"  ... {omitted} frames omitted ...\n")
            lines += _format_frames(frames[-_TAIL:])
        else:
            lines += _format_frames(frames)
    lines += traceback.format_exception_only(type(exc), exc)
    return lines


def _format_frames(frames: list[TracebackType]) -> list[str]:
    summary = traceback.StackSummary.extract(
        ((t.tb_frame, t.tb_lineno) for t in frames), lookup_lines=True
    )
    return summary.format()


def _user_frames(tb: TracebackType | None, filename: str, *, top: bool) -> list[TracebackType]:
    entries: list[TracebackType] = []
    while tb is not None:
        entries.append(tb)
        tb = tb.tb_next
    start = next(
        (i for i, t in enumerate(entries) if t.tb_frame.f_code.co_filename == filename), None
    )
    if start is not None:
        entries = entries[start:]
    elif top:
        return []
    return [t for t in entries if not t.tb_frame.f_code.co_filename.startswith(_RUNTIME_DIR)]
