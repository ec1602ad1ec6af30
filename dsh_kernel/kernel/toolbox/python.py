"""The agent's ``python`` and ``inspect`` tools, over a live namespace.

``python_tool(runner, on_interrupt=…, timeout_s=…, caps=…, images=…, live_output=…)`` — arguments
``{code, description?}``.
Not read-only, so the default approval policy asks first. Its body runs ``runner.run`` synchronously
on the calling thread (the pipeline calls a sync body on the loop thread: the kernel's main thread).
``live_output(call_id)`` (the kernel's: the running cell's view) may give a ``LiveTap`` that hears
the run's outputs as they are made (``runtime.capture``'s "Live output"), to show them while the
code runs; it is closed when the run ends. What the model receives does not depend on it.

- **Value** (execution-local): ``CodeRunResult.to_json()``.
- **Model text** (``render``): the run's outputs in order (stream text as written, rich outputs as
  their text or ``[image/png 640x480]``), then ``Out: <repr of the last expression>``, then a
  ``(namespace: added …; changed …)`` line; ``(no output)`` when there is nothing; at most
  ``caps.summary_bytes``, keeping the head and tail of long output around an explicit
  ``… [output truncated: N omitted] …`` marker. After the text block come the run's images, in
  order: one ``ImageBlock`` per PNG/JPEG/GIF/WebP display output (a figure shown or left open,
  ``display(Image(...))``, a PIL image as the last value), reduced by ``images``
  (``runtime.image_blocks``: at most ``images.per_call``, each downscaled and capped); the text ends
  with the runner's ``notes`` (e.g. open figures closed undrawn) and one ``[…not sent: …]`` line
  per reason an image was withheld. A failed run sends no images.
- **Card meta** (``presentation_meta``, lossless JSON): a ``runtime.types.PythonMeta`` — ``{"code",
  "description", "stdout", "stderr", "outputs" (rich outputs only: display_data / execute_result),
  "result" (the value repr), "failure" ({kind, message, traceback, ename} or null), "namesAdded",
  "namesChanged", "namesRemoved", "durationMs", "droppedBytes", "notes"}``; the card reads it back
  with ``read_python_meta``.
- **Failure**: the body raises ``CodeRunFailedError`` (code ``CODE_RUN_FAILED``) whose message is
  ``code run failed (<kind>): <message>``, the short traceback and ``Captured output:`` with the
  logs (same cap), and whose ``.meta`` is the card meta above. On an interrupt (the Jupyter
  interrupt, or the view's Stop) the body raises the ``abort`` failure with code ``ABORTED`` (the
  card and ``tool_calls.status`` say "aborted", not "failed"; the output so far is kept) and
  schedules ``on_interrupt()`` (the kernel cancels the turn) on the running loop, to run right after
  the call's result is recorded (called at once when no loop runs).
- ``present_call``: a generic ``execute`` card titled by ``description`` (or the code's first line)
  with the code as ``rawInput``. There is deliberately no result presenter: the card reads the meta.

``inspect_tool(namespace)`` — read-only, ``{name?}``: without a name, the variables (name, type,
shape, short repr; at most 200 rows); with one (or a dotted path like ``model.coef_``), its
``describe_value``. The path is resolved statically (``resolve_name``): no property or
``__getattr__`` runs, and private and special names (``_x``, ``__x__``) are refused, so this tool,
which runs without approval, cannot walk to a secret; the process environment (``os.environ``
and its kin) is described by its variable names only (``runtime.describe``). A missing name, a private name or a property
is ``INVALID_ARGS`` saying which (with close matches for a missing one).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Final, Protocol

from dsh_kernel.errors import ToolArgsError, ToolError
from dsh_kernel.jsonvalue import JsonObject, JsonValue
from dsh_kernel.llm.types import ContentBlock, TextBlock
from dsh_kernel.runtime.capture import OutputTap
from dsh_kernel.runtime.describe import (
    NameNotFound,
    describe_value,
    list_variables,
    resolve_name,
    type_name,
)
from dsh_kernel.runtime.image_blocks import output_image_blocks
from dsh_kernel.runtime.image_reduce import DEFAULT_IMAGE_CAPS, ImageCaps
from dsh_kernel.runtime.mime import summarize_output
from dsh_kernel.runtime.runner import CodeRunner
from dsh_kernel.runtime.text import fit_text, utf8_len
from dsh_kernel.runtime.types import (
    DEFAULT_CAPS,
    CodeRunResult,
    OutputCaps,
    python_meta,
    python_meta_json,
)
from dsh_kernel.tools.presentation import GenericCallView, ToolCallView
from dsh_kernel.tools.types import ABORTED, ToolContext, ToolDefinition, always_concurrent

_log = logging.getLogger(__name__)

CODE_RUN_FAILED: Final = "CODE_RUN_FAILED"
DEFAULT_TIMEOUT_S: Final = 120.0
MAX_LISTED_VARIABLES: Final = 200
_TITLE_CHARS: Final = 80
_NAMES_SHOWN: Final = 20


class LiveTap(OutputTap, Protocol):
    """An ``OutputTap`` for one run, closed when the run ends (it then shows nothing more)."""

    def close(self) -> None: ...


LiveOutputLookup = Callable[[str], LiveTap | None]
"""A call id → where that call's run shows its output live (``None``: nowhere)."""


