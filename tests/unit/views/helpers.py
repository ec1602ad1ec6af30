"""Helpers for view tests: a recording comm, widget-state snapshots, and an agent wired to a view."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar, cast

import ipywidgets
from comm.base_comm import BaseComm

from dsh_kernel import Agent
from dsh_kernel.session.events import SessionEvent
from dsh_kernel.views import TurnView
from tests.support.frontend import html_text


@dataclass
class Sent:
    comm_id: str
    msg_type: str
    data: dict[str, Any]

    @property
    def state(self) -> dict[str, Any]:
        if self.msg_type == "comm_msg" and self.data.get("method") == "update":
            return dict(self.data.get("state", {}))
        if self.msg_type == "comm_open":
            return dict(self.data.get("state", {}))
        return {}

    @property
    def size(self) -> int:
        import json

        return len(json.dumps(self.data, default=str))


@dataclass
class CommLog:
    sent: list[Sent] = field(default_factory=list)
    comms: dict[str, RecordingComm] = field(default_factory=dict)

    def updates(self, widget: ipywidgets.Widget, key: str | None = None) -> list[dict[str, Any]]:
        """The state updates sent for ``widget`` (optionally only those touching ``key``)."""
        mid = widget.model_id
        out = [s.state for s in self.sent if s.comm_id == mid and s.msg_type == "comm_msg"]
        return [u for u in out if key is None or key in u]

    def frontend(self, widget: ipywidgets.Widget, data: dict[str, Any]) -> None:
        """Deliver a message from the frontend to ``widget`` (a click, a state change)."""
        self.comms[widget.model_id].handle_msg({"content": {"data": data}, "buffers": []})

    def click(self, button: ipywidgets.Button) -> None:
        self.frontend(button, {"method": "custom", "content": {"event": "click"}})

    def set_state(self, widget: ipywidgets.Widget, **state: Any) -> None:
        self.frontend(widget, {"method": "update", "state": state, "buffer_paths": []})

    def since(self, mark: int) -> list[Sent]:
        return self.sent[mark:]


class RecordingComm(BaseComm):
    def __init__(self, log: CommLog, **kwargs: Any) -> None:
        self.log = log
        super().__init__(**kwargs)
        log.comms[self.comm_id] = self

    def publish_msg(
        self,
        msg_type: str,
        data: dict[str, Any] | None = None,
        metadata: dict[str, Any] | None = None,
        buffers: list[bytes] | None = None,
        **keys: Any,
    ) -> None:
        self.log.sent.append(Sent(self.comm_id, msg_type, dict(data or {})))


def state_of(widget: ipywidgets.Widget) -> Any:
    """A comparable picture of a widget tree: the traits a person sees, recursively."""
    out: dict[str, Any] = {"class": type(widget).__name__}
    for name in (
        "value",
        "description",
        "disabled",
        "titles",
        "selected_index",
        "options",
        "placeholder",
        "_dom_classes",
    ):
        if widget.has_trait(name):
            out[name] = getattr(widget, name)
    if isinstance(widget, ipywidgets.Output):
        out["outputs"] = widget.outputs
    layout = getattr(widget, "layout", None)
    if isinstance(layout, ipywidgets.Layout):
        out["display"] = layout.display
    if widget.has_trait("children"):
        out["children"] = [state_of(c) for c in cast(Any, widget).children]
    return out


def find(
    widget: ipywidgets.Widget, kind: type[Any], pred: Callable[[Any], bool] = lambda w: True
) -> list[Any]:
    """Every widget of type ``kind`` in the tree under ``widget`` (depth first)."""
    found: list[Any] = []
    if isinstance(widget, kind) and pred(widget):
        found.append(widget)
    if widget.has_trait("children"):
        for c in cast(Any, widget).children:
            found += find(c, kind, pred)
    return found


def answer_texts(widget: ipywidgets.Widget) -> list[str]:
    """The text of every rendered Markdown piece of an answer under ``widget`` (``HTML`` widgets
    holding ``markup.safe_html.markdown_html``, outside the folded reasoning), in order."""
    texts: list[str] = []
    if isinstance(widget, ipywidgets.Accordion):
        return texts
    if isinstance(widget, ipywidgets.HTML) and widget.value.startswith('<div class="dsh-md'):
        texts.append(html_text(widget.value).strip("\n"))
    if widget.has_trait("children"):
        for c in cast(Any, widget).children:
            texts += answer_texts(c)
    return texts


async def wait_for(predicate: Callable[[], object], limit: float = 5.0) -> None:
    async with asyncio.timeout(limit):
        while not predicate():  # noqa: ASYNC110 - polling the view is the point
            await asyncio.sleep(0.001)


def logged(agent: Agent, text: str) -> bool:
    """Whether a streamed chunk carrying ``text`` is in the agent's log."""
    for event in agent.session.events:
        chunk = event.data.get("chunk") if event.type == "assistant/chunk" else None
        if isinstance(chunk, dict) and chunk.get("text") == text:
            return True
    return False


def attach(agent: Agent, view: TurnView) -> Callable[[], None]:
    return agent.session.subscribe(view.observe)


def replay(events: Sequence[SessionEvent], view: TurnView) -> dict[str, str]:
    for ev in events:
        view.observe(ev)
    return view.finish()


T = TypeVar("T")


def ignoring_result(resolve: Callable[[str, T], object]) -> Callable[[str, T], None]:
    """``resolve`` (an answerer's, which says whether it took the answer) as a view callback: the
    view does nothing with what a callback returns."""

    def callback(key: str, value: T) -> None:
        resolve(key, value)

    return callback
