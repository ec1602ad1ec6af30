"""The python and inspect tools, alone and through a real Agent with a scripted provider."""

from __future__ import annotations

import asyncio
import base64
import json
import signal
import time
from collections.abc import Sequence

import pandas as pd
import pytest
from IPython.core.interactiveshell import InteractiveShell

from dsh_kernel import Agent
from dsh_kernel.abort import AbortController
from dsh_kernel.errors import ToolArgsError
from dsh_kernel.ids import CallId
from dsh_kernel.jsonvalue import JsonObject
from dsh_kernel.kernel.toolbox.python import (
    CODE_RUN_FAILED,
    CodeRunFailedError,
    inspect_tool,
    python_tool,
)
from dsh_kernel.runtime import CodeRunner, OutputCaps
from dsh_kernel.runtime.types import read_python_meta
from dsh_kernel.session.events import SessionEvent
from dsh_kernel.testing import (
    ScriptedProvider,
    ScriptEntry,
    hang,
    text_response,
    tool_call_response,
)
from dsh_kernel.tools.approval import ApprovalPolicy
from dsh_kernel.tools.pipeline import lossless_problem
from dsh_kernel.tools.presentation import GenericCallView
from dsh_kernel.tools.types import ToolContext
from tests.unit.runtime.images import make_png

from ..agent.helpers import of_type, result_texts, turn_ends


def tool_result(events: Sequence[SessionEvent], index: int = 0) -> SessionEvent:
    return of_type(events, "tool/result")[index]


async def run_agent(agent: Agent, message: str = "go") -> None:
    agent.followup(message)
    await agent.when_idle()


def ctx() -> ToolContext:
    return ToolContext(call_id=CallId("c1"), name="python", signal=AbortController().signal)


# -- through the agent ------------------------------------------------------------------------------


async def test_python_tool_writes_into_the_namespace_and_logs_meta() -> None:
    ns: dict[str, object] = {"data": [3, 4, 5]}
    provider = ScriptedProvider(
        [
            tool_call_response(
                "python",
                {"code": "total = sum(data)\nprint('summing')\ntotal * 2", "description": "Sum"},
                call_id="c1",
            ),
            text_response("Total is 12."),
        ]
    )
    agent = Agent(
        provider=provider,
        model="m1",
        tools=[python_tool(CodeRunner(ns))],
        approval_policy=ApprovalPolicy("auto"),
    )
    await run_agent(agent)
    assert ns["total"] == 12
    result = tool_result(agent.session.events)
    assert "error" not in result.data
    meta = result.data["meta"]
    assert isinstance(meta, dict)
    assert meta["code"] == "total = sum(data)\nprint('summing')\ntotal * 2"
    assert meta["description"] == "Sum"
    assert meta["stdout"] == "summing\n" and meta["stderr"] == ""
    assert meta["result"] == "24"
    assert meta["outputs"] == [
        {
            "output_type": "execute_result",
            "data": {"text/plain": "24"},
            "metadata": {},
            "execution_count": None,
        }
    ]
    assert meta["failure"] is None
    assert meta["namesAdded"] == ["total"] and meta["namesChanged"] == []
    assert isinstance(meta["durationMs"], int)
    assert result_texts(agent.session.events) == ["summing\nOut: 24\n(namespace: added total)"]
    # the model saw exactly that on the next request
    assert "Out: 24" in repr(provider.requests[1].messages[-1])
    assert turn_ends(agent.session.events) == [{"kind": "completed"}]


