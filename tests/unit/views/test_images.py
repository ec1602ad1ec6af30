"""The images a turn put in front of the model, as its views say them: a tool card's "sent" line and
thumbnail, the description a text-only model got instead, the wording before the next request, a
prompt's and a steer's attachment, and a journal whose image bytes are gone.

Sessions are made by a real ``Agent`` (the log, the tool pipeline, ``record_images`` and the request
header are real); only the model is scripted, and a "vision" model is one whose ``prepare_call``
fills the catalogue defaults of a model that takes images, as the real adapters do.
"""

from __future__ import annotations

import base64
import hashlib
import html as html_module
import re
from collections.abc import Callable, Sequence

from dsh_kernel import Agent
from dsh_kernel.ids import new_message_id
from dsh_kernel.jsonvalue import JsonObject, JsonValue
from dsh_kernel.llm.provider import PreparedCall, apply_defaults
from dsh_kernel.llm.types import (
    ContentBlock,
    ImageBlock,
    LlmCallConfig,
    Message,
    ModelInfo,
    TextBlock,
    UserSource,
)
from dsh_kernel.markup.safe_html import inline_markdown_text as escape_inline_markdown
from dsh_kernel.runtime.text import format_size
from dsh_kernel.session.codec import decode_event, encode_event
from dsh_kernel.session.events import SessionEvent
from dsh_kernel.session.log import Session
from dsh_kernel.session.log_images import image_blocks
from dsh_kernel.testing import ScriptedProvider, ScriptEntry, text_response, tool_call_response
from dsh_kernel.tools.types import ToolContext, ToolDefinition
from dsh_kernel.views import TurnView, fold_turn, static_bundle, turn_events
from dsh_kernel.views.image_note import image_lines, images_html
from dsh_kernel.views.shown_images import (
    ImageDataLookup,
    MessageImages,
    read_images,
    route_takes_images,
)
from dsh_kernel.views.tool_card import ToolCardWidget

from ..runtime.images import make_png
from .helpers import CommLog, attach, replay

ORIGINAL = make_png(200, 150)  # what the code drew: the card's outputs show it
SENT = make_png(40, 30)  # what the model got, reduced
SENT_B64 = base64.b64encode(SENT).decode()
SHA = hashlib.sha256(SENT).hexdigest()
DESCRIPTION = "Figure: 1 axes titled 'loss'; x 'epoch' 0-10; 1 line 'train'"
SENT_LINE = f"Sent to the model: 1 image, 40x30 PNG, {format_size(len(SENT))} (reduced from 200x150 PNG 1 kB)"
WITHHELD_LINE = f"Not sent to the model (text-only model): described as: {DESCRIPTION}"
THUMB = re.compile(r'<img class="dsh-thumb"[^>]*src="data:image/png;base64,([A-Za-z0-9+/=]+)"')


def image(
    *, data: str | None = SENT_B64, sha: str = SHA, description: str = DESCRIPTION
) -> ImageBlock:
    return ImageBlock(
        sha256=sha,
        media_type="image/png",
        width=40,
        height=30,
        size=len(SENT),
        description=description,
        reduction="200x150 PNG 1 kB → 40x30 PNG",
        data=data,
    )


def plot_tool(*images: ImageBlock, on_run: Callable[[], object] | None = None) -> ToolDefinition:
    """A tool whose result carries ``images`` (as the python tool's capture makes them), its card
    showing the original as a rich output."""

    def execute(args: JsonObject, ctx: ToolContext) -> JsonValue:
        if on_run is not None:
            on_run()
        return "drew the plot"

    def render(args: JsonObject, value: JsonValue) -> tuple[ContentBlock, ...]:
        return (TextBlock(text=str(value)), *(images or (image(),)))

    def meta(args: JsonObject, value: JsonValue) -> JsonValue:
        png = base64.b64encode(ORIGINAL).decode()
        return {
            "outputs": [{"output_type": "display_data", "data": {"image/png": png}, "metadata": {}}]
        }

    return ToolDefinition(
        name="plot",
        description="Draw the plot.",
        parameters={"type": "object", "properties": {}},
        execute=execute,
        render=render,
        presentation_meta=meta,
        read_only=True,
    )


