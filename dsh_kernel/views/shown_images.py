"""What the model was shown of a turn's images: the image blocks its messages carried, their bytes,
and whether the request that carried them took images.

A view draws, beside a tool card or a prompt, the images the message put in front of the model
(``views.image_note`` has the words). Everything comes from logged events, like the rest of a view:

* the blocks: ``image`` blocks (``llm.types.ImageBlock``) inside a ``tool/result``'s tool-result
  block, keyed by the card's item key ``tool-<callId>``; in a user-source ``user/message``, keyed
  ``PROMPT_KEY`` for the turn's prompt (the first user message, or the one with ``message_id``, as
  the turn reader decides) and ``steer-<seq>`` — the steer item's key — for a later one;
* the bytes: the session's ``image/data`` event of the block's hash, as the reader sees it go by,
  else from ``image_data`` (``Session.image_data``: an image sent earlier in the session has no
  ``image/data`` of its own in this turn, and a prompt's bytes are logged when it is queued, before
  the turn starts). A hash with no bytes anywhere (a journal edited by hand) stays without them: the
  adapters sent its description then, and the view says so;
* whether the images went as images: the ``config.images`` of the request header in force for the
  first request after the message (``request/header`` events seen so far; before the turn's own,
  ``images_in_force`` — ``route_takes_images`` of the log before the turn). That request is known to
  have gone out at its first model event (``assistant/chunk``, ``assistant/message``, ``llm/retry``).
  Until then the message is *pending* and the answer is the header in force now.

This reads events beside the turn reader (``transcript.turn``) rather than inside it: the turn model is
shared with the store's exports, and only a view needs the bytes. A block the codec cannot read is
skipped: a view shows what it can.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import Final, TypeAlias

from dsh_kernel.jsonvalue import JsonValue
from dsh_kernel.llm.codec import block_from_json
from dsh_kernel.llm.types import ContentBlock, ImageBlock, ToolResultBlock
from dsh_kernel.session.events import SessionEvent
from dsh_kernel.session.log_images import image_blocks
from dsh_kernel.session.payloads import payload_of

ImageDataLookup: TypeAlias = Callable[[str], str | None]
"""``sha256 -> base64 bytes`` (``Session.image_data``), or ``None`` when the log holds none."""

PROMPT_KEY: Final = "prompt"
"""The key of the turn's prompt in ``TurnImages.by_key``."""

_CARRIED: Final = frozenset({"assistant/chunk", "assistant/message", "llm/retry"})
"""Events that show a request went out (the header in force then is the one it was sent with)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class MessageImages:
    """The images one message (a tool result, the prompt, a steer) carried for the model."""

    images: tuple[ImageBlock, ...]
    """In order; each block's ``data`` is its stored bytes (base64), ``None`` when the log has none."""
    as_images: bool | None
    """Whether the request that carried them took images (its header's ``config.images``); while
    ``pending``, whether the header in force now does. ``None``: no request header is known."""
    pending: bool = False
    """No request has carried them yet (drawn before the next request)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class TurnImages:
    """A turn's ``MessageImages`` by the item key they are drawn beside (module docstring)."""

    by_key: dict[str, MessageImages] = field(default_factory=dict[str, MessageImages])

    def card(self, call_id: str) -> MessageImages | None:
        """The images of the result of call ``call_id``."""
        return self.by_key.get(f"tool-{call_id}")

    def item(self, key: str) -> MessageImages | None:
        """The images of the turn item ``key`` (a steer item's, a tool item's)."""
        return self.by_key.get(key)

    @property
    def prompt(self) -> MessageImages | None:
        return self.by_key.get(PROMPT_KEY)


NO_IMAGES: Final = TurnImages()


def route_takes_images(events: Sequence[SessionEvent]) -> bool | None:
    """Whether the latest ``request/header`` in ``events`` sends images (``config.images``), or
    ``None`` when there is none: the route in force as a turn starts, for ``ImageReader``."""
    for ev in reversed(events):
        if ev.type == "request/header":
            return _header_images(payload_of(ev, "request/header")["header"].get("config"))
    return None