class CodeRunFailedError(ToolError):
    """A ``python`` run that failed. ``meta`` is the card's JSON, for the pipeline to keep."""

    code = CODE_RUN_FAILED

    def __init__(self, message: str, *, meta: JsonValue = None, code: str | None = None) -> None:
        super().__init__(message, code=code)
        self.meta: JsonValue = meta


def _python_description(timeout_s: float | None) -> str:
    limit = (
        f" A run is stopped after {timeout_s:g} s (a timeout failure); the user can also interrupt it."
        if timeout_s is not None
        else " The user can interrupt a run."
    )
    return (
        "Run Python code in the user's live Jupyter notebook kernel. The code runs in the "
        "notebook's own namespace: the user's variables, imports and functions are available, and "
        "everything your code defines or changes stays there, shared with the user and with your "
        "later calls (state persists; do not overwrite the user's variables unless asked). "
        "Top-level `await` works. You get back what the code printed (stdout and stderr), a short "
        "text form of rich outputs (tables as text, images as e.g. [image/png 640x480]; the user "
        "sees them in full), the images it displayed (plots shown or left open; downscaled, a few "
        "per call), and the repr of the value of the last expression, as in a notebook "
        "cell; long output is truncated with an explicit marker, so print summaries rather than "
        "whole datasets. If the code raises, you get the exception with a short traceback and the "
        "output captured until then; changes made before the failure stay in the namespace." + limit
    )


def python_tool(
    runner: CodeRunner,
    *,
    on_interrupt: Callable[[], None] | None = None,
    timeout_s: float | None = DEFAULT_TIMEOUT_S,
    caps: OutputCaps = DEFAULT_CAPS,
    images: ImageCaps = DEFAULT_IMAGE_CAPS,
    live_output: LiveOutputLookup | None = None,
) -> ToolDefinition:
    def execute(args: JsonObject, ctx: ToolContext) -> JsonValue:
        # a synchronous run cannot be cancelled by ctx.signal; SIGINT stops it
        code = args.get("code")
        if not isinstance(code, str):
            raise ToolArgsError("invalid arguments: $.code: expected string")
        tap = _live_tap(live_output, ctx.call_id)
        try:
            result = runner.run(code, timeout_s=timeout_s, caps=caps, tap=tap)
        finally:
            if tap is not None:
                _close_tap(tap)
        if result.interrupted and on_interrupt is not None:
            _after_body(on_interrupt)
        value = result.to_json()
        if result.failure is not None:
            raise CodeRunFailedError(
                failure_text(result, caps),
                meta=run_meta(args, value),
                code=ABORTED if result.interrupted else None,
            )
        return value

    def render(args: JsonObject, value: JsonValue) -> tuple[ContentBlock, ...]:
        del args
        result = CodeRunResult.from_json(value)
        blocks, notes = output_image_blocks(result.display_outputs, images)
        ran = tuple(f"[{note}]" for note in result.notes)
        text = "\n".join((success_text(result, caps), *ran, *notes))
        return (TextBlock(text=text), *blocks)

    return ToolDefinition(
        name="python",
        description=_python_description(timeout_s),
        lean_description="Run Python in the notebook; state persists.",
        lean_parameters={
            "type": "object",
            "properties": {"code": {"type": "string"}},
            "required": ["code"],
            "additionalProperties": False,
        },
        parameters={
            "type": "object",
            "properties": {
                "code": {"type": "string", "description": "Python source to run."},
                "description": {
                    "type": "string",
                    "description": "A short title for this run, shown to the user (a few words).",
                },
            },
            "required": ["code"],
            "additionalProperties": False,
        },
        execute=execute,
        render=render,
        presentation_meta=run_meta,
        read_only=False,
        present_call=present_python_call,
    )