class VisionProvider(ScriptedProvider):
    """A scripted model the catalogue knows to take images (the adapters fill the default so)."""

    def prepare_call(self, config: LlmCallConfig) -> PreparedCall:
        return apply_defaults(config, ModelInfo(images=True))


def script() -> list[ScriptEntry]:
    return [tool_call_response("plot", {}, call_id="c1"), text_response("The loss falls.")]


async def run_turn(
    provider: ScriptedProvider, tool: ToolDefinition | None = None, prompt: str | Message = "plot"
) -> tuple[Agent, TurnView, dict[str, str]]:
    agent = Agent(provider=provider, model="m", tools=[tool or plot_tool()])
    view = TurnView(
        tools=agent.registry.get,
        images_in_force=route_takes_images(agent.session.events),
        image_data=agent.session.image_data,
    )
    attach(agent, view)
    agent.followup(prompt)
    await agent.when_idle()
    return agent, view, view.finish()


def card_of(view: TurnView) -> ToolCardWidget:
    (card,) = [b for b in view._blocks.values() if isinstance(b, ToolCardWidget)]
    return card


def says(html: str, line: str) -> int:
    """How many times ``html`` shows ``line`` as text."""
    return html_module.unescape(re.sub(r"<[^>]+>", "", html)).count(line)


def thumbnails(html: str) -> list[bytes]:
    return [base64.b64decode(m) for m in THUMB.findall(html)]


def statics(
    events: Sequence[SessionEvent], turn: int = 1, *, image_data: ImageDataLookup | None = None
) -> dict[str, str]:
    """The saved rendering of ``turn`` drawn from the log alone."""
    part = turn_events(events, turn)
    return static_bundle(fold_turn(part), images=read_images(part, image_data=image_data))


# --- a tool card ---------------------------------------------------------------------------------


async def test_a_vision_model_is_sent_the_image_and_the_card_shows_it(comms: CommLog) -> None:
    provider = VisionProvider(script())
    agent, view, bundle = await run_turn(provider)
    # what the card says is what the request did: the images went, with their bytes
    sent = provider.requests[1]
    assert sent.images is True
    assert [b.data for m in sent.messages for b in image_blocks(m.content)] == [SENT_B64]

    card = card_of(view)
    assert says(card.images.value, SENT_LINE) == 1
    assert thumbnails(card.images.value) == [SENT]
    assert card.images.layout.display != "none"
    # the card's outputs (the original the user sees) are as they were, full size, once
    pngs = [o["data"]["image/png"] for o in card.body.outputs if "image/png" in o.get("data", {})]
    assert [base64.b64decode(p) for p in pngs] == [ORIGINAL]

    html, md = bundle["text/html"], bundle["text/markdown"]
    assert says(html, SENT_LINE) == 1 and thumbnails(html) == [SENT]
    assert escape_inline_markdown(SENT_LINE) in md
    assert SENT_B64 not in md  # the Markdown has the line only; the original stays in it
    assert base64.b64encode(ORIGINAL).decode() in md
    # the log alone draws the same
    again = statics(agent.session.events)
    assert says(again["text/html"], SENT_LINE) == 1 and thumbnails(again["text/html"]) == [SENT]


async def test_a_text_only_model_gets_the_description_and_the_card_says_so(
    comms: CommLog,
) -> None:
    provider = ScriptedProvider(script())
    agent, view, bundle = await run_turn(provider)
    assert provider.requests[1].images is False
    card = card_of(view)
    assert says(card.images.value, WITHHELD_LINE) == 1
    assert thumbnails(card.images.value) == []  # the model saw no image: none is drawn as sent
    assert "Sent to the model" not in bundle["text/html"]
    assert says(bundle["text/html"], WITHHELD_LINE) == 1 and thumbnails(bundle["text/html"]) == []
    assert escape_inline_markdown(WITHHELD_LINE) in bundle["text/markdown"]
    assert says(statics(agent.session.events)["text/html"], WITHHELD_LINE) == 1