async def test_rich_outputs_reach_the_meta_as_lossless_json(shell: InteractiveShell) -> None:
    shell.user_ns["png"] = make_png(6, 2)
    code = (
        "from IPython.display import Image, display\n"
        "import pandas as pd\n"
        "display(Image(data=png))\n"
        "frame = pd.DataFrame({'a': [1, 2]})\n"
        "frame"
    )
    provider = ScriptedProvider(
        [tool_call_response("python", {"code": code}, call_id="c1"), text_response("done")]
    )
    agent = Agent(
        provider=provider,
        model="m1",
        tools=[python_tool(CodeRunner(shell.user_ns, shell=shell))],
        approval_policy=ApprovalPolicy("auto"),
    )
    await run_agent(agent)
    assert isinstance(shell.user_ns["frame"], pd.DataFrame)
    meta = tool_result(agent.session.events).data["meta"]
    assert isinstance(meta, dict) and lossless_problem(meta) is None
    assert json.loads(json.dumps(meta)) == meta
    outputs = meta["outputs"]
    assert isinstance(outputs, list) and len(outputs) == 2
    image, frame = outputs
    assert base64.b64decode(image["data"]["image/png"]) == make_png(6, 2)  # type: ignore[index,call-overload]
    assert "text/html" in frame["data"]  # type: ignore[index,operator]
    text = result_texts(agent.session.events)[0]
    assert text.startswith("[image/png 6x2]\nOut:    a\n0  1\n1  2")
    assert text.endswith("(namespace: added Image, display, frame, pd)")


async def test_failure_is_an_error_result_with_code_and_captured_output() -> None:
    provider = ScriptedProvider(
        [
            tool_call_response("python", {"code": "print('step 1')\nx = 1\n1/0"}, call_id="c1"),
            text_response("I see the error."),
        ]
    )
    ns: dict[str, object] = {}
    agent = Agent(
        provider=provider,
        model="m1",
        tools=[python_tool(CodeRunner(ns))],
        approval_policy=ApprovalPolicy("auto"),
    )
    await run_agent(agent)
    result = tool_result(agent.session.events)
    assert result.data["error"] == {"name": "CodeRunFailedError", "code": CODE_RUN_FAILED}
    text = result_texts(agent.session.events)[0]
    assert text.startswith(
        "Error: code run failed (exception): ZeroDivisionError: division by zero\n"
        "Traceback (most recent call last):\n"
    )
    assert "    1/0\n" in text
    assert text.endswith("Captured output:\nstep 1\n(namespace: added x)")
    assert ns["x"] == 1  # what ran before the failure stays
    assert turn_ends(agent.session.events) == [{"kind": "completed"}]


def test_failure_error_carries_the_card_meta() -> None:
    defn = python_tool(CodeRunner({}), timeout_s=0.2)
    with pytest.raises(CodeRunFailedError) as info:
        defn.execute({"code": "print('spin')\nwhile True:\n    pass"}, ctx())
    err = info.value
    assert err.code == CODE_RUN_FAILED
    assert err.message.startswith(
        "code run failed (timeout): the code ran longer than 0.2 s and was stopped"
    )
    meta = err.meta
    assert isinstance(meta, dict) and lossless_problem(meta) is None
    assert meta["stdout"] == "spin\n"
    assert meta["failure"] == {
        "kind": "timeout",
        "message": "the code ran longer than 0.2 s and was stopped",
        "traceback": meta["failure"]["traceback"],  # type: ignore[index,call-overload]
        "ename": None,
    }
    assert "while True" in str(meta["failure"]["traceback"])  # type: ignore[index,call-overload]
    # the card reads back exactly what the tool wrote: one contract, no key lost on either side
    assert read_python_meta(meta) == meta


def test_the_card_reads_an_older_or_partial_meta_with_defaults() -> None:
    card = read_python_meta({"stdout": ["a", "b"], "outputs": [1, {"output_type": "x"}]})
    assert card is not None
    assert card["stdout"] == "ab" and card["stderr"] == "" and card["code"] == ""
    assert card["outputs"] == [{"output_type": "x"}]
    assert card["failure"] is None and card["durationMs"] == 0 and card["notes"] == []
    failure = read_python_meta({"failure": {"kind": "exception"}})
    assert failure is not None and failure["failure"] == {
        "kind": "exception",
        "message": "",
        "traceback": None,
        "ename": None,
    }
    assert read_python_meta(None) is None and read_python_meta([1]) is None


