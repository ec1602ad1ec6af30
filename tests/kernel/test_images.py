"""Images in a real ``dsh`` kernel (issue 15): the model's ``python`` code draws a matplotlib plot and
the logged ``tool/result`` carries an image block whose bytes are an ``image/data`` event, the cell
shows the figure once (in the card), the figure is closed; `` $`fig` `` attaches an image block to
the user message; the per-call limit comes from ``DSH_IMAGES_PER_CALL``; a bad image setting fails
the chat cell with one line and the kernel keeps running."""

from __future__ import annotations

import base64
import hashlib
import io
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from PIL import Image

from tests.kernel.conftest import provider_env
from tests.support import scenarios as sc
from tests.support.frontend import Frontend, saved_bundle
from tests.support.kernel import start_kernel
from tests.support.sse_server import SseServer

PLOT = (
    "import matplotlib.pyplot as plt\n"
    "plt.plot([1, 2, 3, 4], [1, 4, 9, 16], label='squares')\n"
    "plt.title('Squares')\n"
    "plt.legend()\n"
    "print('drawn')"
)


@pytest.fixture(scope="module")
def rig(server: SseServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Frontend]:
    tmp = tmp_path_factory.mktemp("images")
    env = provider_env(server, tmp, DSH_APPROVAL="auto", DSH_IMAGES_PER_CALL="1")
    with start_kernel(tmp, "dsh", env=env) as kernel:
        yield Frontend(kernel)


def turn_events(fe: Frontend) -> list[dict[str, Any]]:
    events = fe.events()
    start = max(i for i, e in enumerate(events) if e["type"] == "turn/start")
    return events[start:]


def image_outputs(fe: Frontend, model_ids: set[str]) -> list[dict[str, Any]]:
    """The image outputs held by the open ``Output`` widgets among ``model_ids`` (the card's body;
    the live area that showed the running code's output is closed once its result is in)."""
    found = []
    for mid in model_ids:
        model = fe.models[mid]
        if model.name == "OutputModel" and model.open:
            for out in model.state.get("outputs") or ():
                if isinstance(out, dict) and "image/png" in out.get("data", {}):
                    found.append(out)
    return found


def test_a_plot_the_model_draws_is_an_image_block_with_its_bytes_logged(
    rig: Frontend, server: SseServer
) -> None:
    server.script(sc.python_call(PLOT), sc.text("A rising curve."))
    before = set(rig.models)
    ex = rig.run("Plot the squares and tell me what you see.")
    assert ex.status == "ok", ex.content
    events = turn_events(rig)
    [result] = [e for e in events if e["type"] == "tool/result"]
    assert "error" not in result["data"]
    [tool_block] = result["data"]["message"]["content"]
    text, image = tool_block["content"]
    assert text["type"] == "text" and text["text"].startswith("drawn\n[image/png ")
    assert image["type"] == "image" and image["mediaType"] == "image/png"
    assert '"Squares"' in image["description"] and 'legend "squares"' in image["description"]
    assert "data" not in image
    [data] = [e for e in events if e["type"] == "image/data"]
    assert data["data"]["sha256"] == image["sha256"] and data["seq"] < result["seq"]
    raw = base64.b64decode(data["data"]["data"])
    assert hashlib.sha256(raw).hexdigest() == image["sha256"] and len(raw) == image["bytes"]
    png = Image.open(io.BytesIO(raw))
    assert png.format == "PNG" and png.size == (image["width"], image["height"])
    assert max(png.size) <= 1024
    # the cell shows the figure once: in the card, not as an output of its own
    assert ex.data("image/png") == []
    assert len(image_outputs(rig, set(rig.models) - before)) == 1
    assert saved_bundle(ex)["text/html"].count("data:image/png;base64,") == 1
    # the figure was closed: a later cell does not show it again
    later = rig.run("%%python\nimport matplotlib.pyplot as plt\nprint(plt.get_fignums())")
    assert later.stdout.strip() == "[]" and later.data("image/png") == []
    # the model was asked again with the result; this route is not known to take images, so the
    # request carries no image part anywhere, and the figure's description stands in for it
    assert len(server.requests) == 2
    follow_up = server.requests[1]
    assert "image_url" not in follow_up.body.decode()
    [tool_msg] = [m for m in follow_up.json["messages"] if m["role"] == "tool"]
    assert "withheld: this model takes no images" in tool_msg["content"]
    assert "Squares" in tool_msg["content"] and "drawn" in tool_msg["content"]


