"""``CodeRunner``: run Python source in a live namespace, synchronously, on the calling thread.

``CodeRunner(namespace, shell=None).run(code, timeout_s=…, caps=…, tap=…)`` always returns a
``CodeRunResult``; failures are its ``failure`` field (``run`` raises only ``UsageError`` for misuse).
It runs on the calling thread on purpose: in the kernel that is the main thread, where user code
expects to be and where signals are delivered.

How a run goes:

1. The source is registered with ``linecache`` under a unique name (``<dsh-run-N>``), so tracebacks
   and ``inspect.getsource`` show its lines. With an IPython shell the source first goes through
   ``shell.transform_cell`` (so ``%magics`` and ``!commands`` work as in a cell).
2. It is compiled with ``PyCF_ALLOW_TOP_LEVEL_AWAIT`` (and ``dont_inherit``). When the last statement
   is an expression not followed by ``;``, its value is kept (as in a notebook cell).
3. Output is captured (``runtime.capture``; with ``tap``, also heard live as it is made) for the
   whole run, and the code executes with the
   namespace as its globals. With a shell, its ``pre_execute``/``post_execute`` events fire around
   the code (so e.g. matplotlib's inline backend flushes figures into the captured outputs).
4. The last value is formatted into a MIME bundle (an ``execute_result`` output) and ``value_repr``.
5. Figures the code left open are shown (those it did not show as an image already) and closed,
   still inside the capture (``runtime.figures``): they reach the outputs once and never leak into
   a later cell. An image object's outputs carry its description in their metadata.

**Top-level await.** Code that awaits compiles to a coroutine. The thread's event loop (the kernel's)
is already running and blocked by this very call, so the coroutine is driven to completion on a
*fresh private event loop on the same thread*: the running-loop marker is cleared while it runs and
restored afterwards. User code stays on the main thread (signals, timeout and interrupt work as for
plain code). Limits: objects bound to the kernel's loop (futures, some clients created outside the
run) cannot be awaited there, and tasks the code leaves running are cancelled when the run ends.

**Timeout** (main thread only; elsewhere the run has no timeout and says so in ``notes``): an
``ITIMER_REAL`` timer whose ``SIGALRM`` handler raises a private ``BaseException`` in the running
code, re-raised every 0.5 s should the code swallow it. The previous handler and timer are restored
afterwards (a pending timer is re-armed with its remaining time). A long call inside C code is only
stopped when it returns to Python.

**Interrupt.** On the main thread ``SIGINT`` is set to ``signal.default_int_handler`` for the run (and
restored after; an ignored SIGINT stays ignored), so the Jupyter interrupt raises
``KeyboardInterrupt`` in the code even when the kernel's loop had claimed SIGINT with
``loop.add_signal_handler`` — that handler still hears of the signal once the loop runs again. A
``KeyboardInterrupt`` becomes failure ``abort`` ("interrupted by the user") with ``interrupted=True``.
For exactly that stretch the run holds a ``running.RunWindow`` open: another thread can then stop
the code the same way (``running.interrupt()``: the view's Stop button, heard on ipykernel's shell
channel thread) or leave a job for the main thread (``running.after_run``), which the run does once
the code and its output capture have ended, before it returns.

**Namespace diff.** Names are compared before and after, skipping dunders, IPython's history names
(``_``, ``__``, ``_i``, ``_ii``, ``_iN``, ``_N``, ``In``, ``Out``, ``_ih``, ``_oh``, ``_dh``) and
``exit``/``quit``/``get_ipython``. ``names_added``/``names_removed`` are names that appeared/vanished;
``names_changed`` are names rebound to a different object (by identity: ``x = 5`` over an ``x`` that
was already that very ``5`` is no change) **or** whose object changed size in place, detected for:
``list``/``dict``/``set``/``bytearray``/``deque`` (length), numpy ``ndarray`` (shape, dtype),
pandas ``DataFrame`` (shape, column labels) and ``Series`` (shape), polars ``DataFrame`` (shape,
columns). Element updates that keep the size (``a[0] = 1``, ``df.loc[0, "x"] = 2``) are not seen.
"""

