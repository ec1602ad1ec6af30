"""`` $`fig` `` in a chat message: a matplotlib figure, a PIL image or an ``IPython.display.Image``
attaches an image block (reduced like the python tool's), besides the text that says so — for a
text-only model, only the image's stand-in says what became of it."""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Iterator

import matplotlib.pyplot as plt
import pytest
from IPython.display import Image as IPythonImage
from PIL import Image

from dsh_kernel import Agent
from dsh_kernel.kernel.chat_input import ExpandedPrompt, expand_prompt
from dsh_kernel.llm.image_wire import WITHHELD, joined_text, stand_in
from dsh_kernel.llm.types import ImageBlock, TextBlock
from dsh_kernel.runtime.image_reduce import ImageCaps
from dsh_kernel.testing import ScriptedProvider, text_response

from ..runtime.images import make_png


@pytest.fixture
def figure() -> Iterator[object]:
    plt.switch_backend("agg")
    fig, ax = plt.subplots()
    ax.plot([0, 1, 2], [5, 3, 8], label="price")
    ax.set_title("Prices")
    ax.legend()
    try:
        yield fig
    finally:
        plt.close("all")


def expanded(text: str, ns: dict[str, object], **kw: object) -> ExpandedPrompt:
    prompt = expand_prompt(text, ns, **kw)  # type: ignore[arg-type]
    assert prompt is not None
    return prompt


def parts(prompt: ExpandedPrompt) -> tuple[str, list[ImageBlock]]:
    text, *rest = prompt.message.content
    assert isinstance(text, TextBlock)
    return text.text, [b for b in rest if isinstance(b, ImageBlock)]


def test_a_figure_is_attached_as_an_image_block_with_its_description(figure: object) -> None:
    prompt = expanded("What looks wrong in $`fig`?", {"fig": figure}, sends_images=True)
    text, [block] = parts(prompt)
    assert len(prompt.message.content) == 2
    assert block.media_type == "image/png" and block.data is not None
    assert hashlib.sha256(base64.b64decode(block.data)).hexdigest() == block.sha256
    assert '"Prices"' in block.description and 'legend "price"' in block.description
    assert text.startswith("What looks wrong in `fig`?")
    assert '<value of="fig">\n' + block.description in text
    assert "(attached to this message as an image)" in text
    inserted = prompt.message.source.extra["cell"]["inserted"]  # type: ignore[index]
    assert inserted[0]["image"] == block.sha256  # type: ignore[index]
    assert plt.fignum_exists(figure.number)  # type: ignore[attr-defined]  # the user's: left open


def test_for_a_text_only_model_the_message_says_once_what_happens_to_the_image(
    figure: object,
) -> None:
    prompt = expanded("What looks wrong in $`fig`?", {"fig": figure}, sends_images=False)
    text, [block] = parts(prompt)  # attached all the same: a later model may take images
    assert text.endswith(f'<value of="fig">\n{block.description}\n</value>')
    wire = joined_text(prompt.message.content, lambda i: stand_in(i, WITHHELD))
    assert "as an image" not in wire and wire.count("withheld") == 1, wire
    unknown, _ = parts(expanded("And $`fig`?", {"fig": figure}))
    assert "(attached to this message: as an image to a model that takes images, else as text)" in (
        unknown
    )


def test_a_pil_image_is_reduced_like_the_tools_images() -> None:
    img = Image.new("RGB", (3000, 1500), "navy")
    _, [block] = parts(expanded("Look: $`img`", {"img": img}, images=ImageCaps(max_side=512)))
    assert (block.width, block.height) == (512, 256)
    assert block.reduction is not None and block.reduction.startswith("3000x1500 PNG")
    assert block.description == "an image (PIL, 3000x1500, mode RGB)"


def test_an_ipython_image_keeps_its_own_bytes() -> None:
    png = make_png(50, 40)
    _, [block] = parts(expanded("And $`pic`", {"pic": IPythonImage(data=png)}))
    assert base64.b64decode(block.data or "") == png and block.reduction is None


def test_other_values_stay_text_only() -> None:
    prompt = expanded("Sum $`xs`", {"xs": [1, 2, 3]})
    assert len(prompt.message.content) == 1


def test_an_image_that_cannot_be_attached_says_why_and_the_message_still_goes() -> None:
    pic = IPythonImage(url="http://127.0.0.1/none.png")
    text, blocks = parts(expanded("See $`pic`", {"pic": pic}))
    assert blocks == []
    assert "(not attached as an image: it holds no image bytes (an image by URL))" in text
    broken = IPythonImage(data=make_png(4, 4)[:30], format="png")
    text, blocks = parts(expanded("See $`broken`", {"broken": broken}))
    assert blocks == [] and "(not attached as an image: corrupt PNG data (" in text


def test_the_per_message_limit_and_one_block_per_image(figure: object) -> None:
    ns: dict[str, object] = {
        "a": Image.new("L", (8, 8)),
        "b": Image.new("L", (9, 9)),
        "fig": figure,
    }
    text, blocks = parts(expanded("$`a` $`b` $`fig` $`a`", ns, images=ImageCaps(per_call=2)))
    assert [(b.width, b.height) for b in blocks] == [(8, 8), (9, 9)]
    assert "(not attached as an image: the limit is 2 images per message" in text


async def test_the_bytes_are_logged_before_the_message_that_refers_to_them(figure: object) -> None:
    prompt = expanded("Describe $`fig`", {"fig": figure})
    provider = ScriptedProvider([text_response("A line going up and down.")])
    agent = Agent(provider=provider, model="m1")
    agent.followup(prompt.message)
    await agent.when_idle()
    [data] = [e for e in agent.session.events if e.type == "image/data"]
    [message] = [
        e
        for e in agent.session.events
        if e.type == "user/message" and e.data["source"]["kind"] == "user"  # type: ignore[index]
    ]
    assert data.seq < message.seq
    content = message.data["content"]
    assert [b["type"] for b in content] == ["text", "image"]  # type: ignore[index]
    assert content[1]["sha256"] == data.data["sha256"]  # type: ignore[index]
    sent = provider.requests[0].messages[-1]
    assert any(isinstance(b, ImageBlock) for b in sent.content)
