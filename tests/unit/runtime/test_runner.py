"""CodeRunner: values, failures, timeout, interrupt, top-level await, namespace diff, linecache."""

from __future__ import annotations

import asyncio
import inspect
import os
import signal
import threading
from types import FrameType

import numpy as np
import pandas as pd

from dsh_kernel.runtime import CodeRunner, OutputCaps


def run(code: str, ns: dict[str, object] | None = None, **kw: object):
    runner = CodeRunner(ns if ns is not None else {})
    return runner.run(code, **kw)  # type: ignore[arg-type]


def test_stdout_stderr_and_last_expression_value() -> None:
    ns: dict[str, object] = {}
    r = run("import sys\nprint('hello')\nprint('oops', file=sys.stderr)\nx = 20\nx + 1", ns)
    assert r.ok
    assert r.stdout == "hello\n"
    assert r.stderr == "oops\n"
    assert r.value_repr == "21"
    assert [o["output_type"] for o in r.outputs] == ["stream", "stream", "execute_result"]
    assert r.outputs[-1]["data"] == {"text/plain": "21"}
    assert ns["x"] == 20
    assert "__dsh_last_value__" not in ns


def test_trailing_semicolon_and_none_show_no_value() -> None:
    assert run("1 + 1;").value_repr is None
    assert run("1 + 1  ;  # quiet").value_repr is None
    assert run("None").value_repr is None
    assert run("'a;b'").value_repr == "'a;b'"
    r = run("x = 1")
    assert r.value_repr is None and r.outputs == ()


def test_rich_value_gets_a_mime_bundle() -> None:
    r = run("import pandas as pd\npd.DataFrame({'a': [1, 2]})")
    result = r.outputs[-1]
    assert result["output_type"] == "execute_result"
    assert set(result["data"]) >= {"text/plain", "text/html"}  # type: ignore[arg-type]
    assert r.value_repr is not None and "a" in r.value_repr


def test_exception_has_a_short_traceback_of_user_frames_only() -> None:
    r = run("def f(d):\n    return d['missing']\n\nf({})")
    assert r.failure is not None
    assert r.failure.kind == "exception"
    assert r.failure.message == "KeyError: 'missing'"
    assert r.failure.ename == "KeyError"
    tb = r.failure.traceback or ""
    assert tb.startswith("Traceback (most recent call last):\n")
    assert "    return d['missing']" in tb  # linecache shows the source line
    assert "f({})" in tb
    assert "runner.py" not in tb and "dsh_kernel" not in tb
    assert tb.rstrip().endswith("KeyError: 'missing'")


def test_deep_tracebacks_are_trimmed_and_chains_kept() -> None:
    code = (
        "def down(n):\n"
        "    if n == 0:\n"
        "        raise ValueError('bottom')\n"
        "    return down(n - 1)\n"
        "try:\n"
        "    down(30)\n"
        "except ValueError as e:\n"
        "    raise RuntimeError('wrapped') from e\n"
    )
    r = run(code)
    assert r.failure is not None
    tb = r.failure.traceback or ""
    assert "frames omitted" in tb
    assert "ValueError: bottom" in tb
    assert "direct cause of the following exception" in tb
    assert r.failure.message == "RuntimeError: wrapped"
    assert tb.count('File "<dsh-run-') < 25


def test_syntax_error_is_an_exception_failure_without_our_frames() -> None:
    r = run("x = (1,\nprint('never')")
    assert r.failure is not None
    assert r.failure.kind == "exception"
    assert r.failure.ename == "SyntaxError"
    assert r.failure.message.startswith("SyntaxError: ")
    assert "(line 1)" in r.failure.message
    assert "Traceback" not in (r.failure.traceback or "")
    assert "x = (1," in (r.failure.traceback or "")
    assert r.stdout == ""


def test_system_exit_does_not_leave_the_run() -> None:
    r = run("import sys\nsys.exit(3)")
    assert r.failure is not None and r.failure.kind == "exception"
    assert r.failure.message == "SystemExit: 3"


