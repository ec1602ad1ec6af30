"""The vision setting through a real kernel: ``c.DshKernel.vision`` in the Jupyter config reaches
``%agent status`` and sends the plot the model's code draws in the next request, and a bad ``DSH_VISION`` fails each cell with one line naming the accepted values
— the kernel stays up, Python cells still run, and nothing reaches the model."""

from __future__ import annotations

import base64
import json
from pathlib import Path

from tests.kernel.conftest import provider_env
from tests.kernel.test_images import PLOT
from tests.support import scenarios as sc
from tests.support.kernel import start_kernel
from tests.support.sse_server import SseServer


def test_the_traitlet_sends_images_to_a_compatible_server(tmp_path: Path) -> None:
    profile = tmp_path / "ipython" / "profile_default"
    profile.mkdir(parents=True)
    (profile / "ipython_kernel_config.py").write_text(
        "c.DshKernel.vision = 'on'\n", encoding="utf-8"
    )
    with (
        SseServer() as server,
        start_kernel(
            tmp_path,
            "dsh",
            env=provider_env(server, tmp_path, DSH_MODEL="llava", DSH_APPROVAL="auto"),
        ) as k,
    ):
        ex = k.execute("%agent status")
        assert ex.status == "ok", ex.content
        assert "images:   sent to the model (configured: vision on)" in ex.stdout, ex.stdout
        assert k.python("print(get_ipython().kernel.host.agent.images)").strip() == "True"
        # end to end: the model's code draws a plot, and the next request carries that plot
        server.script(sc.python_call(PLOT), sc.text("The curve rises."))
        ex = k.execute("Plot the squares and tell me what looks wrong.", timeout=120)
        assert ex.status == "ok", ex.content
        follow_up = server.requests[1].json["messages"]
        tool_at = next(i for i, m in enumerate(follow_up) if m["role"] == "tool")
        tool_text = follow_up[tool_at]["content"]  # the tool message stays text
        assert isinstance(tool_text, str) and "data:image" not in tool_text
        assert "[image 1 of this result: follows in the next user message]" in tool_text
        assert len(follow_up) > tool_at + 1, follow_up[tool_at]
        images_msg = follow_up[tool_at + 1]
        assert images_msg["role"] == "user"
        [part] = [p for p in images_msg["content"] if p["type"] == "image_url"]
        head, b64 = part["image_url"]["url"].split(",", 1)
        assert head == "data:image/png;base64"
        events = json.loads(
            k.python(
                "import json as _j\n"
                "print(_j.dumps([e.data for e in get_ipython().kernel.host.agent.session.events"
                " if e.type == 'image/data']))"
            )
        )
        assert [e["data"] for e in events] == [b64]  # the logged bytes, sent once
        assert base64.b64decode(b64).startswith(b"\x89PNG")


def test_a_bad_value_is_one_line_naming_on_off_and_auto(tmp_path: Path) -> None:
    with (
        SseServer() as server,
        start_kernel(tmp_path, "dsh", env=provider_env(server, tmp_path, DSH_VISION="maybe")) as k,
    ):
        expected = (
            "DSH_VISION='maybe' is not a vision setting: use on (images go to the model), off "
            "(their text descriptions do) or auto (as the model catalogue says)"
        )
        chat = k.execute("Describe the plot.", timeout=60)
        assert chat.status == "error" and chat.content["ename"] == "USAGE", chat.content
        assert expected in chat.content["evalue"] and "\n" not in chat.content["evalue"]
        status = k.execute("%agent status")
        assert status.status == "error" and expected in status.content["evalue"], status.content
        assert k.python("print(1 + 1)").strip() == "2"  # the kernel is alive
        assert server.requests == []