def _live_tap(lookup: LiveOutputLookup | None, call_id: str) -> LiveTap | None:
    """Where this call shows its output live; a failing lookup only costs the live view."""
    if lookup is None:
        return None
    try:
        return lookup(call_id)
    except Exception:
        _log.warning("live output lookup failed", exc_info=True)
        return None


def _close_tap(tap: LiveTap) -> None:
    try:
        tap.close()
    except Exception:
        _log.warning("closing the live output failed", exc_info=True)


def _after_body(callback: Callable[[], None]) -> None:
    """Run ``callback`` once the body has settled. Cancelling the turn from inside the body would
    cancel the call's own task while it runs, and asyncio then discards the task's result (the
    abort failure the model must see); scheduled right after, the result is committed first."""

    def safely() -> None:
        try:
            callback()
        except Exception:  # the interrupt is still reported as the run's outcome
            _log.warning("on_interrupt failed", exc_info=True)

    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:  # called outside any loop (plain-Python use): nothing to protect
        safely()
        return
    loop.call_soon(safely)


def present_python_call(args: JsonObject) -> ToolCallView:
    code = args.get("code")
    code_text = code if isinstance(code, str) else ""
    description = args.get("description")
    title = description.strip() if isinstance(description, str) else ""
    if not title:
        title = next((ln.strip() for ln in code_text.splitlines() if ln.strip()), "python")
    if len(title) > _TITLE_CHARS:
        title = title[: _TITLE_CHARS - 1] + "…"
    return GenericCallView(title=title, kind="execute", raw_input=code_text)


def run_meta(args: JsonObject, value: JsonValue) -> JsonValue:
    """The card's JSON for a run (``runtime.types.PythonMeta``, see the module docstring)."""
    code, description = args.get("code"), args.get("description")
    meta = python_meta(
        CodeRunResult.from_json(value),
        code=code if isinstance(code, str) else "",
        description=description if isinstance(description, str) else None,
    )
    return python_meta_json(meta)


# -- model text -------------------------------------------------------------------------------------


def _logs(result: CodeRunResult) -> str:
    parts: list[str] = []
    for output in result.outputs:
        if output.get("output_type") == "execute_result":
            continue  # the value is given as ``Out:``
        text = summarize_output(output)
        if not text:
            continue
        if parts and not parts[-1].endswith("\n") and output.get("output_type") != "stream":
            parts.append("\n")
        parts.append(text)
        if output.get("output_type") != "stream" and not text.endswith("\n"):
            parts.append("\n")
    return "".join(parts).rstrip("\n")


def _names_line(result: CodeRunResult) -> str:
    def names(label: str, items: tuple[str, ...]) -> str:
        shown = ", ".join(items[:_NAMES_SHOWN])
        more = f" and {len(items) - _NAMES_SHOWN} more" if len(items) > _NAMES_SHOWN else ""
        return f"{label} {shown}{more}"

    groups = [
        names(label, items)
        for label, items in (
            ("added", result.names_added),
            ("changed", result.names_changed),
            ("removed", result.names_removed),
        )
        if items
    ]
    return f"(namespace: {'; '.join(groups)})" if groups else ""