def _header_images(config: JsonValue) -> bool:
    # ``images`` is written only when true; absent means the descriptions (LlmCallConfig.images)
    return isinstance(config, dict) and config.get("images") is True


def _blocks(raw: JsonValue) -> list[ContentBlock]:
    out: list[ContentBlock] = []
    for item in raw if isinstance(raw, list) else []:
        try:
            out.append(block_from_json(item))
        except ValueError:
            continue  # a block this version cannot read: nothing to show for it
    return out


class ImageReader:
    """Reads a turn's events (and any ``image/data`` before it) into ``TurnImages``.

    ``message_id``: the turn's prompt, as given to the turn reader. ``images_in_force``: whether the
    request header in force as the turn starts sends images (``route_takes_images`` of the log).
    ``image_data``: the session's image index, for bytes logged outside the events fed in.
    """

    def __init__(
        self,
        *,
        message_id: str | None = None,
        images_in_force: bool | None = None,
        image_data: ImageDataLookup | None = None,
    ) -> None:
        self._message_id = message_id
        self._route = images_in_force
        self._lookup = image_data
        self._data: dict[str, str] = {}
        self._blocks: dict[str, tuple[ImageBlock, ...]] = {}
        self._decided: dict[str, bool | None] = {}
        self._pending: list[str] = []
        self._prompt_seen = False

    def apply(self, event: SessionEvent) -> None:
        """Feed one event, in log order."""
        t = event.type
        if t in _CARRIED:
            if self._pending:
                for key in self._pending:
                    self._decided[key] = self._route
                self._pending.clear()
        elif t == "image/data":
            d = payload_of(event, "image/data")
            self._data.setdefault(d["sha256"], d["data"])
        elif t == "request/header":
            self._route = _header_images(
                payload_of(event, "request/header")["header"].get("config")
            )
        elif t == "user/message":
            d = payload_of(event, "user/message")
            if d["source"].get("kind") != "user":
                return  # runtime context: not drawn
            is_prompt = not self._prompt_seen and (
                self._message_id is None or d["id"] == self._message_id
            )
            self._prompt_seen = self._prompt_seen or is_prompt
            self._add(PROMPT_KEY if is_prompt else f"steer-{event.seq}", _blocks(d["content"]))
        elif t == "tool/result":
            content = payload_of(event, "tool/result")["message"].get("content")
            blocks = _blocks(content[:1] if isinstance(content, list) else None)
            for block in blocks:
                if isinstance(block, ToolResultBlock):
                    self._add(f"tool-{block.tool_call_id}", [block])

    def apply_all(self, events: Iterable[SessionEvent]) -> TurnImages:
        """Feed ``events`` and return the snapshot."""
        for ev in events:
            self.apply(ev)
        return self.snapshot()

    def _add(self, key: str, blocks: list[ContentBlock]) -> None:
        images = tuple(image_blocks(blocks))
        if images and key not in self._blocks:
            self._blocks[key] = images
            self._pending.append(key)

    def _bytes(self, sha256: str) -> str | None:
        data = self._data.get(sha256)
        if data is None and self._lookup is not None:
            try:
                data = self._lookup(sha256)
            except Exception:
                data = None  # a failing index only costs the thumbnail
        return data

    def snapshot(self) -> TurnImages:
        """The images seen so far, with their bytes and how they went."""
        out: dict[str, MessageImages] = {}
        for key, images in self._blocks.items():
            filled = tuple(replace(i, data=i.data or self._bytes(i.sha256)) for i in images)
            pending = key not in self._decided
            route = self._route if pending else self._decided[key]
            out[key] = MessageImages(images=filled, as_images=route, pending=pending)
        return TurnImages(by_key=out)


def read_images(
    events: Iterable[SessionEvent],
    *,
    message_id: str | None = None,
    images_in_force: bool | None = None,
    image_data: ImageDataLookup | None = None,
) -> TurnImages:
    """The ``TurnImages`` of one turn's events (``turn_events``), as ``ImageReader`` reads them."""
    reader = ImageReader(
        message_id=message_id, images_in_force=images_in_force, image_data=image_data
    )
    return reader.apply_all(events)