from __future__ import annotations

import ast
import asyncio
import contextlib
import inspect
import itertools
import linecache
import re
import signal
import sys
import threading
import time
from collections import deque
from collections.abc import Coroutine, Generator, Mapping
from types import CodeType, FrameType
from typing import Any, Final, cast

from dsh_kernel.errors import UsageError
from dsh_kernel.runtime.capture import OutputCapture, OutputLimitExceeded, OutputTap
from dsh_kernel.runtime.mime import format_value
from dsh_kernel.runtime.running import RunWindow
from dsh_kernel.runtime.text import truncation_marker, utf8_len, utf8_prefix
from dsh_kernel.runtime.tracebacks import exception_message, short_traceback
from dsh_kernel.runtime.types import (
    DEFAULT_CAPS,
    CodeRunFailure,
    CodeRunResult,
    OutputCaps,
)

_VALUE_SLOT: Final = "__dsh_last_value__"
_CANCEL_GRACE_S: Final = 1.0
_TIMEOUT_REPEAT_S: Final = 0.5
_run_numbers = itertools.count(1)

_HIDDEN_NAME = re.compile(r"^(__.*__|_+|_i+|_i?\d+)$")
_HIDDEN_NAMES: Final = frozenset({"In", "Out", "_ih", "_oh", "_dh", "exit", "quit", "get_ipython"})


def is_hidden_name(name: str) -> bool:
    """Names the diff (and the variable listing) ignore: dunders and IPython's bookkeeping."""
    return bool(_HIDDEN_NAME.match(name)) or name in _HIDDEN_NAMES


class _RunTimeout(BaseException):
    """Raised into the code by the SIGALRM handler; a BaseException so ``except Exception`` in user
    code does not swallow it."""


class _NoValue:
    pass


_NO_VALUE: Final = _NoValue()


