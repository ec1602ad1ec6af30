"""A scripted Jupyter frontend for kernel-tier tests: widget models mirrored from IOPub, clicks sent.

``Frontend(kernel)`` reads *every* IOPub message of the kernel (a widget update caused by a click has
the click's ``comm_msg`` as parent, not the cell's), keeps the state of each widget model the way a
browser's widget manager does (``comm_open`` → model, ``comm_msg`` ``update``/``echo_update`` →
state merge, ``comm_close`` → gone) and files the other messages under the cell that caused them.

Like JupyterLab it renders the widget views a cell displays: when an output carries
``application/vnd.jupyter.widget-view+json`` for a model that asks for its view count (``_view_count``
not null), it sends ``{"method": "update", "state": {"_view_count": 1}}``, exactly what the
ipywidgets manager sends once the view is on screen. Pass ``render=False`` to be a headless client.

Its cells are sent with ``allow_stdin`` false (it answers no input request; the kernel then gives it
the widget view, as to nbclient, where a console with stdin gets the turn as text).

``click(model)`` sends the ipywidgets 8 button click, ``{"method": "custom", "content": {"event":
"click"}}``. ``submit(code)`` starts a cell and returns a ``RunningCell``; ``RunningCell.pump(until=…)``
reads messages until a condition holds (so a test can act mid-turn: click, interrupt) and
``finish()`` waits for idle and the execute reply.
"""

from __future__ import annotations

import html
import json
import queue
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from tests.support.kernel import Execution, Kernel

WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"


@dataclass
class Model:
    comm_id: str
    state: dict[str, Any]
    updates: list[dict[str, Any]] = field(default_factory=list)
    """Every state change the kernel sent after ``comm_open``, in order."""
    open: bool = True

    @property
    def name(self) -> str:
        return str(self.state.get("_model_name", ""))


def html_text(value: object) -> str:
    """The text a person reads in an HTML widget's ``value`` (tags dropped, entities decoded)."""
    if not isinstance(value, str):
        return ""
    return html.unescape(re.sub(r"<[^>]+>", "", value))


MARKDOWN_OPEN = '<div class="mathjax_ignore tex2jax_ignore">\n\n'
MARKDOWN_CLOSE = "\n\n</div>\n"


def markdown_body(markdown: str) -> str:
    """The Markdown of a finished turn's saved ``text/markdown``, without the container MathJax
    skips (a ``<div>`` on lines of its own around it); fails when the container is missing."""
    assert markdown.startswith(MARKDOWN_OPEN), f"no MathJax-ignoring container: {markdown[:120]!r}"
    assert markdown.endswith(MARKDOWN_CLOSE), f"the container is not closed: {markdown[-120:]!r}"
    return markdown[len(MARKDOWN_OPEN) : -len(MARKDOWN_CLOSE)]


def markdown_footer(markdown: str) -> str:
    """The footer line of a finished turn's saved ``text/markdown`` (its Markdown's last line)."""
    return markdown_body(markdown).strip().splitlines()[-1]


def saved_bundle(ex: Execution) -> dict[str, Any]:
    """The MIME bundle a chat cell's output ends with (what a saved notebook keeps): the widget view
    plus the static ``text/markdown`` and ``text/html`` of the finished turn."""
    updates = ex.of_type("update_display_data")
    assert updates, "the cell never updated its display"
    return updates[-1]["content"]["data"]


