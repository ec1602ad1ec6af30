"""The static rendering of a turn: what a saved notebook shows with no kernel.

A finished chat cell leaves ``{"text/markdown": render_markdown(m), "text/html": render_html(m)}``
in place of its widgets, so JupyterLab (without the kernel), nbconvert (HTML first), GitHub and
nbviewer show the conversation. Both say the same: the answer as Markdown, reasoning folded in a
``<details>`` block with its length, each tool call's status and duration, its arguments (fenced,
Python highlighted where Markdown is rendered) and result text, or the rich outputs' images inline
as data URIs when under ``MAX_INLINE_IMAGE`` and their ``text/plain`` otherwise; steering messages,
retry notices, how the turn ended (error code and what to do) and the footer line. With the turn's
``TurnImages`` (``views.shown_images``), each card and the prompt and steering messages also say which
images they put in front of the model and how (``views.image_note``): a line each, and in the HTML
a small thumbnail of what the model was sent.

The HTML draws what the live view draws, with its classes: a ``dsh-card`` per call with the
header line (icon, title, tool name, a ``dsh-pill dsh-status-<status>`` badge, a note such as
"recovered from text", the duration) over a
``Details`` fold, open where the live one opens by itself (an approval was asked, or rich outputs);
code blocks — arguments, results, the fences in model text such as a suggested ``%%sql`` query — as
``<pre class="dsh-code"><code class="language-…">``. The look is written inline
(``markup.static_style``: JupyterLab's sanitiser removes ``<style>`` from untrusted notebooks).

Both renderings are pure functions of a ``TurnModel`` (``fold_turn(turn_events(log, n))``) plus the
optional tool lookup, model info, session id and images (``read_images(turn_events(log, n))``).
Nothing that came from outside becomes markup (``markup.safe_html``): the HTML is built by the same
functions the live view uses and passes ``sanitize`` as a whole, inside a container MathJax skips;
the Markdown alternative escapes every HTML-significant character of outside text, writes code
as entity-escaped ``<pre><code>`` and sits in such a container too (a ``<div>`` on lines of its own,
so the Markdown inside is still Markdown): a frontend's Markdown renderer typesets no ``$…$`` in it.
Tool outputs are reduced (``views.outputs``): a raster image whose payload is strict base64,
embedded as a data URI under ``MAX_INLINE_IMAGE``, else named; otherwise their text. Their HTML, SVG, Markdown and LaTeX are never embedded. Arguments are shown whole (they
are what ran); result texts are cut at ``MAX_STATIC_TEXT`` with a marker.
"""

from __future__ import annotations

from typing import Final

from dsh_kernel.jsonvalue import JsonObject
from dsh_kernel.llm.types import ModelInfo
from dsh_kernel.markup.safe_html import (
    NO_MATH,
    code_html,
    escape,
    inline_markdown_text,
    markdown_alternative,
    markdown_code,
    markdown_html,
    sanitize,
    text_html,
)
from dsh_kernel.markup.static_style import attrs
from dsh_kernel.transcript.model import (
    HeldItem,
    NoticeItem,
    ReasoningItem,
    SteerItem,
    TextItem,
    ToolCardModel,
    ToolItem,
    TurnModel,
)
from dsh_kernel.transcript.turn import TurnFold, find_turn, fold_turn, turn_events
from dsh_kernel.views.card_content import (
    RECOVERED_TITLE,
    CardView,
    Section,
    ToolLookup,
    card_view,
    lookup,
)
from dsh_kernel.views.format import (
    end_notice,
    footer_parts,
    held_note,
    notice_classes,
    notice_icon,
    tokens,
)
from dsh_kernel.views.image_note import images_html, images_markdown
from dsh_kernel.views.outputs import image_of, plain_text
from dsh_kernel.views.shown_images import NO_IMAGES, MessageImages, TurnImages

__all__ = [
    "MAX_INLINE_IMAGE",
    "TurnFold",
    "TurnModel",
    "find_turn",
    "fold_turn",
    "render_html",
    "render_markdown",
    "static_bundle",
    "turn_events",
]

MAX_INLINE_IMAGE: Final = 1_000_000
"""Largest base64 image (characters) embedded as a data URI; larger ones are named, not shown."""


def _reasoning_title(item: ReasoningItem) -> str:
    """As the live view's fold title (``turn._ReasoningBlock``)."""
    title = "Reasoning (redacted)" if item.redacted and not item.text else "Reasoning"
    return f"{title} · {tokens(len(item.text))} chars"


def _data_uri(mime: str, b64: str) -> str:
    """An ``<img>``'s ``src`` of a checked image (``views.outputs.image_of``)."""
    return f'src="data:{escape(mime)};base64,{escape(b64)}"'


MAX_STATIC_TEXT: Final = 20_000
"""Characters of one tool *result* text kept in the static rendering (it is saved in the notebook
twice, as Markdown and HTML; the session log keeps everything). Arguments are never cut."""


def _capped(text: str) -> str:
    if len(text) <= MAX_STATIC_TEXT:
        return text
    more = len(text) - MAX_STATIC_TEXT
    return f"{text[:MAX_STATIC_TEXT]}\n… [{more:,} more characters in the session log]"