class CodeRunner:
    """Runs code in ``namespace`` (with an IPython ``shell``, pass ``shell.user_ns``)."""

    def __init__(self, namespace: dict[str, object], *, shell: object | None = None) -> None:
        if not isinstance(namespace, dict):  # pyright: ignore[reportUnnecessaryIsInstance]
            raise UsageError("CodeRunner needs a dict namespace (exec requires real globals)")
        self.namespace = namespace
        self.shell = shell

    def run(
        self,
        code: str,
        *,
        timeout_s: float | None = None,
        caps: OutputCaps = DEFAULT_CAPS,
        tap: OutputTap | None = None,
    ) -> CodeRunResult:
        if not isinstance(code, str):  # pyright: ignore[reportUnnecessaryIsInstance]
            raise UsageError(f"code must be a str, not {type(code).__name__}")
        if timeout_s is not None and not timeout_s > 0:
            raise UsageError("timeout_s must be positive (or None)")
        started = time.perf_counter()
        on_main = threading.current_thread() is threading.main_thread()
        notes: list[str] = []
        if timeout_s is not None and not on_main:
            notes.append("no timeout: the code did not run on the main thread")
            timeout_s = None
        filename = register_source(code)
        self.namespace.setdefault("__name__", "__main__")
        before = _snapshot(self.namespace)

        capture = OutputCapture(caps, shell=self.shell, tap=tap)
        window = RunWindow()
        failure: CodeRunFailure | None = None
        value_repr: str | None = None
        try:
            with capture:
                try:
                    with _interruptible(on_main, window), _Deadline(timeout_s):
                        value = self._execute(code, filename)
                        if value is not _NO_VALUE and value is not None:
                            try:
                                bundle, metadata = format_value(value, self.shell)
                            except Exception as exc:
                                failure = CodeRunFailure(
                                    kind="invalid-output",
                                    message="the value of the last expression could not be "
                                    f"shown: {exception_message(exc)}",
                                    traceback=short_traceback(exc, filename),
                                    ename=type(exc).__name__,
                                )
                            else:
                                metadata = capture.figures.annotate(value, bundle, metadata)
                                capture.sink.publish(bundle, metadata, output_type="execute_result")
                                plain = bundle.get("text/plain")
                                value_repr = _cap(plain if isinstance(plain, str) else "", caps)
                except BaseException as exc:  # every outcome becomes a field
                    failure = _classify(exc, filename, timeout_s)
                notes.extend(_sweep(capture))
        except KeyboardInterrupt as exc:  # landed in our own teardown: still the user's interrupt
            failure = _classify(exc, filename, timeout_s)
        captured = capture.result()
        window.run_after()
        added, changed, removed = _diff(before, self.namespace)
        return CodeRunResult(
            value_repr=value_repr,
            outputs=captured.outputs,
            stdout=captured.stdout,
            stderr=captured.stderr,
            failure=failure,
            interrupted=failure is not None and failure.kind == "abort",
            names_added=added,
            names_changed=changed,
            names_removed=removed,
            duration_ms=int((time.perf_counter() - started) * 1000),
            dropped_bytes=captured.dropped_bytes,
            notes=tuple(notes),
        )

    def _execute(self, code: str, filename: str) -> object:
        """Compile and run; the last expression's value, or ``_NO_VALUE``. Raises what the code
        raises (``SyntaxError`` included)."""
        program, keeps_value = _compile(self._transform(code), filename)
        self._trigger("pre_execute")
        try:
            if program.co_flags & inspect.CO_COROUTINE:
                _run_coroutine(
                    cast(Coroutine[object, object, object], eval(program, self.namespace))
                )
            else:
                exec(program, self.namespace)
        finally:
            value = self.namespace.pop(_VALUE_SLOT, _NO_VALUE)
            self._trigger("post_execute")
        return value if keeps_value else _NO_VALUE

    def _transform(self, code: str) -> str:
        transform = getattr(self.shell, "transform_cell", None) if self.shell is not None else None
        if not callable(transform):
            return code
        out = transform(code)
        return out if isinstance(out, str) else code

    def _trigger(self, event: str) -> None:
        events = getattr(self.shell, "events", None) if self.shell is not None else None
        trigger = getattr(events, "trigger", None)
        if callable(trigger):
            # IPython reports a failing callback itself (into the captured stderr)
            with contextlib.suppress(Exception):
                trigger(event)


def _sweep(capture: OutputCapture) -> tuple[str, ...]:
    """The figures left open, shown and closed; a failure here never fails the run."""
    try:
        return capture.sweep()
    except Exception as exc:
        return (f"open figures could not be collected: {type(exc).__name__}: {exc}",)


# -- compiling --------------------------------------------------------------------------------------


def register_source(code: str) -> str:
    """Put ``code`` in ``linecache`` under a fresh name and return that name. Entries are kept
    (as IPython keeps its cells): functions defined by a run show their source later too."""
    filename = f"<dsh-run-{next(_run_numbers)}>"
    linecache.cache[filename] = (len(code), None, code.splitlines(keepends=True), filename)
    return filename


def _compile(source: str, filename: str) -> tuple[CodeType, bool]:
    flags = ast.PyCF_ALLOW_TOP_LEVEL_AWAIT
    tree = cast(
        ast.Module,
        compile(source, filename, "exec", flags=flags | ast.PyCF_ONLY_AST, dont_inherit=True),
    )
    keeps_value = False
    if tree.body and isinstance(tree.body[-1], ast.Expr) and not _has_semicolon(source, tree):
        last = tree.body[-1]
        target = ast.copy_location(ast.Name(id=_VALUE_SLOT, ctx=ast.Store()), last)
        tree.body[-1] = ast.copy_location(ast.Assign(targets=[target], value=last.value), last)
        ast.fix_missing_locations(tree)
        keeps_value = True
    return compile(tree, filename, "exec", flags=flags, dont_inherit=True), keeps_value