async def test_before_the_next_request_the_card_says_what_the_header_in_force_will_do() -> None:
    for provider, line in (
        (VisionProvider(script()), "Goes to the model with the next request: 1 image, 40x30 PNG"),
        (
            ScriptedProvider(script()),
            "Goes to the model as text with the next request (the current model is text-only): "
            f"described as: {DESCRIPTION}",
        ),
    ):
        agent = Agent(provider=provider, model="m", tools=[plot_tool()])
        agent.followup("plot")
        await agent.when_idle()
        events = list(agent.session.events)
        upto = next(i for i, e in enumerate(events) if e.type == "tool/result") + 1
        images = read_images(events[:upto])
        card = images.card("c1")
        assert card is not None and card.pending
        assert says(images_html(card), line) == 1
        # once the next request has gone out, it is decided
        done = read_images(events).card("c1")
        assert done is not None and not done.pending


async def test_an_image_whose_bytes_are_gone_from_the_log_degrades_to_its_description(
    comms: CommLog,
) -> None:
    provider = VisionProvider(script())
    agent = Agent(provider=provider, model="m", tools=[plot_tool()])
    agent.followup("plot")
    await agent.when_idle()
    # a journal edited by hand: the image/data line now holds some other image's hash
    lines = [encode_event(e) for e in agent.session.events]
    lines = [ln.replace(SHA, "0" * 64) if '"image/data"' in ln else ln for ln in lines]
    edited = Session(
        header=agent.session.header,
        seed=[e for ln in lines if (e := decode_event(ln, None)) is not None],
    )
    assert edited.image_data(SHA) is None
    view = TurnView(image_data=edited.image_data)
    html = replay(edited.events, view)["text/html"]
    line = (
        "Sent to the model as text (its bytes are not in the session log): described as: "
        f"{DESCRIPTION}"
    )
    assert says(html, line) == 1 and says(card_of(view).images.value, line) == 1
    assert thumbnails(html) == []
    # the card's own outputs are untouched
    assert base64.b64encode(ORIGINAL).decode() in html
    assert says(statics(edited.events, image_data=edited.image_data)["text/html"], line) == 1


async def test_a_later_turn_draws_an_image_sent_earlier_from_the_session_index(
    comms: CommLog,
) -> None:
    provider = VisionProvider([*script(), *script()])
    agent = Agent(provider=provider, model="m", tools=[plot_tool()])
    agent.followup("plot")
    await agent.when_idle()
    view = TurnView(
        images_in_force=route_takes_images(agent.session.events),
        image_data=agent.session.image_data,
    )
    attach(agent, view)
    agent.followup("plot again")
    await agent.when_idle()
    second = turn_events(agent.session.events, 2)
    # same image: its bytes are logged once, in turn 1; turn 2 logs no header of its own either
    assert not [e for e in second if e.type in ("image/data", "request/header")]
    assert provider.requests[3].images is True
    bundle = view.finish()
    assert says(bundle["text/html"], SENT_LINE) == 1 and thumbnails(bundle["text/html"]) == [SENT]


async def test_a_switch_to_a_text_only_model_is_said_on_the_later_turn(comms: CommLog) -> None:
    vision = VisionProvider(script())
    agent = Agent(provider=vision, model="m", tools=[plot_tool()])
    agent.followup("plot")
    await agent.when_idle()
    agent.set_route(provider=ScriptedProvider(script(), id="text-only"), model="t")
    view = TurnView(
        images_in_force=route_takes_images(agent.session.events),
        image_data=agent.session.image_data,
    )
    attach(agent, view)
    agent.followup("plot again")
    await agent.when_idle()
    assert says(view.finish()["text/html"], WITHHELD_LINE) == 1
    assert (
        says(statics(agent.session.events, 1)["text/html"], SENT_LINE) == 1
    )  # turn 1 is as it was


# --- a prompt, a steer ---------------------------------------------------------------------------