class Frontend:
    def __init__(self, kernel: Kernel, *, render: bool = True) -> None:
        self.kernel = kernel
        self.render_views = render
        self.models: dict[str, Model] = {}
        self.by_parent: dict[str, list[dict[str, Any]]] = {}
        self.idle: set[str] = set()
        self.rendered: list[str] = []
        self.displayed: set[str] = set()
        """Every model whose view a cell displayed (drawn or not)."""

    # -- reading -----------------------------------------------------------------------------------

    def poll(self, timeout: float) -> bool:
        """Handle one IOPub message; False when none came within ``timeout``."""
        try:
            msg = self.kernel.kc.get_iopub_msg(timeout=timeout)
        except queue.Empty:
            return False
        parent = msg["parent_header"].get("msg_id")
        if parent is not None:
            self.by_parent.setdefault(parent, []).append(msg)
        kind = msg["msg_type"]
        content = msg["content"]
        if kind == "comm_open" and content.get("target_name") == "jupyter.widget":
            state = dict(content["data"].get("state", {}))
            self.models[content["comm_id"]] = Model(comm_id=content["comm_id"], state=state)
        elif kind == "comm_msg":
            model = self.models.get(content["comm_id"])
            data = content["data"]
            if model is not None and data.get("method") in ("update", "echo_update"):
                delta = dict(data.get("state", {}))
                model.state.update(delta)
                if data.get("method") == "update":
                    model.updates.append(delta)
        elif kind == "comm_close":
            model = self.models.get(content["comm_id"])
            if model is not None:
                model.open = False
        elif kind in ("display_data", "update_display_data", "execute_result"):
            view = content["data"].get(WIDGET_VIEW)
            if isinstance(view, dict):
                self.displayed.add(str(view.get("model_id")))
                if self.render_views:
                    self._render(str(view.get("model_id")))
        elif kind == "status" and content["execution_state"] == "idle" and parent is not None:
            self.idle.add(parent)
        return True

    def render(self, model_id: str) -> None:
        """Draw the view of ``model_id`` now (with ``render=False``, views wait for this)."""
        self._render(model_id)

    def _render(self, model_id: str) -> None:
        model = self.models.get(model_id)
        if model is None or model_id in self.rendered:
            return
        self.rendered.append(model_id)  # shown even when the kernel does not ask for the count
        if model.state.get("_view_count") is not None:
            self.send(
                model_id, {"method": "update", "state": {"_view_count": 1}, "buffer_paths": []}
            )

    # -- acting ------------------------------------------------------------------------------------

    def send(self, comm_id: str, data: dict[str, Any]) -> None:
        self.kernel.send_comm(comm_id, data)

    def click(self, model: Model) -> None:
        self.send(model.comm_id, {"method": "custom", "content": {"event": "click"}})

    def submit(self, code: str) -> RunningCell:
        return RunningCell(self, code)

    def run(self, code: str, *, timeout: float = 60) -> Execution:
        return self.submit(code).finish(timeout=timeout)

    def python(self, code: str, *, timeout: float = 60) -> str:
        """Run Python (whatever the kernel's default cell kind) and return its stdout."""
        prefix = "%%python\n" if self.kernel.km.kernel_name == "dsh" else ""
        ex = self.run(prefix + code, timeout=timeout)
        assert ex.status == "ok", ex.content
        return ex.stdout

    def events(self) -> list[dict[str, Any]]:
        """The current session's events (type, seq, data), read from inside the kernel."""
        out = self.python(
            "import json as _j\n"
            "_h = get_ipython().kernel.host\n"
            "print(_j.dumps([{'type': e.type, 'seq': e.seq, 'data': e.data}"
            " for e in _h.agent.session.events]))"
        )
        return json.loads(out)

    # -- queries -----------------------------------------------------------------------------------

    def visible(self, model: Model, *, drawn: bool = True) -> bool:
        """Shown on screen: open, not ``display: none``, and inside a displayed view whose
        ancestors are not hidden either (buttons exist before they are shown). ``drawn=False``:
        would be shown once its view is drawn — inside a view a cell displayed (a widget just
        opened, not yet placed in one, is not)."""
        parents: dict[str, str] = {}
        for m in self.models.values():
            for child in m.state.get("children") or ():
                parents[str(child).removeprefix("IPY_MODEL_")] = m.comm_id
        node: Model | None = model
        while node is not None:
            if not node.open or self._hidden(node):
                return False
            if node.comm_id in self.rendered:
                return True
            up = parents.get(node.comm_id)
            if up is None:
                # a root: drawn only if this frontend rendered it; a displayed view's otherwise
                return not drawn and node.comm_id in self.displayed
            node = self.models.get(up)
        return False

    def _hidden(self, model: Model) -> bool:
        ref = model.state.get("layout")
        layout = self.models.get(str(ref).removeprefix("IPY_MODEL_")) if ref else None
        return layout is not None and layout.state.get("display") == "none"

    def buttons(self, description: str, *, enabled: bool = True, drawn: bool = True) -> list[Model]:
        """Visible buttons with this label (enabled ones unless ``enabled=False``)."""
        return [
            m
            for m in self.models.values()
            if m.name == "ButtonModel"
            and m.state.get("description") == description
            and (not enabled or not m.state.get("disabled"))
            and self.visible(m, drawn=drawn)
        ]

    def text_updates(self, fragment: str) -> list[str]:
        """The text of every ``HTML`` widget update whose text contains ``fragment``, in arrival
        order (an answer streamed into its view)."""
        out = []
        for m in self.models.values():
            if m.name != "HTMLModel":
                continue
            for delta in m.updates:
                text = html_text(delta.get("value"))
                if fragment in text:
                    out.append(text)
        return out


