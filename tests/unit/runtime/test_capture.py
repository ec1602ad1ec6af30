"""Output capture: streams, IPython display outputs, images, the byte budget and its markers."""

from __future__ import annotations

import base64
import json
import sys
import tracemalloc

from IPython.core.interactiveshell import InteractiveShell

from dsh_kernel.jsonvalue import JsonObject
from dsh_kernel.runtime import CodeRunner, OutputCaps
from dsh_kernel.runtime.mime import json_bundle, png_size, summarize_output, to_json_value
from dsh_kernel.runtime.text import fit_text, format_size, utf8_len, utf8_prefix, utf8_suffix

from .images import make_png


def test_display_outputs_are_captured_in_order_with_streams(shell: InteractiveShell) -> None:
    runner = CodeRunner(shell.user_ns, shell=shell)
    original_pub = shell.display_pub
    code = (
        "from IPython.display import display, HTML\n"
        "print('before')\n"
        "display(HTML('<b>bold</b>'))\n"
        "print('after')\n"
        "42"
    )
    r = runner.run(code)
    assert r.ok, r.failure
    kinds = [(o["output_type"], o.get("name")) for o in r.outputs]
    assert kinds == [
        ("stream", "stdout"),
        ("display_data", None),
        ("stream", "stdout"),
        ("execute_result", None),
    ]
    assert r.outputs[1]["data"] == {
        "text/plain": "<IPython.core.display.HTML object>",
        "text/html": "<b>bold</b>",
    }
    assert r.display_outputs == (r.outputs[1], r.outputs[3])
    assert r.value_repr == "42"
    assert shell.display_pub is original_pub  # restored


def test_images_are_kept_as_base64_and_summarised_with_their_size(
    shell: InteractiveShell,
) -> None:
    png = make_png(4, 3)
    shell.user_ns["png"] = png
    runner = CodeRunner(shell.user_ns, shell=shell)
    r = runner.run(
        "from IPython.display import Image, display\n"
        "display(Image(data=png))\n"
        "display(Image(data=png, width=640, height=480))"
    )
    assert r.ok, r.failure
    first, second = r.display_outputs
    payload = first["data"]["image/png"]  # type: ignore[index]
    assert isinstance(payload, str)
    assert base64.b64decode(payload) == png
    assert summarize_output(first) == "[image/png 4x3]"
    assert summarize_output(second) == "[image/png 640x480]"


def test_update_display_and_clear_output(shell: InteractiveShell) -> None:
    runner = CodeRunner(shell.user_ns, shell=shell)
    r = runner.run(
        "from IPython.display import display, update_display\n"
        "display('v1', display_id='p')\n"
        "update_display('v2', display_id='p')\n"
        "update_display('ghost', display_id='never-shown')\n"
    )
    assert [o["data"] for o in r.display_outputs] == [{"text/plain": "'v2'"}]
    r = runner.run(
        "from IPython.display import clear_output\n"
        "print('one')\n"
        "clear_output()\n"
        "print('two')\n"
        "clear_output(wait=True)\n"
        "print('three')\n"
    )
    assert r.stdout == "three\n"
    assert len(r.outputs) == 1


def test_post_execute_callbacks_output_is_captured(shell: InteractiveShell) -> None:
    # what matplotlib's inline backend does: show pending figures after the code ran
    def flush() -> None:
        from IPython.display import display

        display({"flushed": True}, raw=False)

    shell.events.register("post_execute", flush)
    try:
        r = CodeRunner(shell.user_ns, shell=shell).run("x = 1")
    finally:
        shell.events.unregister("post_execute", flush)
    assert [o["data"] for o in r.display_outputs] == [{"text/plain": "{'flushed': True}"}]


def test_displayhook_is_swapped_with_a_shell(shell: InteractiveShell) -> None:
    r = CodeRunner(shell.user_ns, shell=shell).run("import sys\nsys.displayhook(7)\n")
    assert [o["output_type"] for o in r.outputs] == ["execute_result"]
    assert sys.displayhook is sys.__displayhook__


