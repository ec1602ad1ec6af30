"""``runtime.running``: another thread stops the code that holds the main thread, or leaves it a job
for when the code ends (what the view's Stop and Send do while the agent's code runs)."""

from __future__ import annotations

import threading

from dsh_kernel.runtime import CodeRunner, running


def _in_thread(fn: object) -> threading.Thread:
    thread = threading.Thread(target=fn, daemon=True)  # type: ignore[arg-type]
    thread.start()
    return thread


def test_interrupt_from_another_thread_stops_a_blocking_sleep() -> None:
    started = threading.Event()
    ns: dict[str, object] = {"started": started}
    seen: list[bool] = []

    def stop() -> None:
        started.wait(30)
        seen.append(running.running())
        seen.append(running.interrupt())

    thread = _in_thread(stop)
    result = CodeRunner(ns).run(
        "print('before', flush=True)\nstarted.set()\nimport time\ntime.sleep(60)\nafter = 1"
    )
    thread.join(5)
    assert seen == [True, True]
    assert result.failure is not None and result.failure.kind == "abort"
    assert result.interrupted
    assert result.stdout == "before\n"  # the output so far is kept
    assert "after" not in ns
    assert not running.running()


def test_nothing_is_sent_or_queued_when_no_code_runs() -> None:
    assert not running.running()
    assert running.interrupt() is False  # no SIGINT: this test would end in KeyboardInterrupt
    assert running.after_run(lambda: None) is False
    assert CodeRunner({}).run("1 + 1").ok
    assert running.interrupt() is False


def test_a_job_left_during_the_run_runs_on_the_main_thread_after_the_code() -> None:
    started, queued = threading.Event(), threading.Event()
    ns: dict[str, object] = {"started": started, "queued": queued}
    ran: list[tuple[bool, object]] = []
    accepted: list[bool] = []

    def job() -> None:
        print("from the job")  # not the code's output: the capture has ended
        ran.append((threading.current_thread() is threading.main_thread(), ns.get("done")))

    def leave() -> None:
        started.wait(30)
        accepted.append(running.after_run(job))
        queued.set()

    thread = _in_thread(leave)
    result = CodeRunner(ns).run("started.set()\nqueued.wait(30)\ndone = True\nprint('code')")
    thread.join(5)
    assert accepted == [True]
    assert ran == [(True, True)]  # once, on the main thread, after the code's last line
    assert result.ok and result.stdout == "code\n"


def test_a_failing_job_does_not_fail_the_run() -> None:
    started = threading.Event()
    ns: dict[str, object] = {"started": started}
    queued = threading.Event()
    ns["queued"] = queued

    def leave() -> None:
        started.wait(30)
        running.after_run(lambda: 1 / 0)  # type: ignore[arg-type, return-value]
        queued.set()

    thread = _in_thread(leave)
    result = CodeRunner(ns).run("started.set()\nqueued.wait(30)\nx = 1")
    thread.join(5)
    assert result.ok and ns["x"] == 1