def success_text(result: CodeRunResult, caps: OutputCaps) -> str:
    """What the model reads for a completed run."""
    tail_parts: list[str] = []
    if result.value_repr is not None:
        tail_parts.append(f"Out: {result.value_repr}")
    names = _names_line(result)
    if names:
        tail_parts.append(names)
    tail = fit_text("\n".join(tail_parts), caps.summary_bytes // 2)
    logs = _logs(result)
    if not logs and result.value_repr is None:
        return "(no output)" + (f"\n{names}" if names else "")
    body = fit_text(logs, caps.summary_bytes - utf8_len(tail) - 1) if logs else ""
    return "\n".join(p for p in (body, tail) if p)


def failure_text(result: CodeRunResult, caps: OutputCaps) -> str:
    """The error text for a failed run: what failed, where, and the output captured until then."""
    failure = result.failure
    assert failure is not None
    head = f"code run failed ({failure.kind}): {failure.message}"
    if failure.traceback:
        head += "\n" + failure.traceback.rstrip("\n")
    head = fit_text(head, caps.summary_bytes // 2)
    names = _names_line(result)
    logs = _logs(result)
    room = caps.summary_bytes - utf8_len(head) - utf8_len(names) - 20
    captured = "Captured output:\n" + fit_text(logs, max(room, 0)) if logs else ""
    return "\n".join(p for p in (head, captured, names) if p)


# -- inspect ----------------------------------------------------------------------------------------


def inspect_tool(namespace: dict[str, object]) -> ToolDefinition:
    def execute(args: JsonObject, ctx: ToolContext) -> JsonValue:
        del ctx
        name = args.get("name")
        if name is None or (isinstance(name, str) and not name.strip()):
            rows = list_variables(namespace)
            return {
                "variables": [r.to_json() for r in rows[:MAX_LISTED_VARIABLES]],
                "total": len(rows),
            }
        if not isinstance(name, str):
            raise ToolArgsError("invalid arguments: $.name: expected string")
        try:
            value = resolve_name(namespace, name)
        except NameNotFound as exc:
            raise ToolArgsError(
                f"invalid arguments: {exc}. Call inspect without a name to list the variables."
            ) from exc
        except ValueError as exc:
            raise ToolArgsError(f"invalid arguments: {exc}") from exc
        return {
            "name": name.strip(),
            "type": type_name(value),
            "description": describe_value(value, max_chars=4000),
        }

    return ToolDefinition(
        name="inspect",
        lean_description="Describe a variable (no name: list all).",
        description=(
            "Look at the user's live notebook namespace without running code. With no `name`, "
            "list the variables (name, type, shape or length, short repr). With a `name` (or a "
            "dotted attribute path like `model.coef_`), describe that value: type, shape, columns "
            "and dtypes, and the first rows for DataFrames and arrays, or a size-capped repr. "
            "Attributes are read without running code: properties (like `df.columns`; inspect "
            "`df` instead) and names starting with `_` are not looked at."
        ),
        parameters={
            "type": "object",
            "properties": {
                "name": {
                    "type": "string",
                    "description": "A variable name or dotted attribute path; omit to list all.",
                }
            },
            "additionalProperties": False,
        },
        execute=execute,
        render=_render_inspect,
        read_only=True,
        is_concurrency_safe=always_concurrent,
        present_call=_present_inspect_call,
    )


def _render_inspect(args: JsonObject, value: JsonValue) -> tuple[ContentBlock, ...]:
    del args
    if isinstance(value, dict) and isinstance(value.get("description"), str):
        return (TextBlock(text=str(value["description"])),)
    rows = value.get("variables") if isinstance(value, dict) else None
    total = value.get("total") if isinstance(value, dict) else None
    if not isinstance(rows, list) or not rows:
        return (TextBlock(text="(no variables in the notebook namespace)"),)
    lines = ["name | type | shape | value"]
    for row in rows:
        if isinstance(row, dict):
            shape = row.get("shape")
            lines.append(
                f"{row.get('name')} | {row.get('type')} | {shape if shape is not None else ''} | "
                f"{row.get('summary')}"
            )
    if isinstance(total, int) and total > len(rows):
        lines.append(f"… and {total - len(rows)} more variables")
    return (TextBlock(text="\n".join(lines)),)


def _present_inspect_call(args: JsonObject) -> ToolCallView:
    name = args.get("name")
    title = f"inspect {name}" if isinstance(name, str) and name.strip() else "list variables"
    return GenericCallView(title=title, kind="read", raw_input=dict(args))
