"""The Jupyter project's kernel conformance suite (``jupyter_kernel_test``) against both kernelspecs.

``dsh-python`` is a Python kernel: the samples are plain Python, as for stock ipykernel.

``dsh`` treats a plain cell as a message to the agent, so every sample that must *execute* Python is
written the way a person runs Python there: behind a ``%%python`` line. The requests that do not
execute (completion, inspection, ``is_complete``) are sent as the bare code, which is what a frontend
sends from the cursor. The history samples are the ``%%python`` cells as typed, and the history
must return them as typed (not the Python body), like any IPython cell magic.

Both classes run one chat cell (the offline demo model) before the suite, so the kernel has live
widgets; ``flush_channels`` drains their comm messages, which the suite's message schema does not
know (PLATFORM.md), and validates everything else.

``execute_helper`` is the suite's, with the same checks, but it waits for the request's own IOPub
messages up to ``IOPUB_WAIT_S`` each: upstream waits 1 s for ``busy`` and 0.1 s for each output
(so a loaded machine failed it), and takes any message for the next one (so a late message of an
earlier request, which ``flush_channels`` cannot wait for, failed it too). Messages of other
requests are validated and passed over; widget comm messages are passed over, as in
``flush_channels``.
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from contextlib import AbstractContextManager
from pathlib import Path
from queue import Empty
from typing import Any, ClassVar

import jupyter_kernel_test as jkt
from jupyter_kernel_test.msgspec_v5 import validate_message

from tests.support.kernel import Kernel, start_kernel

IOPUB_WAIT_S = 30.0
"""How long ``execute_helper`` waits for each IOPub message of its request."""


def _samples(p: str) -> dict[str, Any]:
    return {
        "code_hello_world": p + "print('hello, world')",
        "code_stderr": p + "import sys; print('test', file=sys.stderr)",
        "code_page_something": p + "print?",
        "code_generate_error": p + "raise Exception('oops')",
        "code_execute_result": [
            {"code": p + "1+2", "result": "3"},
            {"code": p + "[n*n for n in range(1, 4)]", "result": "[1, 4, 9]"},
            {"code": p + "'a' * 3", "result": "'aaa'"},
        ],
        "code_display_data": [
            {
                "code": p + "from IPython.display import HTML, display; display(HTML('<b>t</b>'))",
                "mime": "text/html",
            },
            {
                "code": p
                + "from IPython.display import Math, display; display(Math('\\\\frac{1}{2}'))",
                "mime": "text/latex",
            },
        ],
        "code_clear_output": p + "from IPython.display import clear_output; clear_output()",
    }


class _Conformance(jkt.KernelTests):
    __test__ = False
    prefix: ClassVar[str] = ""
    chat_cell: ClassVar[str] = ""
    _tmp: ClassVar[tempfile.TemporaryDirectory[str]]
    _cm: ClassVar[AbstractContextManager[Kernel]]

    language_name = "python"
    file_extension = ".py"
    completion_samples: ClassVar[list[dict[str, Any]]] = [
        {"text": "zi", "matches": {"zip"}},
        {"text": "import collections\ncollections.Ordered", "matches": {"OrderedDict"}},
    ]
    complete_code_samples: ClassVar[list[str]] = [
        "1",
        "print('hello, world')",
        "def f(x):\n  return x*2\n\n\n",
    ]
    incomplete_code_samples: ClassVar[list[str]] = ["print('''hello", "def f(x):\n  x*2"]
    invalid_code_samples: ClassVar[list[str]] = ["import = 7q"]
    code_history_pattern = "*1+2*"
    supported_history_operations = ("tail", "range", "search")
    code_inspect_sample = "zip"

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        for name, value in _samples(cls.prefix).items():
            setattr(cls, name, value)

    @classmethod
    def setUpClass(cls) -> None:
        cls._tmp = tempfile.TemporaryDirectory()
        tmp = Path(cls._tmp.name)
        env = {
            "DSH_PROVIDER": "offline",
            "DSH_HEADLESS_APPROVAL_TIMEOUT": "0.1",
            "IPYTHONDIR": str(tmp / "ipython"),  # a private history database
        }
        cls._cm = start_kernel(tmp, cls.kernel_name, env=env)
        kernel = cls._cm.__enter__()
        cls.km, cls.kc = kernel.km, kernel.kc
        # A chat turn first: the kernel now holds widgets whose comm traffic the suite must survive.
        chat = kernel.execute(cls.chat_cell, timeout=60)
        assert chat.status == "ok", chat.content
        assert chat.of_type("comm_open"), "the chat cell drew no widgets"

    @classmethod
    def tearDownClass(cls) -> None:
        cls._cm.__exit__(None, None, None)
        cls._tmp.cleanup()

    def flush_channels(self) -> None:
        for msg in _drain(self):
            validate_message(msg)

    def execute_helper(
        self,
        code: str,
        timeout: int = jkt.TIMEOUT,
        silent: bool = False,
        store_history: bool = True,
        stop_on_error: bool = True,
    ) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        msg_id = self.kc.execute(
            code=code, silent=silent, store_history=store_history, stop_on_error=stop_on_error
        )
        reply = self.get_non_kernel_info_reply(timeout=max(timeout, IOPUB_WAIT_S))
        assert reply is not None
        validate_message(reply, "execute_reply", msg_id)
        busy = self._next_iopub(msg_id)
        validate_message(busy, "status", msg_id)
        self.assertEqual(busy["content"]["execution_state"], "busy")
        output_msgs: list[dict[str, Any]] = []
        while True:
            msg = self._next_iopub(msg_id)
            validate_message(msg, msg["msg_type"], msg_id)
            if msg["msg_type"] == "status":
                self.assertEqual(msg["content"]["execution_state"], "idle")
                break
            if msg["msg_type"] == "execute_input":
                self.assertEqual(msg["content"]["code"], code)
                continue
            output_msgs.append(msg)
        return reply, output_msgs

    def _next_iopub(self, msg_id: str) -> dict[str, Any]:
        """The next IOPub message of request ``msg_id``, waiting up to ``IOPUB_WAIT_S`` for each;
        widget comm traffic is passed over, other requests' messages are validated and passed over."""
        while True:
            msg: dict[str, Any] = self.kc.get_iopub_msg(timeout=IOPUB_WAIT_S)
            if msg["msg_type"].startswith("comm_"):
                continue
            if msg["parent_header"].get("msg_id") == msg_id:
                return msg
            validate_message(msg)

    def test_history(self) -> None:
        """Replaces the suite's ``test_history``, whose "range" step cannot pass on any IPython
        kernel (stock ipykernel included): IPython labels the current session 0 in a range reply
        but by its database number in a tail reply. Same checks otherwise, range asked for
        session 0; the inputs come back as typed (routing line included)."""
        codes = [s["code"] for s in self.code_execute_result]
        n = len(codes)
        tail = self.history_helper(codes, output=False, raw=True, hist_access_type="tail", n=n)
        entries = tail["content"]["history"]
        assert [len(e) for e in entries] == [3] * n
        assert [e[2] for e in entries] == codes
        start = entries[0][1]
        with_output = self.history_helper(
            codes, output=True, raw=True, hist_access_type="tail", n=n
        )
        assert all(len(e[2]) == 2 for e in with_output["content"]["history"])

        ranged = self.history_helper(
            [],
            output=False,
            raw=True,
            hist_access_type="range",
            session=0,
            start=start,
            stop=start + n,
        )
        assert [(e[1], e[2]) for e in ranged["content"]["history"]] == list(
            zip(range(start, start + n), codes, strict=True)
        )

        def search(**kw: Any) -> list[Any]:
            reply = self.history_helper(
                codes,
                output=False,
                raw=True,
                hist_access_type="search",
                pattern=self.code_history_pattern,
                **kw,
            )
            return reply["content"]["history"]

        assert len(search()) >= 1
        assert [e[2] for e in search(unique=True)] == [codes[0]]
        assert len(search(n=3)) == 3


def _drain(case: _Conformance) -> Iterator[dict[str, Any]]:
    """Every pending shell and IOPub message except widget comm traffic."""
    for channel in (case.kc.shell_channel, case.kc.iopub_channel):
        while True:
            try:
                msg = channel.get_msg(timeout=0.1)
            except Empty:
                break
            if not msg["msg_type"].startswith("comm_"):
                yield msg


class TestDshAgentKernel(_Conformance):
    __test__ = True
    kernel_name = "dsh"
    prefix = "%%python\n"
    chat_cell = "Hello! What can you do?"


class TestDshPythonKernel(_Conformance):
    __test__ = True
    kernel_name = "dsh-python"
    prefix = ""
    chat_cell = "%%chat\nHello! What can you do?"
