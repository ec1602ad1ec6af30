"""A tool result's image in a real ``dsh`` kernel whose model takes no images (the loopback server
as an OpenAI-compatible server the catalogue does not know): the saved card says the image was
withheld and what the model got instead, on the turn that logs the request header and on a later
turn that logs none (the kernel's view then knows the header in force from the log)."""

from __future__ import annotations

import html
import re

from tests.kernel.conftest import Live
from tests.support import scenarios as sc
from tests.support.frontend import saved_bundle
from tests.support.image_tool import SENT_LINE, WITHHELD_LINE, tool_module

REGISTER = (
    tool_module()
    + "\n_dispose_draw = get_ipython().kernel.host.agent.registry.register(draw_loss)\n"
)
HEADERS_SINCE_LAST_TURN = """
_events = list(get_ipython().kernel.host.agent.session.events)
_start = max(i for i, e in enumerate(_events) if e.type == "turn/start")
print("headers:", sum(e.type == "request/header" for e in _events[_start:]))
"""


def text_of(markup: str) -> str:
    return html.unescape(re.sub(r"<[^>]+>", "", markup))


def test_a_text_only_model_s_card_says_the_image_was_withheld(live: Live) -> None:
    live.fe.python(REGISTER)
    try:
        for prompt in ("Plot the loss.", "Plot it again."):
            live.server.script(sc.tool_calls(("draw_loss", {})), sc.text("It rises after 6."))
            ex = live.fe.run(prompt)
            assert ex.status == "ok", ex.content
            saved = saved_bundle(ex)
            assert text_of(saved["text/html"]).count(WITHHELD_LINE) == 1
            assert SENT_LINE not in text_of(saved["text/html"])
            assert 'class="dsh-thumb"' not in saved["text/html"]
            # the model got the description's stand-in, not an image part
            body = live.server.requests[1].json
            assert isinstance(body, dict) and "image_url" not in str(body["messages"])
        # the second turn logged no header of its own: its wording came from the one in force
        assert "headers: 0" in live.fe.python(HEADERS_SINCE_LAST_TURN)
    finally:
        live.fe.python("_dispose_draw()")