def test_the_per_call_limit_comes_from_the_environment(rig: Frontend, server: SseServer) -> None:
    code = (
        "import matplotlib.pyplot as plt\n"
        "plt.figure(); plt.plot([1, 2])\n"
        "plt.figure(); plt.plot([2, 1])\n"
    )
    server.script(sc.python_call(code), sc.text("Two lines."))
    ex = rig.run("Draw two figures.")
    assert ex.status == "ok", ex.content
    [result] = [e for e in turn_events(rig) if e["type"] == "tool/result"]
    content = result["data"]["message"]["content"][0]["content"]
    assert [b["type"] for b in content] == ["text", "image"]
    assert content[0]["text"].endswith(
        "\n[1 more image not sent: the limit is 1 per call (DSH_IMAGES_PER_CALL)]"
    )


def test_dollar_fig_attaches_an_image_block_to_the_user_message(
    rig: Frontend, server: SseServer
) -> None:
    rig.python(
        "import matplotlib.pyplot as plt\n"
        "fig, ax = plt.subplots()\n"
        "ax.bar(['a', 'b', 'c'], [3, 1, 2])\n"
        "ax.set_title('Votes')"
    )
    server.script(sc.text("Three bars."))
    ex = rig.run("What does $`fig` show?")
    assert ex.status == "ok", ex.content
    events = turn_events(rig)
    [message] = [
        e for e in events if e["type"] == "user/message" and e["data"]["source"]["kind"] == "user"
    ]
    text, image = message["data"]["content"]
    # a text-only route: the message says once what became of the image (the stand-in's withheld)
    assert "as an image" not in text["text"]
    assert image["type"] == "image" and '"Votes"' in image["description"]
    assert "1 bar series (3 bars)" in image["description"]
    logged = {e["data"]["sha256"]: e["seq"] for e in rig.events() if e["type"] == "image/data"}
    assert logged[image["sha256"]] < message["seq"]  # the bytes before the reference
    inserted = message["data"]["source"]["cell"]["inserted"]
    assert inserted[0]["image"] == image["sha256"]
    body = json.dumps(server.requests[-1].json)
    assert len(body) < 200_000  # a text-only route: the description, never megabytes of base64
    [sent] = [
        m["content"]
        for m in server.requests[-1].json["messages"]
        if m["role"] == "user" and "What does `fig` show?" in json.dumps(m["content"])
    ]
    assert sent.count("withheld: this model takes no images") == 1, sent
    assert "as an image" not in sent


def test_a_bad_image_setting_fails_the_chat_cell_with_one_line_and_the_kernel_lives(
    server: SseServer, tmp_path: Path
) -> None:
    env = provider_env(server, tmp_path, DSH_IMAGE_MAX_SIDE="huge")
    with start_kernel(tmp_path, "dsh", env=env) as kernel:
        server.script(sc.text("never asked"))
        ex = kernel.execute("Hello?")
        assert ex.status == "error"
        assert ex.content["ename"] == "USAGE"
        assert ex.content["evalue"].startswith(
            "DSH_IMAGE_MAX_SIDE='huge' is not valid: give the longest side in pixels, a whole "
            "number from 64 to 8,192"
        )
        assert "\n" not in ex.content["evalue"]
        assert server.requests == []
        assert kernel.python("print(6 * 7)").strip() == "42"
