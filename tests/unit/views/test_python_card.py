"""The card of the real ``python`` tool (dsh_kernel.runtime): its meta (streams, rich outputs,
failure) drawn live and statically."""

from __future__ import annotations

import base64
from collections.abc import Iterator

import pytest
from IPython.core.interactiveshell import InteractiveShell
from traitlets.config import Config

from dsh_kernel import Agent
from dsh_kernel.kernel.toolbox.python import python_tool
from dsh_kernel.runtime.runner import CodeRunner
from dsh_kernel.testing import ScriptedProvider, text_response, tool_call_response
from dsh_kernel.views import TurnView
from dsh_kernel.views.tool_card import ToolCardWidget

from ..runtime.images import make_png
from .helpers import CommLog, attach, html_text, replay, state_of

PNG = make_png(4, 3)
CODE = (
    "import IPython.display as d\n"
    "print('rows:', 3)\n"
    f"d.display(d.Image(data={PNG!r}, format='png'))\n"
    "x = 1 < 2\n"
)


@pytest.fixture
def shell() -> Iterator[InteractiveShell]:
    """A real IPython shell (history off), as the kernel's: display() goes through it."""
    config = Config()
    config.HistoryManager.enabled = False
    sh = InteractiveShell.instance(config=config)
    try:
        yield sh
    finally:
        InteractiveShell.clear_instance()


def card_of(view: TurnView) -> ToolCardWidget:
    (card,) = [b for b in view._blocks.values() if isinstance(b, ToolCardWidget)]
    return card


async def run(
    code: str, shell: InteractiveShell, *, live_outputs: bool = False
) -> tuple[Agent, TurnView, dict[str, str]]:
    tool = python_tool(CodeRunner(shell.user_ns, shell=shell))
    provider = ScriptedProvider(
        [
            tool_call_response("python", {"code": code, "description": "Plot rows"}, call_id="c1"),
            text_response("done"),
        ]
    )
    agent = Agent(provider=provider, model="m", tools=[tool])
    agent.set_approval("auto", "python")
    view = TurnView(tools=agent.registry.get, live_outputs=live_outputs)
    attach(agent, view)
    agent.followup("go")
    await agent.when_idle()
    return agent, view, view.finish()


async def test_python_run_shows_code_streams_and_image(
    comms: CommLog, shell: InteractiveShell
) -> None:
    agent, view, bundle = await run(CODE, shell)
    card = card_of(view)
    assert "Plot rows" in card.head.value and ">done<" in card.head.value
    assert html_text(card.sections.value).startswith("Code" + "import IPython")
    assert 'class="language-python"' in card.sections.value
    outputs = card.body.outputs
    kinds = [o["output_type"] for o in outputs]
    assert kinds == ["stream", "display_data"]
    assert outputs[0]["text"] == "rows: 3\n"
    b64 = outputs[1]["data"]["image/png"]
    assert base64.b64decode(b64) == PNG
    assert card.details.selected_index == 0
    assert f"data:image/png;base64,{b64.strip()}" in bundle["text/html"]
    fresh = TurnView(tools=agent.registry.get)
    replay(list(agent.session.events), fresh)
    assert state_of(fresh.widget) == state_of(view.widget)


async def test_python_failure_shows_the_traceback(comms: CommLog, shell: InteractiveShell) -> None:
    _, view, bundle = await run("print('before')\n1 / 0\n", shell)
    card = card_of(view)
    assert "dsh-status-failed" in card.head.value
    outputs = card.body.outputs
    assert [o["output_type"] for o in outputs] == ["stream", "error"]
    error = outputs[1]
    assert error["ename"] == "ZeroDivisionError" and "division by zero" in error["evalue"]
    assert "ZeroDivisionError" in bundle["text/html"]


RICH = (
    "import IPython.display as d\n"
    "d.display({'text/html': '<b onmouseover=1>table</b>', 'application/javascript': 'x=1',\n"
    "           'image/svg+xml': '<svg onload=\"x=1\"/>', 'text/markdown': '**md**',\n"
    "           'text/plain': 'plain'}, raw=True)\n"
    f"d.display(d.Image(data={PNG!r}, format='png'))\n"
)


async def test_rich_outputs_are_shown_whole_only_when_the_code_ran_live_here(
    comms: CommLog, shell: InteractiveShell
) -> None:
    agent, live, _ = await run(RICH, shell, live_outputs=True)
    shown = card_of(live).body.outputs
    assert shown[0]["data"]["text/html"] == "<b onmouseover=1>table</b>"  # as a cell of yours
    # The same events read back (a replay, an import): no markup of theirs reaches the page.
    fresh = TurnView(tools=agent.registry.get)
    replay(list(agent.session.events), fresh)
    reduced = card_of(fresh).body.outputs
    assert [sorted(o["data"]) for o in reduced] == [["text/plain"], ["image/png", "text/plain"]]
    assert reduced[0]["data"]["text/plain"] == "plain"
    assert base64.b64decode(reduced[1]["data"]["image/png"]) == PNG