def test_timeout_stops_a_busy_loop_and_restores_timers() -> None:
    fired: list[int] = []

    def previous(signum: int, frame: FrameType | None) -> None:
        fired.append(signum)

    old_handler = signal.signal(signal.SIGALRM, previous)
    old_timer = signal.setitimer(signal.ITIMER_REAL, 50.0)
    try:
        r = run("print('started')\nwhile True:\n    pass", timeout_s=0.2)
        assert r.failure is not None
        assert r.failure.kind == "timeout"
        assert "0.2 s" in r.failure.message
        assert "while True" in (r.failure.traceback or "")
        assert r.stdout == "started\n"
        assert 0.18 <= r.duration_ms / 1000 < 2.0
        assert signal.getsignal(signal.SIGALRM) is previous
        remaining, _ = signal.getitimer(signal.ITIMER_REAL)
        assert 45.0 < remaining <= 50.0
        assert fired == []
    finally:
        signal.signal(signal.SIGALRM, old_handler)
        signal.setitimer(signal.ITIMER_REAL, *old_timer)


def test_timeout_is_repeated_when_the_code_swallows_it() -> None:
    code = (
        "n = 0\n"
        "while True:\n"
        "    try:\n"
        "        while True:\n"
        "            n += 0\n"
        "    except BaseException:\n"
        "        n += 1\n"
        "        if n > 2:\n"
        "            raise\n"
    )
    ns: dict[str, object] = {}
    r = run(code, ns, timeout_s=0.1)
    assert r.failure is not None and r.failure.kind == "timeout"
    assert ns["n"] == 3


def test_timeout_interrupts_sleep_and_top_level_await() -> None:
    r = run("import time\ntime.sleep(30)", timeout_s=0.2)
    assert r.failure is not None and r.failure.kind == "timeout"
    r = run("import asyncio\nawait asyncio.sleep(30)", timeout_s=0.2)
    assert r.failure is not None and r.failure.kind == "timeout"
    assert r.duration_ms < 3000


def test_no_timeout_off_the_main_thread_is_noted() -> None:
    results = []
    t = threading.Thread(target=lambda: results.append(run("x = 1", timeout_s=1.0)))
    t.start()
    t.join()
    assert results[0].ok
    assert results[0].notes == ("no timeout: the code did not run on the main thread",)


def test_keyboard_interrupt_raised_by_the_code_is_an_abort() -> None:
    r = run("print('before')\nraise KeyboardInterrupt")
    assert r.failure is not None
    assert r.failure.kind == "abort"
    assert r.failure.message == "interrupted by the user"
    assert r.interrupted
    assert r.stdout == "before\n"


def test_sigint_during_the_run_is_an_abort() -> None:
    r = run("import signal\nsignal.raise_signal(signal.SIGINT)\nprint('not reached')")
    assert r.interrupted and r.failure is not None and r.failure.kind == "abort"
    assert r.stdout == ""
    code = "import os, signal, time\nos.kill(os.getpid(), signal.SIGINT)\ntime.sleep(5)\n"
    r = run(code)
    assert r.interrupted and r.duration_ms < 4000
    assert "line 3" in (r.failure.traceback or "") or "line 2" in (r.failure.traceback or "")  # type: ignore[union-attr]


async def test_sigint_reaches_code_even_when_the_loop_claimed_sigint() -> None:
    loop = asyncio.get_running_loop()
    heard: list[str] = []
    loop.add_signal_handler(signal.SIGINT, lambda: heard.append("loop"))
    try:
        r = run("import os, signal, time\nos.kill(os.getpid(), signal.SIGINT)\ntime.sleep(5)")
        assert r.interrupted
        assert r.duration_ms < 4000
        # the loop's own handler still hears of the interrupt once the loop runs again
        for _ in range(100):
            if heard:
                break
            await asyncio.sleep(0.01)
        assert heard == ["loop"]
    finally:
        loop.remove_signal_handler(signal.SIGINT)
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_top_level_await_outside_any_loop() -> None:
    ns: dict[str, object] = {}
    r = run("import asyncio\nawait asyncio.sleep(0.01)\ny = 5\nawait asyncio.sleep(0, 'done')", ns)
    assert r.ok, r.failure
    assert r.value_repr == "'done'"
    assert ns["y"] == 5


async def test_top_level_await_while_the_callers_loop_runs() -> None:
    outer = asyncio.get_running_loop()
    ns: dict[str, object] = {}
    code = (
        "import asyncio\n"
        "async def twice(x):\n"
        "    await asyncio.sleep(0.01)\n"
        "    return 2 * x\n"
        "vals = await asyncio.gather(twice(1), twice(2))\n"
        "inner = asyncio.get_running_loop()\n"
        "vals"
    )
    r = run(code, ns)
    assert r.ok, r.failure
    assert r.value_repr == "[2, 4]"
    assert ns["inner"] is not outer
    assert asyncio.get_running_loop() is outer
    await asyncio.sleep(0)  # the caller's loop still works


