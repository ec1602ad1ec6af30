"""A running ``python`` call's output, shown in its card while the code runs.

``LiveOutput`` is the ``runtime.capture.OutputTap`` of one run, drawn into its ``widget`` (the live
area, which the card shows until the call's result arrives; then the card's Details show the final
outputs as before, and the live widgets are closed). The agent's code holds the kernel's main thread,
so the kernel's event loop (which draws the turn view) is not running meanwhile: the output is pushed
from the capture's write path itself — widget state changes go out on iopub at once — at most once
per ``interval_s`` (the turn view's rate, 20 Hz by default), and a daemon thread pushes what the
last writes left pending once the interval has passed, so the card is never behind by more than
one interval when the code goes quiet (``print`` then a long wait). Every push draws the whole
current tail, so no text between two pushes is lost from it.

What is shown is bounded, however long the code runs: the last ``tail_chars`` characters of stream
text and the last ``max_outputs`` outputs (consecutive writes to one stream are one output), under
one line saying how much earlier output is not shown. Each output is its own ``Output`` widget, so a
push sends only the outputs that changed (the growing last stream, an updated display), never an
image again; outputs that scroll out of the tail are closed. The area scrolls, anchored at its
bottom, so the newest line is in view.

What is drawn follows the card's rule (``views.tool_card``): in a live view the outputs of code run
in this kernel are shown as a cell shows them (``whole``): a widget the code displays (a ``tqdm``
bar, an ipywidgets ``IntProgress``) is that widget, updated through its own comm; otherwise each
output is ``views.outputs.reduced``. The note is an ``HTML`` widget (sanitised, escaped text).

A write only queues (a deque append, atomic without the lock) and reads the clock; the queue is
folded into the outputs under the lock when a push is due or it has grown long, and the push (JSON
of the changed outputs, a comm message) is paid at most ``1 / interval_s`` times a second
(``benchmarks/live_output.py`` times a 100,000-line loop with and without a view). Thread-safe:
writes may come from any thread the code starts. A push that fails stops the live area (logged once); the run goes on.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

from dsh_kernel.jsonvalue import JsonObject
from dsh_kernel.markup.safe_html import escape
from dsh_kernel.views import _ipw
from dsh_kernel.views.outputs import reduced

_log = logging.getLogger(__name__)

LIVE_TAIL_CHARS: Final = 10_000
"""Characters of stream text the live area shows (the latest)."""
LIVE_MAX_OUTPUTS: Final = 20
"""Outputs the live area shows (the latest)."""
LIVE_MAX_HEIGHT: Final = "20em"
"""Height of the live area beyond which it scrolls (anchored at the bottom)."""
_FOLD_AT: Final = 1000
"""Queued writes after which they are folded into the entries even when no push is due."""
_LINE_SEARCH: Final = 200
"""How far past a cut the tail looks for a line start, so it starts with a whole line."""


class _Text:
    """Consecutive writes to one stream."""

    __slots__ = ("chunks", "name", "pushed", "size", "version")

    def __init__(self, name: str) -> None:
        self.name = name
        self.chunks: list[str] = []
        self.size = 0
        self.version = 0
        self.pushed = -1

    def output(self) -> JsonObject:
        return {"output_type": "stream", "name": self.name, "text": "".join(self.chunks)}


class _Display:
    __slots__ = ("display_id", "output", "pushed", "version")

    def __init__(self, output: JsonObject, display_id: str | None) -> None:
        self.output = output
        self.display_id = display_id
        self.version = 0
        self.pushed = -1


@dataclass(frozen=True, slots=True)
class _Show:
    output: JsonObject
    display_id: str | None
    update: bool


@dataclass(frozen=True, slots=True)
class _Clear:
    wait: bool


class LiveOutput:
    """One run's live output, drawn in ``widget`` (module docstring). ``close()`` when it ends."""

    def __init__(
        self,
        *,
        whole: bool,
        interval_s: float = 0.05,
        clock: Callable[[], float] = time.monotonic,
        tail_chars: int = LIVE_TAIL_CHARS,
        max_outputs: int = LIVE_MAX_OUTPUTS,
    ) -> None:
        # never shrunk to the box (a widget box would then scroll itself, from the top)
        self._area = _ipw.VBox(layout={"flex": "0 0 auto"})
        # column-reverse around one child: the scroll position starts, and stays, at the bottom
        self.widget = _ipw.Box(
            [self._area],
            layout={
                "flex_flow": "column-reverse",
                "max_height": LIVE_MAX_HEIGHT,
                "overflow": "auto",
            },
        )
        _ipw.add_class(self.widget, "dsh-live")
        _ipw.set_visible(self.widget, False)
        self._whole = whole
        self._interval = interval_s
        self._clock = clock
        self._tail = tail_chars
        self._max_outputs = max_outputs
        # re-entrant: a push may write to the captured stderr (a warning) on the same thread
        self._lock = threading.RLock()
        self._cond = threading.Condition(self._lock)
        self._inbox: deque[tuple[str, str] | _Show | _Clear] = deque()
        self._queued = 0
        self._entries: list[_Text | _Display] = []
        self._text = 0
        self._cut_chars = 0
        self._cut_outputs = 0
        self._clear_pending = False
        self._pending = False
        self._pushing = False
        self._closed = False
        self._last = float("-inf")
        self._ticker: threading.Thread | None = None
        self._widgets: dict[_Text | _Display, _ipw.Output] = {}
        self.note = _ipw.HTML()
        _ipw.add_class(self.note, "dsh-live-note")
        self.pushes = 0
        """How many times the area was drawn (tests read it)."""

    # -- the tap (any thread) -----------------------------------------------------------------------

    def stream(self, name: str, text: str) -> None:
        if self._closed:
            return
        self._inbox.append((name, text))
        self._queued += 1
        if (
            not self._pending
            or self._queued >= _FOLD_AT
            or self._clock() - self._last >= self._interval
        ):
            self._arrived()

    def display(
        self,
        data: JsonObject,
        metadata: JsonObject,
        *,
        display_id: str | None,
        update: bool,
        output_type: str,
    ) -> None:
        if self._closed:
            return
        kind = "execute_result" if output_type == "execute_result" else "display_data"
        output: JsonObject = {"output_type": kind, "data": data, "metadata": metadata}
        if kind == "execute_result":
            output["execution_count"] = None
        self._inbox.append(_Show(output, display_id, update))
        self._arrived()

    def clear(self, *, wait: bool) -> None:
        if self._closed:
            return
        self._inbox.append(_Clear(wait))
        self._arrived()

    def close(self) -> None:
        """Stop: nothing is pushed after this returns (the card draws the result next)."""
        with self._lock:
            self._closed = True
            self._cond.notify_all()

    def dispose(self) -> None:
        """Close, then close every widget of the live area (the card no longer shows it)."""
        self.close()
        with self._lock:
            for widget in self._widgets.values():
                _ipw.close(widget)
            self._widgets.clear()
            self._entries.clear()
            for widget in (self.note, self._area, self.widget):
                _ipw.close(widget)

    # -- bookkeeping (under the lock) ---------------------------------------------------------------

    def _arrived(self) -> None:
        with self._lock:
            if self._closed:
                return
            if self._pushing:  # written by the push itself (a warning): the next push draws it
                self._pending = True
                return
            self._fold()
            self._changed()

    def _fold(self) -> None:
        """Move what the writers queued into the entries (a run of writes to one stream at once)."""
        self._queued = 0
        inbox = self._inbox
        name: str | None = None
        run: list[str] = []
        while inbox:
            item = inbox.popleft()
            if type(item) is tuple:
                if item[0] != name:
                    if run:
                        self._add_text(name or "stdout", "".join(run))
                        run = []
                    name = item[0]
                run.append(item[1])
                continue
            if run:
                self._add_text(name or "stdout", "".join(run))
                run, name = [], None
            if isinstance(item, _Show):
                self._add_display(item)
            elif isinstance(item, _Clear) and item.wait:
                self._clear_pending = True
            else:
                self._clear()
        if run:
            self._add_text(name or "stdout", "".join(run))

    def _add_text(self, name: str, text: str) -> None:
        self._apply_pending_clear()
        last = self._entries[-1] if self._entries else None
        if isinstance(last, _Text) and last.name == name:
            entry = last
        else:
            entry = _Text(name)
            self._append(entry)
        entry.chunks.append(text)
        entry.size += len(text)
        entry.version += 1
        self._text += len(text)
        if self._text > 2 * self._tail:
            self._trim()

    def _add_display(self, show: _Show) -> None:
        self._apply_pending_clear()
        if not show.update:
            self._append(_Display(show.output, show.display_id))
            return
        for entry in self._entries:
            if isinstance(entry, _Display) and entry.display_id == show.display_id:
                entry.output = show.output
                entry.version += 1

    def _append(self, entry: _Text | _Display) -> None:
        self._entries.append(entry)
        while len(self._entries) > self._max_outputs:
            gone = self._entries.pop(0)
            if isinstance(gone, _Text):
                self._text -= gone.size
                self._cut_chars += gone.size
            else:
                self._cut_outputs += 1

    def _trim(self) -> None:
        """Keep the last ``tail_chars`` characters of stream text (from a line start if near)."""
        excess = self._text - self._tail
        while excess > 0 and self._entries:
            first = next((e for e in self._entries if isinstance(e, _Text)), None)
            if first is None:
                return
            if first.size <= excess:
                self._entries.remove(first)
                self._cut_chars += first.size
                self._text -= first.size
                excess -= first.size
                continue
            text = "".join(first.chunks)
            newline = text.find("\n", excess, excess + _LINE_SEARCH)
            cut = newline + 1 if newline >= 0 else excess
            first.chunks = [text[cut:]]
            first.size -= cut
            first.version += 1
            self._text -= cut
            self._cut_chars += cut
            excess -= cut

    def _apply_pending_clear(self) -> None:
        if self._clear_pending:
            self._clear_pending = False
            self._clear()

    def _clear(self) -> None:
        self._entries.clear()
        self._text = 0
        self._cut_chars = 0
        self._cut_outputs = 0

    def _changed(self) -> None:
        """Push now if the interval has passed, else leave it to the ticker."""
        if self._clock() - self._last >= self._interval:
            self._push()
        elif not self._pending:
            self._pending = True
            if self._ticker is None:
                self._ticker = threading.Thread(
                    target=self._tick, name="dsh-live-output", daemon=True
                )
                self._ticker.start()
            else:
                self._cond.notify_all()

    def _tick(self) -> None:
        with self._cond:
            while not self._closed:
                if not self._pending:
                    self._cond.wait()
                    continue
                delay = self._last + self._interval - self._clock()
                if delay > 0:
                    self._cond.wait(delay)
                    continue
                self._push()

    # -- drawing (under the lock) -------------------------------------------------------------------

    def _push(self) -> None:
        self._fold()
        self._pending = False
        self._last = self._clock()
        self._pushing = True
        try:
            self._draw()
        except Exception:
            self._closed = True
            _log.warning("the live output could not be drawn; it stops here", exc_info=True)
        finally:
            self._pushing = False

    def _draw(self) -> None:
        self.pushes += 1
        entries = list(self._entries)
        children: list[_ipw.DOMWidget] = []
        self.note.value = self._note()
        if self.note.value:
            children.append(self.note)
        for entry in entries:
            widget = self._widgets.get(entry)
            if widget is None:
                widget = self._widgets[entry] = _ipw.Output()
            if entry.pushed != entry.version:
                entry.pushed = entry.version
                output = entry.output() if isinstance(entry, _Text) else entry.output
                _ipw.set_outputs(widget, [output if self._whole else reduced(output)])
            children.append(widget)
        kept = set(entries)
        for gone in [e for e in self._widgets if e not in kept]:
            _ipw.close(self._widgets.pop(gone))
        _ipw.set_children(self._area, children)
        _ipw.set_visible(self.widget, True)

    def _note(self) -> str:
        parts: list[str] = []
        if self._cut_chars:
            n = self._cut_chars
            parts.append(f"{n:,} character{'s' if n != 1 else ''}")
        if self._cut_outputs:
            n = self._cut_outputs
            parts.append(f"{n} output{'s' if n != 1 else ''}")
        if not parts:
            return ""
        return escape(
            f"… {' and '.join(parts)} of earlier output not shown while the code runs (the card "
            "shows the run's output when it ends)"
        )