def _sections(view: CardView) -> list[tuple[Section, str]]:
    """Each section with the text to show: arguments whole (they are what ran), results capped."""
    return [(s, s.text) for s in view.args] + [(s, _capped(s.text)) for s in view.result]


# --- Markdown ----------------------------------------------------------------------------------------


def _md_output(output: JsonObject) -> str:
    image = image_of(output)
    if image is not None:
        mime, b64 = image
        if b64 is None:
            return f"*({inline_markdown_text(mime)} output that is not valid base64, not embedded)*"
        if len(b64) <= MAX_INLINE_IMAGE:
            return f'<img {_data_uri(mime, b64)} alt="output">'
        return (
            f"*({inline_markdown_text(mime)} output of {len(b64) * 3 // 4:,} bytes not embedded)*"
        )
    text = _capped(plain_text(output))
    return markdown_code(text) if text else ""


def _md_card(view: CardView, images: MessageImages | None) -> str:
    status = " · ".join(p for p in (view.status, view.note, view.duration) if p)
    name = f" <code>{escape(view.name)}</code>" if view.name != view.title else ""
    summary = f"{view.icon} <b>{escape(view.title)}</b>{name} — {escape(status)}"
    parts = [f"<details><summary>{summary}</summary>", ""]
    for s, text in _sections(view):
        if s.label:
            parts += [f"**{inline_markdown_text(s.label)}**", ""]
        parts += [markdown_code(text), ""]
    for o in view.outputs:
        rendered = _md_output(o)
        if rendered:
            parts += [rendered, ""]
    parts.append("</details>")
    note = images_markdown(images)
    if note:
        parts += ["", note]
    return "\n".join(parts)


def render_markdown(
    model: TurnModel,
    *,
    tools: ToolLookup | None = None,
    session_id: str | None = None,
    model_info: ModelInfo | None = None,
    include_prompt: bool = False,
    images: TurnImages | None = None,
    budget: str | None = None,
) -> str:
    """The finished turn ``model`` as Markdown (what a saved notebook's ``text/markdown`` holds),
    inside a ``<div>`` that MathJax skips."""
    images = images or NO_IMAGES
    blocks: list[str] = []
    if include_prompt and model.prompt:
        blocks.append("> **You:** " + inline_markdown_text(model.prompt))
    attached = images_markdown(images.prompt, attached=True)
    if attached:
        blocks.append(attached)
    for item in model.items:
        match item:
            case ReasoningItem():
                body = markdown_alternative(item.text)
                title = escape(_reasoning_title(item))
                blocks.append(f"<details><summary>💭 {title}</summary>\n\n{body}\n\n</details>")
            case TextItem():
                if item.text:
                    blocks.append(markdown_alternative(item.text))
            case ToolItem():
                defn = lookup(tools, item.card.name)
                blocks.append(_md_card(card_view(item.card, defn), images.item(item.key)))
            case SteerItem():
                blocks.append("> ↳ **You:** " + inline_markdown_text(item.text))
                attached = images_markdown(images.item(item.key), attached=True)
                if attached:
                    blocks.append(attached)
            case NoticeItem():
                blocks.append(f"> {notice_icon(item)} " + inline_markdown_text(item.text))
            case HeldItem():
                blocks.append("> ✍️ " + inline_markdown_text(held_note(item.chars)))
    notice = end_notice(model)
    if notice is not None:
        icon = {"error": "❌", "warning": "⚠️"}.get(notice.level, "ℹ️")
        line = f"> {icon} **{inline_markdown_text(notice.title)}**"
        hint = markdown_alternative(notice.hint).replace("\n", "\n> ") if notice.hint else ""
        blocks.append(line + (f"\n>\n> {hint}" if hint else ""))
    footer = footer_parts(model, session_id=session_id, info=model_info, budget=budget)
    if footer:
        blocks.append("<sub>" + escape(" · ".join(footer)) + "</sub>")
    # The blank lines end the HTML blocks of the container, so the inside is read as Markdown.
    return f'<div class="{NO_MATH}">\n\n' + "\n\n".join(blocks) + "\n\n</div>\n"


# --- HTML --------------------------------------------------------------------------------------------
# The live view's structure and classes, styled inline (``markup.static_style`` says why inline).


def _html_output(output: JsonObject) -> str:
    image = image_of(output)
    if image is not None:
        mime, b64 = image
        if b64 is None:
            return f"<p><em>({escape(mime)} output that is not valid base64, not embedded)</em></p>"
        if len(b64) <= MAX_INLINE_IMAGE:
            return f'<img {_data_uri(mime, b64)} alt="output" style="max-width: 100%">'
        return (
            f"<p><em>({escape(mime)} output of {len(b64) * 3 // 4:,} bytes not embedded)</em></p>"
        )
    text = _capped(plain_text(output))
    return text_html(text) if text else ""