def test_await_errors_have_short_tracebacks() -> None:
    r = run("import asyncio\nasync def bad():\n    raise ValueError('no')\nawait bad()")
    assert r.failure is not None and r.failure.message == "ValueError: no"
    tb = r.failure.traceback or ""
    assert "raise ValueError('no')" in tb and "asyncio" not in tb


def test_names_added_changed_removed() -> None:
    ns: dict[str, object] = {"keep": 1, "rebind": "a", "gone": 3, "lst": [1], "d": {}}
    r = run("rebind = 'b'\ndel gone\nlst.append(2)\nd['k'] = 1\nnew = 1\n_private = 2", ns)
    assert r.names_added == ("_private", "new")
    assert r.names_changed == ("d", "lst", "rebind")
    assert r.names_removed == ("gone",)


def test_in_place_changes_of_frames_and_arrays() -> None:
    ns: dict[str, object] = {
        "df": pd.DataFrame({"a": [1, 2]}),
        "same": pd.DataFrame({"a": [1, 2]}),
        "arr": np.zeros(3),
        "arr2": np.zeros(3),
    }
    r = run(
        "df['b'] = df['a'] * 2\narr.resize(5, refcheck=False)\nsame.loc[0, 'a'] = 9\narr2[0] = 1",
        ns,
    )
    assert r.ok, r.failure
    # size-changing mutations are seen; element updates are not (documented)
    assert r.names_changed == ("arr", "df")


def test_ipython_bookkeeping_names_are_ignored() -> None:
    ns: dict[str, object] = {}
    r = run("_ = 1\n__ = 2\n_i3 = 'x'\n_7 = 3\nIn = []\nreal = 1", ns)
    assert r.names_added == ("real",)


def test_source_is_registered_for_inspect_and_later_tracebacks() -> None:
    ns: dict[str, object] = {}
    run("def greet(name):\n    return 'hi ' + name\n", ns)
    assert inspect.getsource(ns["greet"]) == "def greet(name):\n    return 'hi ' + name\n"  # type: ignore[arg-type]
    r = run("greet(3)", ns)
    assert r.failure is not None
    assert "return 'hi ' + name" in (r.failure.traceback or "")


def test_future_flags_of_our_module_do_not_leak() -> None:
    r = run("def f(x: int) -> int: return x\nf.__annotations__['x'] is int")
    assert r.value_repr == "True"  # with postponed annotations it would be the string 'int'


def test_a_broken_repr_is_invalid_output_not_a_crash() -> None:
    ns: dict[str, object] = {}
    r = run(
        "class Bad:\n    def __repr__(self):\n        raise RuntimeError('no repr')\nb = Bad()\nb",
        ns,
    )
    assert r.failure is not None
    assert r.failure.kind == "invalid-output"
    assert "no repr" in r.failure.message
    assert "b" in ns  # the code itself ran


def test_output_limit_stops_a_runaway_writer() -> None:
    caps = OutputCaps(stored_bytes=10_000, stop_after_bytes=1_000_000)
    ns: dict[str, object] = {}
    r = run("i = 0\nwhile True:\n    print('x' * 1000)\n    i += 1", ns, caps=caps)
    assert r.failure is not None
    assert r.failure.kind == "output-limit"
    assert "1.0 MB" in r.failure.message
    assert 900 <= ns["i"] <= 1001  # type: ignore[operator]
    assert r.stdout.endswith("more]\n")


def test_run_rejects_misuse() -> None:
    import pytest

    from dsh_kernel.errors import UsageError

    runner = CodeRunner({})
    with pytest.raises(UsageError):
        runner.run(b"x", timeout_s=None)  # type: ignore[arg-type]
    with pytest.raises(UsageError):
        runner.run("x", timeout_s=0)
    with pytest.raises(UsageError):
        CodeRunner([])  # type: ignore[arg-type]


def test_stdout_is_restored_after_every_outcome() -> None:
    import sys

    before = (sys.stdout, sys.stderr, sys.displayhook, signal.getsignal(signal.SIGINT))
    for code in ("1", "1/0", "raise KeyboardInterrupt", "(", "while True: pass"):
        run(code, timeout_s=0.05)
        assert (sys.stdout, sys.stderr, sys.displayhook, signal.getsignal(signal.SIGINT)) == before
    assert os.getpid() > 0