async def test_interrupt_calls_on_interrupt_and_the_turn_ends_aborted() -> None:
    provider = ScriptedProvider(
        [tool_call_response("python", {"code": "print('working')\nraise KeyboardInterrupt"})]
    )
    calls: list[str] = []
    agent: Agent

    def on_interrupt() -> None:
        calls.append("interrupt")
        agent.cancel()

    agent = Agent(
        provider=provider,
        model="m1",
        tools=[python_tool(CodeRunner({}), on_interrupt=on_interrupt)],
        approval_policy=ApprovalPolicy("auto"),
    )
    await run_agent(agent)
    assert calls == ["interrupt"]
    assert turn_ends(agent.session.events) == [{"kind": "aborted", "reason": {"kind": "user"}}]
    text = result_texts(agent.session.events)[0]
    assert text.startswith("Error: code run failed (abort): interrupted by the user")
    assert "working" in text


async def test_python_asks_for_approval_by_default_and_inspect_does_not() -> None:
    ns: dict[str, object] = {"df": pd.DataFrame({"a": [1]})}
    provider = ScriptedProvider(
        [
            tool_call_response("python", {"code": "hacked = True"}, call_id="c1"),
            tool_call_response("inspect", {"name": "df"}, call_id="c2"),
            text_response("ok"),
        ]
    )
    agent = Agent(
        provider=provider, model="m1", tools=[python_tool(CodeRunner(ns)), inspect_tool(ns)]
    )
    await run_agent(agent)
    first, second = of_type(agent.session.events, "tool/result")
    assert first.data["error"]["code"] == "DENIED"  # type: ignore[index,call-overload]
    assert "hacked" not in ns
    assert "error" not in second.data
    assert result_texts(agent.session.events)[1].startswith("pandas.DataFrame: 1 rows × 1 columns")


# -- the python tool's text and call view ---------------------------------------------------------


def test_model_text_is_capped_with_a_marker_and_keeps_the_value() -> None:
    defn = python_tool(CodeRunner({}), caps=OutputCaps(summary_bytes=2000))
    args: JsonObject = {"code": "for i in range(5000):\n    print(f'line {i}')\n'final'"}
    value = defn.execute(args, ctx())
    (block,) = defn.render(args, value)  # type: ignore[arg-type]
    text = block.text  # type: ignore[union-attr]
    assert len(text.encode()) <= 2000
    assert text.startswith("line 0\nline 1\n")
    assert "… [output truncated: " in text and " omitted] …" in text
    assert "line 4999\nOut: 'final'" in text


def test_no_output_and_names_line() -> None:
    defn = python_tool(CodeRunner({}))
    for code, expected in (("pass", "(no output)"), ("y = 2", "(no output)\n(namespace: added y)")):
        args: JsonObject = {"code": code}
        (block,) = defn.render(args, defn.execute(args, ctx()))  # type: ignore[arg-type]
        assert block.text == expected  # type: ignore[union-attr]


def test_python_tool_definition() -> None:
    defn = python_tool(CodeRunner({}), timeout_s=30)
    assert defn.name == "python" and not defn.read_only
    assert "namespace" in defn.description and "persists" in defn.description
    assert "30 s" in defn.description
    assert defn.parameters["required"] == ["code"]
    assert defn.present_call is not None
    view = defn.present_call({"code": "\n\nimport os\nos.listdir()", "description": "List files"})
    assert view == GenericCallView(
        title="List files", kind="execute", raw_input="\n\nimport os\nos.listdir()"
    )
    view = defn.present_call({"code": "\n  import os  \nos.listdir()"})
    assert view is not None and view.title == "import os"


# -- inspect --------------------------------------------------------------------------------------