def prompt_with_image() -> Message:
    return Message(
        id=new_message_id(),
        role="user",
        content=(TextBlock(text="What is wrong with this plot?"), image()),
        source=UserSource(),
    )


async def test_a_prompt_with_an_image_says_it_was_attached(comms: CommLog) -> None:
    for provider, line, thumbs in (
        (VisionProvider([text_response("It is fine.")]), "Attached, sent to the model: 1 image", 1),
        (
            ScriptedProvider([text_response("It is fine.")]),
            f"Attached, not sent to the model (text-only model): described as: {DESCRIPTION}",
            1,  # the attachment is still shown: nothing else in the cell does
        ),
    ):
        agent, view, bundle = await run_turn(provider, prompt=prompt_with_image())
        assert says(view.attached.value, line) == 1 and view.attached.layout.display != "none"
        assert thumbnails(view.attached.value) == [SENT] * thumbs
        assert says(bundle["text/html"], line) == 1 and thumbnails(bundle["text/html"]) == [SENT]
        assert "📎" in bundle["text/markdown"]
        # the prompt's bytes are logged when it is queued, before its turn: the log's index has them
        saved = statics(agent.session.events, image_data=agent.session.image_data)
        assert says(saved["text/html"], line) == 1


async def test_a_steer_with_an_image_says_it_was_attached(comms: CommLog) -> None:
    provider = VisionProvider(script())
    holder: list[Agent] = []
    tool = plot_tool(on_run=lambda: holder[0].steer(prompt_with_image()))
    agent = Agent(provider=provider, model="m", tools=[tool])
    holder.append(agent)
    view = TurnView(image_data=agent.session.image_data)
    attach(agent, view)
    agent.followup("plot")
    await agent.when_idle()
    bundle = view.finish()
    html = bundle["text/html"]
    assert says(html, "What is wrong with this plot?") == 1
    assert says(html, "Attached, sent to the model: 1 image") == 1
    assert thumbnails(html) == [SENT, SENT]  # the card's and the steer's
    assert view.attached.layout.display == "none"  # the prompt itself had none


# --- the words -----------------------------------------------------------------------------------


def test_several_images_get_a_count_line_and_one_line_each() -> None:
    two = (image(), image(sha="b" * 64, data=None))
    sent = image_lines(MessageImages(images=two, as_images=True))
    assert [line.text for line in sent] == [
        "Sent to the model: 2 images",
        f"40x30 PNG, {format_size(len(SENT))} (reduced from 200x150 PNG 1 kB)",
        f"40x30 PNG, {format_size(len(SENT))} (reduced from 200x150 PNG 1 kB), as text (its bytes "
        f"are not in the session log): described as: {DESCRIPTION}",
    ]
    assert [line.thumbnail is not None for line in sent] == [False, True, False]
    withheld = image_lines(MessageImages(images=two, as_images=False))
    assert withheld[0].text == "Not sent to the model (text-only model): 2 images, described as:"
    assert all(line.thumbnail is None for line in withheld)


def test_no_header_known_says_both_ways() -> None:
    (line,) = image_lines(MessageImages(images=(image(),), as_images=None, pending=True))
    assert line.text.startswith(
        "Goes to the model with the next request, as an image if the model takes images, else as "
        "text: 1 image, 40x30 PNG"
    )
    assert DESCRIPTION in line.text


def test_hostile_metadata_is_escaped_and_bad_bytes_are_never_put_in_a_tag() -> None:
    evil = image(data='AAAA" onerror="alert(1)', description="<script>alert(1)</script>")
    for route in (True, False, None):
        html = images_html(MessageImages(images=(evil,), as_images=route), attached=True)
        assert "<script>" not in html and "onerror" not in html and "<img" not in html
    described = images_html(MessageImages(images=(evil,), as_images=False))
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in described
    svg = ImageBlock(
        sha256="c" * 64,
        media_type="image/svg+xml",
        width=1,
        height=1,
        size=10,
        description="d",
        data=base64.b64encode(b"<svg onload='x'/>").decode(),
    )
    assert "<img" not in images_html(MessageImages(images=(svg,), as_images=True))