def test_magics_work_with_a_shell(shell: InteractiveShell) -> None:
    r = CodeRunner(shell.user_ns, shell=shell).run("%time y = 2\ny")
    assert r.ok, r.failure
    assert r.value_repr == "2"
    assert "Wall time" in r.stdout


def test_without_a_shell_display_prints_text() -> None:
    r = CodeRunner({}).run("from IPython.display import display\ndisplay({'a': 1})")
    assert r.stdout == "{'a': 1}\n"


def test_fifty_megabytes_of_print_are_capped_with_a_marker() -> None:
    caps = OutputCaps(stored_bytes=2 * 1024 * 1024)
    r = CodeRunner({}).run("print('x' * 50_000_000)", caps=caps)
    assert r.ok
    assert utf8_len(r.stdout) <= caps.stored_bytes + 100
    assert r.stdout.endswith("… [output truncated: 47.9 MB more]\n")
    assert r.dropped_bytes == 50_000_001 - (caps.stored_bytes - 64)
    assert sum(utf8_len(str(o.get("text", ""))) for o in r.outputs) <= caps.stored_bytes + 100


def test_memory_stays_bounded_while_printing_fifty_megabytes() -> None:
    caps = OutputCaps(stored_bytes=1024 * 1024)
    tracemalloc.start()
    try:
        r = CodeRunner({}).run("for i in range(50_000):\n    print('y' * 999)", caps=caps)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert r.ok
    assert r.dropped_bytes > 48_000_000
    assert peak < 12 * 1024 * 1024


def test_many_tiny_outputs_are_charged_per_entry() -> None:
    caps = OutputCaps(stored_bytes=64 * 100)
    code = "import sys\nfor i in range(10_000):\n    print('o', end='')\n    print('e', end='', file=sys.stderr)"
    r = CodeRunner({}).run(code, caps=caps)
    assert len(r.outputs) <= 102
    assert "more]" in r.stdout and "more]" in r.stderr


def test_oversized_display_keeps_what_fits_then_drops(shell: InteractiveShell) -> None:
    caps = OutputCaps(stored_bytes=3000)
    runner = CodeRunner(shell.user_ns, shell=shell)
    r = runner.run(
        "from IPython.display import display, HTML\n"
        "display(HTML('<p>' + 'z' * 5000 + '</p>'))\n"
        "for _ in range(60):\n"
        "    display(HTML('<p>' + 'w' * 5000 + '</p>'))\n",
        caps=caps,
    )
    assert r.ok
    first = r.display_outputs[0]
    assert set(first["data"]) == {"text/plain"}  # type: ignore[arg-type]
    assert first["metadata"]["dsh"]["droppedMimeTypes"] == ["text/html"]  # type: ignore[index]
    last = r.display_outputs[-1]
    assert "display outputs dropped" in last["data"]["text/plain"]  # type: ignore[index]
    assert len(r.display_outputs) < 40
    assert r.dropped_bytes >= 6 * 5000


def test_writes_from_other_threads_are_captured_and_not_stopped() -> None:
    caps = OutputCaps(stored_bytes=10_000, stop_after_bytes=5_000)
    code = (
        "import threading\n"
        "def work():\n"
        "    for _ in range(100):\n"
        "        print('t' * 99)\n"
        "t = threading.Thread(target=work)\n"
        "t.start(); t.join()\n"
    )
    r = CodeRunner({}).run(code, caps=caps)
    assert r.ok, r.failure  # only the run's own thread is stopped by the limit
    assert r.stdout.startswith("t" * 99 + "\n")