def test_inspect_lists_and_describes() -> None:
    ns: dict[str, object] = {"df": pd.DataFrame({"a": [1, 2]}), "n": 3, "_x": 1}
    defn = inspect_tool(ns)
    assert defn.read_only
    listing = defn.execute({}, ctx())
    assert listing == {
        "variables": [
            {"name": "df", "type": "pandas.DataFrame", "shape": "(2, 1)", "summary": "columns: a"},
            {"name": "n", "type": "int", "shape": None, "summary": "3"},
        ],
        "total": 2,
    }
    (block,) = defn.render({}, listing)  # type: ignore[arg-type]
    assert block.text == (  # type: ignore[union-attr]
        "name | type | shape | value\ndf | pandas.DataFrame | (2, 1) | columns: a\nn | int |  | 3"
    )
    described = defn.execute({"name": "df"}, ctx())
    assert isinstance(described, dict)
    assert described["type"] == "pandas.DataFrame"
    assert "columns: a (int64)" in str(described["description"])
    with pytest.raises(ToolArgsError, match="__getattr__ would make"):
        defn.execute({"name": "df.a"}, ctx())  # a column is made by __getattr__: never run


async def test_inspect_missing_name_is_invalid_args_with_close_matches() -> None:
    ns: dict[str, object] = {"sales": 1, "sales_2024": 2}
    provider = ScriptedProvider(
        [tool_call_response("inspect", {"name": "sale"}, call_id="c1"), text_response("ok")]
    )
    agent = Agent(provider=provider, model="m1", tools=[inspect_tool(ns)])
    await run_agent(agent)
    result = tool_result(agent.session.events)
    assert result.data["error"]["code"] == "INVALID_ARGS"  # type: ignore[index,call-overload]
    assert result_texts(agent.session.events) == [
        "Error: invalid arguments: no variable 'sale' in the notebook namespace; close matches: "
        "sales, sales_2024. Call inspect without a name to list the variables."
    ]


@pytest.mark.parametrize("wire_on_interrupt", [True, False])
async def test_kernel_style_interrupt_with_the_loop_owning_sigint(wire_on_interrupt: bool) -> None:
    # The kernel claims SIGINT on its loop while a turn runs; the Jupyter interrupt arrives as a
    # real signal while the python tool blocks the loop. With ``on_interrupt`` wired the turn is
    # cancelled right after the call's result; without it the loop's own handler cancels it a few
    # iterations later (here, while the next model request hangs).
    code = "import os, signal, time\nos.kill(os.getpid(), signal.SIGINT)\ntime.sleep(5)"
    script: list[ScriptEntry] = [tool_call_response("python", {"code": code})]
    if not wire_on_interrupt:
        script.append(hang())
    provider = ScriptedProvider(script)
    ns: dict[str, object] = {}
    agent: Agent

    def cancel() -> None:
        agent.cancel()

    agent = Agent(
        provider=provider,
        model="m1",
        tools=[python_tool(CodeRunner(ns), on_interrupt=cancel if wire_on_interrupt else None)],
        approval_policy=ApprovalPolicy("auto"),
    )
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGINT, cancel)
    try:
        started = time.monotonic()
        await run_agent(agent)
        elapsed = time.monotonic() - started
    finally:
        loop.remove_signal_handler(signal.SIGINT)
    assert elapsed < 4.0
    assert turn_ends(agent.session.events) == [{"kind": "aborted", "reason": {"kind": "user"}}]
    result = tool_result(agent.session.events)
    # An interrupted run is "aborted" (card, tool_calls.status), not "failed".
    assert result.data["error"]["code"] == "ABORTED"  # type: ignore[index,call-overload]
    assert result_texts(agent.session.events)[0].startswith(
        "Error: code run failed (abort): interrupted by the user"
    )
    assert "os" in ns  # the namespace keeps what ran before the interrupt
    assert len(provider.requests) == (1 if wire_on_interrupt else 2)


def test_inspect_shows_the_environments_names_not_its_values(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import os

    secret = "cloud-key-Hx7Pq2Nw5Ty8Bv3Lc6"
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", secret)
    ns: dict[str, object] = {"os": os, "env": os.environ}
    defn = inspect_tool(ns)
    for name in ("os.environ", "os.environb", "env"):
        described = defn.execute({"name": name}, ctx())
        text = str(described)
        assert "AWS_SECRET_ACCESS_KEY" in text and secret not in text, text
    listing = str(defn.execute({}, ctx()))
    assert "env" in listing and secret not in listing
