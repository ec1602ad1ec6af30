"""The reasoning effort, set from the notebook, through a real kernel (issue 12, item 7).

The kernel starts as DeepSeek at the loopback server with ``DSH_REASONING=low``. ``%agent reasoning``
shows and sets the effort; it accepts each model's own efforts from the catalogue and refuses others
with ``UNSUPPORTED_REASONING_EFFORT`` (the cell fails, nothing changes); the effective effort is in
``%agent status``, the logged request header (SQL's ``requests.config``) and the footer, and it is
what goes on the wire: DeepSeek's thinking toggle + ``reasoning_effort``, Claude 5.x's adaptive
thinking + ``output_config.effort``. A model switch keeps the effort when the new model takes it and
says so when it does not. An effort configured for a model that does not take it fails the cell with
a line naming ``DSH_REASONING``.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support import wire_transcripts as wt
from tests.support.frontend import markdown_footer
from tests.support.kernel import Kernel, start_kernel
from tests.support.sse_server import SseServer, sse_reply


def chat_reply(text: str) -> Any:
    return sse_reply(
        wt.sse(
            wt.chat_chunk({"role": "assistant", "content": ""}),
            wt.chat_chunk({"content": text}),
            wt.chat_chunk({}, finish_reason="stop"),
            "[DONE]",
        )
    )


def env_for(server: SseServer, tmp: Path, **extra: str) -> dict[str, str]:
    return {
        "DSH_PROVIDER": "deepseek",
        "DEEPSEEK_BASE_URL": server.url,
        "DEEPSEEK_API_KEY": "sk-reasoning-test",
        "ANTHROPIC_BASE_URL": server.url,
        "ANTHROPIC_API_KEY": "sk-ant-reasoning-test",
        "IPYTHONDIR": str(tmp / "ipython"),
        **extra,
    }


@pytest.fixture(scope="module")
def rig(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Kernel, SseServer]]:
    tmp = tmp_path_factory.mktemp("reasoning")
    with (
        SseServer() as server,
        start_kernel(tmp, "dsh", env=env_for(server, tmp, DSH_REASONING="low")) as k,
    ):
        yield k, server


def turn(k: Kernel, server: SseServer, reply: Any, text: str) -> tuple[dict[str, Any], str]:
    """One chat turn: ``(the request body the server got, the turn's footer line)``."""
    server.script(reply)  # also forgets the requests of earlier scripts
    ex = k.execute(f"Say {text}.")
    assert ex.status == "ok", ex.content
    final = ex.data("text/markdown")[-1]
    assert text in final
    assert len(server.requests) == 1
    return server.requests[0].json, markdown_footer(final)


def command(k: Kernel, line: str) -> str:
    ex = k.execute(line)
    assert ex.status == "ok", ex.content
    return ex.stdout


def logged_efforts(k: Kernel) -> list[str | None]:
    """``reasoningEffort`` of every request header this session logged, in order."""
    return [
        e["data"]["header"]["config"].get("reasoningEffort")
        for e in k.events()
        if e["type"] == "request/header"
    ]


def test_the_configured_effort_is_sent_shown_and_logged(rig: tuple[Kernel, SseServer]) -> None:
    k, server = rig
    body, footer = turn(k, server, chat_reply("one"), "one")
    assert body["thinking"] == {"type": "enabled"} and body["reasoning_effort"] == "low"
    assert "reasoning low" in footer
    status = command(k, "%agent status")
    assert "reasoning: low (set); deepseek-flash takes off, low, high, max" in status
    assert logged_efforts(k)[-1] == "low"
    k.python("get_ipython().kernel.host.flush()")
    sid = k.python("print(get_ipython().kernel.host.agent.session.id)").strip()
    ex = k.execute(
        f"%%sql _cfg <<\nSELECT config FROM requests WHERE session_id = '{sid}' ORDER BY request"
    )
    assert ex.status == "ok", ex.content
    configs = json.loads(k.python("print(_cfg.to_json(orient='records'))"))
    assert json.loads(configs[-1]["config"])["reasoningEffort"] == "low"


def test_reasoning_sets_the_effort_and_refuses_one_the_model_does_not_take(
    rig: tuple[Kernel, SseServer],
) -> None:
    k, server = rig
    assert "reasoning: off (set)" in command(k, "%agent reasoning off")
    body, footer = turn(k, server, chat_reply("two"), "two")
    assert body["thinking"] == {"type": "disabled"} and "reasoning_effort" not in body
    assert "reasoning off" in footer

    ex = k.execute("%agent reasoning medium")
    assert ex.status == "error" and ex.content["ename"] == "UNSUPPORTED_REASONING_EFFORT"
    assert "'medium'" in ex.content["evalue"] and "off, low, high, max" in ex.content["evalue"]
    assert "reasoning: off (set)" in command(k, "%agent reasoning")  # nothing changed

    assert "reasoning: high (the model's default)" in command(k, "%agent reasoning default")
    body, footer = turn(k, server, chat_reply("three"), "three")
    assert body["reasoning_effort"] == "high" and "reasoning high" in footer
    assert logged_efforts(k)[-3:] == ["low", "off", "high"]  # each change is a header change


def test_a_model_switch_keeps_the_effort_only_where_the_model_takes_it(
    rig: tuple[Kernel, SseServer],
) -> None:
    k, server = rig
    command(k, "%agent reasoning max")
    out = command(k, "%agent model anthropic:claude-haiku-4-5")
    assert "does not take reasoning effort 'max'" in out and "default applies, off" in out
    out = command(k, "%agent model claude-sonnet-5-5")
    assert "does not take" not in out
    command(k, "%agent reasoning xhigh")
    body, footer = turn(k, server, sse_reply(wt.ANTHROPIC_TEXT), "Hi from E.")
    assert body["model"] == "claude-sonnet-5-5"
    assert body["thinking"] == {"type": "adaptive"} and body["output_config"] == {"effort": "xhigh"}
    assert "anthropic:claude-sonnet-5-5" in footer and "reasoning xhigh" in footer
    status = command(k, "%agent status")
    assert "reasoning: xhigh (set)" in status
    ex = k.execute("%agent reasoning ultra")
    assert ex.status == "error" and ex.content["ename"] == "UNSUPPORTED_REASONING_EFFORT"
    # back to DeepSeek for any later test of this module
    command(k, "%agent provider deepseek")


def test_a_configured_effort_the_model_does_not_take_fails_the_cell_naming_it(
    tmp_path: Path,
) -> None:
    with (
        SseServer() as server,
        start_kernel(tmp_path, "dsh", env=env_for(server, tmp_path, DSH_REASONING="medium")) as k,
    ):
        ex = k.execute("Say hi.")
        assert ex.status == "error" and ex.content["ename"] == "UNSUPPORTED_REASONING_EFFORT"
        assert "DSH_REASONING" in ex.content["evalue"] and "'medium'" in ex.content["evalue"]
        assert server.requests == []  # nothing was sent
        assert k.python("print(6 * 7)").strip() == "42"  # the kernel lives on