def _html_head(view: CardView, status_key: str) -> str:
    """The card's header line, as the live ``tool_card.header_html`` draws it."""
    name = (
        f"<span{attrs('dsh-card-name')}>{escape(view.name)}</span>"
        if view.name != view.title
        else ""
    )
    dur = f"<span{attrs('dsh-dur')}>{escape(view.duration)}</span>" if view.duration else ""
    note = (
        f'<span{attrs("dsh-card-note")} title="{escape(RECOVERED_TITLE)}">{escape(view.note)}</span>'
        if view.note
        else ""
    )
    pill = attrs("dsh-pill", f"dsh-status-{status_key}")
    return (
        f'<div{attrs("dsh-card-head")}><span class="dsh-icon">{view.icon}</span>'
        f"<span{attrs('dsh-card-title')}>{escape(view.title)}</span>{name}"
        f"<span{pill}>{escape(view.status)}</span>{note}{dur}</div>"
    )


def _html_card(card: ToolCardModel, view: CardView, images: MessageImages | None) -> str:
    body: list[str] = []
    for s, text in _sections(view):
        if s.label:
            body.append(f"<div{attrs('dsh-label')}>{escape(s.label)}</div>")
        body.append(code_html(text, s.lang))
    body += [r for r in (_html_output(o) for o in view.outputs) if r]
    # Open when the live card's Details opens by itself: an approval was asked, or rich outputs.
    opened = " open" if card.approval_id is not None or view.outputs else ""
    details = (
        f"<details{attrs('dsh-details')}{opened}><summary{attrs('dsh-details-title')}>Details"
        "</summary>\n" + "\n".join(body) + "\n</details>"
        if body
        else ""
    )
    note = images_html(images, static=True)
    head = _html_head(view, card.status) + (f"\n{note}" if note else "")
    return f"<div{attrs('dsh-card')}>\n{head}\n{details}\n</div>"


def render_html(
    model: TurnModel,
    *,
    tools: ToolLookup | None = None,
    session_id: str | None = None,
    model_info: ModelInfo | None = None,
    include_prompt: bool = False,
    images: TurnImages | None = None,
    budget: str | None = None,
) -> str:
    """The finished turn ``model`` as HTML (what a saved notebook's ``text/html`` holds)."""
    images = images or NO_IMAGES
    blocks: list[str] = []
    if include_prompt and model.prompt:
        blocks.append(f"<blockquote><strong>You:</strong> {escape(model.prompt)}</blockquote>")
    attached = images_html(images.prompt, attached=True, static=True)
    if attached:
        blocks.append(attached)
    for item in model.items:
        match item:
            case ReasoningItem():
                blocks.append(
                    f"<details{attrs('dsh-reasoning')}><summary{attrs('dsh-details-title')}>💭 "
                    f"{escape(_reasoning_title(item))}</summary>\n"
                    f"{markdown_html(item.text)}\n</details>"
                )
            case TextItem():
                if item.text:
                    blocks.append(markdown_html(item.text))
            case ToolItem():
                defn = lookup(tools, item.card.name)
                blocks.append(
                    _html_card(item.card, card_view(item.card, defn), images.item(item.key))
                )
            case SteerItem():
                attached = images_html(images.item(item.key), attached=True, static=True)
                blocks.append(
                    f"<div{attrs('dsh-steer')}>↳ <strong>You:</strong> {escape(item.text)}"
                    f"{attached}</div>"
                )
            case NoticeItem():
                cls = attrs(*notice_classes(item))
                blocks.append(f"<div{cls}>{notice_icon(item)} {escape(item.text)}</div>")
            case HeldItem():
                cls = attrs("dsh-notice", "dsh-held")
                blocks.append(f"<div{cls}>✍️ {escape(held_note(item.chars))}</div>")
    notice = end_notice(model)
    if notice is not None:
        icon = {"error": "❌", "warning": "⚠️"}.get(notice.level, "ℹ️")
        hint = markdown_html(notice.hint) if notice.hint else ""
        blocks.append(
            f"<div{attrs('dsh-end', f'dsh-{notice.level}')}><p>{icon} "
            f"<strong>{escape(notice.title)}</strong></p>{hint}</div>"
        )
    footer = footer_parts(model, session_id=session_id, info=model_info, budget=budget)
    if footer:
        blocks.append(f"<div{attrs('dsh-footer')}>{escape(' · '.join(footer))}</div>")
    container = attrs("dsh-turn-static", *NO_MATH.split())
    return sanitize(f"<div{container}>\n" + "\n".join(blocks) + "\n</div>")


def static_bundle(
    model: TurnModel,
    *,
    tools: ToolLookup | None = None,
    session_id: str | None = None,
    model_info: ModelInfo | None = None,
    include_prompt: bool = False,
    images: TurnImages | None = None,
    budget: str | None = None,
) -> dict[str, str]:
    """The display bundle a finished turn leaves in the notebook."""
    return {
        "text/markdown": render_markdown(
            model,
            tools=tools,
            session_id=session_id,
            model_info=model_info,
            include_prompt=include_prompt,
            images=images,
            budget=budget,
        ),
        "text/html": render_html(
            model,
            tools=tools,
            session_id=session_id,
            model_info=model_info,
            include_prompt=include_prompt,
            images=images,
            budget=budget,
        ),
    }