def _has_semicolon(source: str, tree: ast.Module) -> bool:
    """True when the last expression is followed by ``;`` (a notebook's "show nothing")."""
    last = tree.body[-1]
    if last.end_lineno is None or last.end_col_offset is None:
        return False
    lines = source.splitlines()
    if last.end_lineno > len(lines):
        return False
    # ast column offsets count UTF-8 bytes
    rest = (
        lines[last.end_lineno - 1].encode("utf-8")[last.end_col_offset :].decode("utf-8", "replace")
    )
    return rest.lstrip().startswith(";")


def _run_coroutine(coro: Coroutine[object, object, object]) -> None:
    """Drive ``coro`` on a private loop on this thread (see the module docstring)."""
    outer = asyncio.events._get_running_loop()
    loop = asyncio.new_event_loop()
    # asyncio refuses to run a loop while this thread's marker names another running loop; the
    # outer loop is blocked inside this call, so lending the thread to the private loop is safe.
    asyncio.events._set_running_loop(None)
    try:
        task = loop.create_task(coro)
        try:
            loop.run_until_complete(task)
        except BaseException:
            if not task.done():  # interrupted inside the loop itself: let the code unwind
                task.cancel()
                with contextlib.suppress(BaseException):
                    loop.run_until_complete(asyncio.wait([task], timeout=_CANCEL_GRACE_S))
            raise
        finally:
            _close_private_loop(loop)
    finally:
        asyncio.events._set_running_loop(outer)


def _close_private_loop(loop: asyncio.AbstractEventLoop) -> None:
    try:
        pending = asyncio.all_tasks(loop)
        for task in pending:
            task.cancel()
        if pending:
            with contextlib.suppress(BaseException):
                loop.run_until_complete(asyncio.wait(pending, timeout=_CANCEL_GRACE_S))
        with contextlib.suppress(BaseException):
            loop.run_until_complete(loop.shutdown_asyncgens())
    finally:
        loop.close()


# -- signals ----------------------------------------------------------------------------------------


@contextlib.contextmanager
def _interruptible(on_main: bool, window: RunWindow) -> Generator[None, None, None]:
    if not on_main:
        yield
        return
    previous = signal.getsignal(signal.SIGINT)
    if previous == signal.SIG_IGN:
        yield
        return
    signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        window.open()
        try:
            yield
        finally:
            window.close()
    finally:
        signal.signal(signal.SIGINT, previous if previous is not None else signal.SIG_DFL)


class _Deadline:
    """A wall-clock budget delivered as ``_RunTimeout`` (no-op for ``seconds=None``)."""

    def __init__(self, seconds: float | None) -> None:
        self._seconds = seconds
        self._active = False
        self._previous_handler: object = None
        self._previous_timer = (0.0, 0.0)
        self._started = 0.0

    def _on_alarm(self, signum: int, frame: FrameType | None) -> None:
        del signum, frame
        if self._active:
            raise _RunTimeout

    def __enter__(self) -> None:
        if self._seconds is None:
            return
        self._started = time.monotonic()
        self._previous_handler = signal.signal(signal.SIGALRM, self._on_alarm)
        self._active = True
        self._previous_timer = signal.setitimer(
            signal.ITIMER_REAL, self._seconds, _TIMEOUT_REPEAT_S
        )

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: object
    ) -> None:
        if self._seconds is None:
            return
        self._active = False
        signal.setitimer(signal.ITIMER_REAL, 0)
        previous = self._previous_handler
        signal.signal(
            signal.SIGALRM,
            cast(signal.Handlers, previous) if previous is not None else signal.SIG_DFL,
        )
        delay, interval = self._previous_timer
        if delay > 0:  # someone else's timer was pending: give it back what is left
            remaining = delay - (time.monotonic() - self._started)
            signal.setitimer(signal.ITIMER_REAL, max(remaining, 0.001), interval)