class RunningCell:
    def __init__(self, frontend: Frontend, code: str) -> None:
        self.frontend = frontend
        self.code = code
        self.submitted = time.monotonic()
        # No stdin: this frontend answers no input request. With no cell id either, the kernel
        # tells it from a console by that (``kernel.host.frontends``) and shows it the widget view.
        self.msg_id: str = frontend.kernel.kc.execute(code, allow_stdin=False)

    @property
    def messages(self) -> list[dict[str, Any]]:
        return self.frontend.by_parent.get(self.msg_id, [])

    @property
    def views(self) -> list[str]:
        """The widget models whose views this cell displayed."""
        out = []
        for m in self.messages:
            if m["msg_type"] == "display_data" and WIDGET_VIEW in m["content"]["data"]:
                out.append(str(m["content"]["data"][WIDGET_VIEW]["model_id"]))
        return out

    @property
    def done(self) -> bool:
        return self.msg_id in self.frontend.idle

    def pump(self, until: Callable[[], bool], *, timeout: float = 30, what: str = "") -> float:
        """Read messages until ``until()`` holds; returns the monotonic time it first held."""
        deadline = time.monotonic() + timeout
        while not until():
            if self.done:
                raise AssertionError(f"the cell ended before {what or 'the condition'} held")
            if time.monotonic() > deadline:
                raise TimeoutError(f"{what or 'condition'} not reached in {timeout} s")
            self.frontend.poll(0.02)
        return time.monotonic()

    def finish(self, *, timeout: float = 60) -> Execution:
        deadline = time.monotonic() + timeout
        while not self.done:
            if time.monotonic() > deadline:
                raise TimeoutError(f"cell did not finish in {timeout} s: {self.code[:80]!r}")
            self.frontend.poll(0.05)
        kc = self.frontend.kernel.kc
        reply = kc.get_shell_msg(timeout=max(1.0, deadline - time.monotonic()))
        while reply["parent_header"].get("msg_id") != self.msg_id:
            reply = kc.get_shell_msg(timeout=max(1.0, deadline - time.monotonic()))
        return Execution(reply=reply, messages=list(self.messages))


def last_turn(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The events of the latest turn, from its ``turn/start`` on."""
    start = max(i for i, e in enumerate(events) if e["type"] == "turn/start")
    return events[start:]


def sql_rows(fe: Frontend, query: str) -> list[dict[str, Any]]:
    """The rows of ``query`` run in a ``%%sql`` cell, after the host flushed its journal."""
    fe.python("get_ipython().kernel.host.flush()")
    ex = fe.run(f"%%sql _rows <<\n{query}")
    assert ex.status == "ok", ex.content
    return json.loads(fe.python("print(_rows.to_json(orient='records'))"))