def test_utf8_helpers_respect_character_boundaries() -> None:
    text = "é" * 10 + "\ud800" + "x"
    assert utf8_len("é") == 2
    assert utf8_len(text) == 20 + 3 + 1
    assert utf8_prefix(text, 5) == "éé"
    assert utf8_suffix("aé", 2) == "é"
    assert utf8_prefix("abc", 0) == ""
    fitted = fit_text("a" * 1000 + "MIDDLE" + "b" * 1000, 400)
    assert fitted.startswith("a" * 100) and fitted.endswith("b" * 50)
    assert "[output truncated: " in fitted and "MIDDLE" not in fitted
    assert utf8_len(fitted) <= 400
    assert format_size(532) == "532 B" and format_size(48_200_000) == "48.2 MB"


def test_bundles_become_lossless_json() -> None:
    bundle = json_bundle(
        {
            "image/png": b"\x89PNG",
            "text/html": b"<b>x</b>",
            "application/json": {"a": (1, float("nan")), 2: -0.0},
        }
    )
    assert bundle == {
        "image/png": base64.b64encode(b"\x89PNG").decode(),
        "text/html": "<b>x</b>",
        "application/json": {"a": [1, None], "2": 0.0},
    }
    assert to_json_value(object).startswith("<class")  # type: ignore[union-attr]
    assert png_size(base64.b64encode(make_png(7, 5)).decode()) == (7, 5)
    assert png_size("not a png") is None


def test_lone_surrogates_never_reach_the_kept_text() -> None:
    r = CodeRunner({}).run("print('a\\ud800b')\n'\\ud800'")
    assert r.stdout == "a?b\n"
    assert json_bundle({"text/plain": "x\udc80"}) == {"text/plain": "x?"}
    for output in r.outputs:
        json.dumps(output, ensure_ascii=False).encode("utf-8")  # writable to a UTF-8 journal


class _Tap:
    """An ``OutputTap`` that records what it hears (``fail``: raises on the first write)."""

    def __init__(self, *, fail: bool = False) -> None:
        self.heard: list[tuple[str, object]] = []
        self.fail = fail

    def stream(self, name: str, text: str) -> None:
        if self.fail:
            raise RuntimeError("the view went away")
        self.heard.append((name, text))

    def display(
        self,
        data: JsonObject,
        metadata: JsonObject,
        *,
        display_id: str | None,
        update: bool,
        output_type: str,
    ) -> None:
        self.heard.append((output_type, (data.get("text/plain"), display_id, update)))

    def clear(self, *, wait: bool) -> None:
        self.heard.append(("clear", wait))


def test_a_tap_hears_every_output_as_it_is_made_even_beyond_the_budget(
    shell: InteractiveShell,
) -> None:
    tap = _Tap()
    heard_before_the_end: list[int] = []
    shell.user_ns["probe"] = lambda: heard_before_the_end.append(len(tap.heard))
    code = (
        "from IPython.display import display, clear_output\n"
        "print('x' * 200)\n"
        "probe()\n"
        "print('tail', file=__import__('sys').stderr)\n"
        "display('shown', display_id='d')\n"
        "clear_output(wait=True)\n"
        "7"
    )
    r = CodeRunner(shell.user_ns, shell=shell).run(
        code, caps=OutputCaps(stored_bytes=100, summary_bytes=256), tap=tap
    )
    assert r.ok, r.failure
    assert heard_before_the_end == [2]  # the print and its newline, while the code still ran
    assert tap.heard[:3] == [("stdout", "x" * 200), ("stdout", "\n"), ("stderr", "tail")]
    assert ("display_data", ("'shown'", "d", False)) in tap.heard
    assert ("clear", True) in tap.heard
    assert tap.heard[-1] == ("execute_result", ("7", None, False))
    assert r.dropped_bytes > 0  # the sink kept its budget; the tap heard everything


def test_a_failing_tap_is_dropped_and_the_run_goes_on() -> None:
    tap = _Tap(fail=True)
    r = CodeRunner({}).run("print('a')\nprint('b')\nx = 1", tap=tap)
    assert r.ok, r.failure
    assert r.stdout == "a\nb\n"
    assert tap.heard == []