# -- outcomes ---------------------------------------------------------------------------------------


def _classify(exc: BaseException, filename: str, timeout_s: float | None) -> CodeRunFailure:
    tb = short_traceback(exc, filename)
    if isinstance(exc, _RunTimeout):
        limit = f"{timeout_s:g} s" if timeout_s is not None else "its time limit"
        return CodeRunFailure(
            kind="timeout",
            message=f"the code ran longer than {limit} and was stopped",
            traceback=_without_last_line(tb),
        )
    if isinstance(exc, KeyboardInterrupt):
        return CodeRunFailure(
            kind="abort",
            message="interrupted by the user",
            traceback=_without_last_line(tb),
            ename="KeyboardInterrupt",
        )
    if isinstance(exc, OutputLimitExceeded):
        return CodeRunFailure(
            kind="output-limit", message=str(exc), traceback=_without_last_line(tb)
        )
    return CodeRunFailure(
        kind="exception",
        message=exception_message(exc),
        traceback=tb,
        ename=type(exc).__name__,
    )


def _without_last_line(tb: str | None) -> str | None:
    """For our own control exceptions, the frames say *where* the code was; the exception line
    (a private class name) says nothing."""
    if tb is None:
        return None
    lines = tb.rstrip("\n").split("\n")
    kept = "\n".join(lines[:-1]).strip("\n")
    return kept + "\n" if kept and kept != "Traceback (most recent call last):" else None


def _cap(text: str, caps: OutputCaps) -> str:
    limit = caps.summary_bytes
    size = utf8_len(text)
    if size <= limit:
        return text
    return utf8_prefix(text, limit) + "\n" + truncation_marker(size - limit)


# -- namespace diff ---------------------------------------------------------------------------------

_Snapshot = dict[str, tuple[object, object]]


def _snapshot(namespace: Mapping[str, object]) -> _Snapshot:
    """Every visible name with its object (held, so identities stay meaningful) and fingerprint."""
    return {k: (v, _fingerprint(v)) for k, v in list(namespace.items()) if not is_hidden_name(k)}


def _fingerprint(value: object) -> object:
    """A cheap size signature for in-place change detection (``None``: not tracked)."""
    try:
        if isinstance(value, list | dict | set | bytearray | deque):
            sized = cast(list[object], value)
            return ("len", len(sized))
        return _array_fingerprint(value)
    except Exception:
        return None


def _array_fingerprint(value: object) -> object:
    module = type(value).__module__.partition(".")[0]
    v: Any = value  # a third-party object we only read shape attributes from
    # only libraries already imported can have made this value: never import them here
    if module == "numpy":
        np = sys.modules.get("numpy")
        if np is not None and isinstance(value, np.ndarray):
            return ("ndarray", tuple(v.shape), str(v.dtype))
    elif module == "pandas":
        pd = sys.modules.get("pandas")
        if pd is not None and isinstance(value, pd.DataFrame):
            return ("DataFrame", tuple(v.shape), [str(c) for c in v.columns])
        if pd is not None and isinstance(value, pd.Series):
            return ("Series", tuple(v.shape))
    elif module == "polars":
        pl = sys.modules.get("polars")
        if pl is not None and isinstance(value, pl.DataFrame):
            return ("polars", tuple(v.shape), list(v.columns))
    return None


def _diff(
    before: _Snapshot, namespace: Mapping[str, object]
) -> tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]]:
    after = {k: v for k, v in list(namespace.items()) if not is_hidden_name(k)}
    added = sorted(k for k in after if k not in before)
    removed = sorted(k for k in before if k not in after)
    changed: list[str] = []
    for name in sorted(k for k in after if k in before):
        old, old_fp = before[name]
        new = after[name]
        if new is not old or _differs(old_fp, _fingerprint(new)):
            changed.append(name)
    return tuple(added), tuple(changed), tuple(removed)


def _differs(a: object, b: object) -> bool:
    try:
        return bool(a != b)
    except Exception:
        return True
