"""The compaction notice of a turn: what a compaction inside the turn did, as one line.

Part of reading a turn (``transcript.turn.TurnFold`` feeds ``CompactionNotes`` the ``compaction/*``
events; the line is a ``NoticeItem`` among the turn's items, drawn like every notice by the live
view, the saved rendering and nothing else — the transcript leaves notices out). A compaction by
hand (``%agent compact``) happens between turns, so no turn reads it: its cell prints its line.

The line, from the events alone (``dsh_kernel.session.payloads``):

* while it runs (``compaction/start`` without its end): ``Compacting the history (~3,900 tokens of
  the 4,096-token window)…``;
* once the surface changed: ``Compacted 3 earlier turns (~3,900 → ~1,150 tokens) by a model
  summary`` (``… and the start of this one`` when a long turn's own first steps were summarised
  too) — the size of the whole request before (``compaction/start.tokens``, the meter's reading), then that less what
  was freed (``shadowedTokenCount − summaryTokenCount`` of each summary, ``shadowedTokenCount −
  prunedTokenCount`` of each cut tool output): the context the next request is built from. When
  only long tool outputs were cut: ``Cut 1 long tool output (…)``. Then which method wrote the
  summary: ``by a model summary``, or ``by a deterministic reduction (<why>)`` — "the model's summary
  was not used — <code>: <message>" when the answer came whole and was set aside (the summary event
  keeps it as ``rawOutput``: it did not shrink the range, or failed the substance check,
  ``SUMMARY_UNFIT``), "the summary call failed — <code>: <message>" when the call did, else "this
  model does not write summaries". After an ``overflow`` (the server refused the request as too
  long) it adds that the request is sent again;
* a failed compaction (``compaction/end`` with an ``error``, nothing replaced): ``Compaction failed
  (<code>: <message>); the history is unchanged`` (stopped, for ``ABORTED``), a ``warning``; one
  whose turn ended before it did (a crash: repair closes the turn, never the compaction) says it was
  interrupted.

A compaction that needs several rounds (a small window's summary call takes part of the history at
a time) is one line: the rounds that follow each other with nothing in between add up. The line's
key is its first ``compaction/start``'s seq, so a live view redraws it in place.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from dsh_kernel.session.payloads import payload_of
from dsh_kernel.transcript.model import NoticeItem

if TYPE_CHECKING:
    from dsh_kernel.session.events import SessionEvent


class Entries(Protocol):
    """The fold's entries, in stream order: a list the notice is added to and redrawn in."""

    def __len__(self) -> int: ...
    def __getitem__(self, index: int, /) -> object: ...
    def __setitem__(self, index: int, item: NoticeItem, /) -> None: ...
    def append(self, item: NoticeItem, /) -> None: ...


class _Note:
    """One notice's tally, over one or more consecutive compactions."""

    __slots__ = (
        "before",
        "error",
        "freed",
        "item",
        "method",
        "open",
        "pruned",
        "summarised",
        "trigger",
        "turn",
        "turns",
        "why",
        "window",
    )

    def __init__(self, key: str, trigger: str, turn: int | None) -> None:
        self.item = NoticeItem(key=key, text="", level="info")
        self.trigger = trigger
        self.turn = turn
        self.before: int | None = None
        self.window: int | None = None
        self.freed = 0
        self.turns: set[int] = set()
        self.pruned = 0
        self.summarised = False
        self.method = "model"
        self.why = ""
        self.error: tuple[str, str] | None = None
        self.open = True

    def text(self) -> str:
        changed = self.summarised or self.pruned
        if not changed and self.open:
            window = f" of the {self.window:,}-token window" if self.window else ""
            size = f" (~{self.before:,} tokens{window})" if self.before is not None else ""
            return f"Compacting the history{size}…"
        if not changed:
            code, message = self.error or ("UNKNOWN", "")
            if code == "ABORTED":
                return "Compaction stopped; the history is unchanged"
            if code == "INTERRUPTED":
                return "Compaction interrupted (the kernel stopped); the history is unchanged"
            return f"Compaction failed ({code}: {message}); the history is unchanged"
        if self.summarised:
            n = len(self.turns - {self.turn})
            parts = [f"{n} earlier turn{'s' if n != 1 else ''}"] if n else []
            if self.turn in self.turns:  # a long turn's own first steps
                parts.append("the start of this turn" if not n else "the start of this one")
            what = "Compacted " + (" and ".join(parts) or "the history")
        else:
            what = f"Cut {self.pruned} long tool output{'s' if self.pruned != 1 else ''}"
        if self.before is not None:
            what += f" (~{self.before:,} → ~{max(0, self.before - self.freed):,} tokens)"
        if self.method == "reduction":
            what += f" by a deterministic reduction ({self.why})"
        elif self.summarised:
            what += " by a model summary"
        if self.trigger == "overflow":
            what += "; the server had refused the request as too long: it is sent again"
        if self.error is not None:
            what += f"; then {self.error[0]}: {self.error[1]}"
        return what


class CompactionNotes:
    """Folds a turn's ``compaction/*`` events into notices in its entries (module docstring)."""

    __slots__ = ("_note",)

    def __init__(self) -> None:
        self._note: _Note | None = None

    def apply(self, event: SessionEvent, entries: Entries) -> None:
        """Take one ``compaction/*`` event; add or redraw its notice in ``entries`` (the fold's
        items in stream order, where the notice stands at the place its compaction started)."""
        note = self._note
        match event.type:
            case "compaction/start":
                d = payload_of(event, "compaction/start")
                last = entries[-1] if entries else None
                if (
                    note is None
                    or note.error is not None
                    or note.trigger != d["trigger"]
                    or last is not note.item
                ):
                    note = self._note = _Note(f"compaction-{event.seq}", d["trigger"], d["turn"])
                    entries.append(note.item)
                    note.before = d.get("tokens")
                note.window = d.get("contextWindow", note.window)
                note.open = True
            case "compaction/prune" if note is not None:
                d = payload_of(event, "compaction/prune")
                note.pruned += 1
                note.freed += d["shadowedTokenCount"] - d["prunedTokenCount"]
            case "compaction/summary" if note is not None:
                d = payload_of(event, "compaction/summary")
                note.summarised = True
                note.turns.update(d["turns"])
                note.freed += d["shadowedTokenCount"] - d["summaryTokenCount"]
                if d["method"] == "reduction":
                    note.method = "reduction"
                    failure = d.get("failure")
                    code = failure.get("code") if failure is not None else None
                    message = failure.get("message") if failure is not None else None
                    if failure is None:
                        note.why = "this model does not write summaries"
                    elif "rawOutput" in d:  # the answer came whole and was set aside
                        note.why = f"the model's summary was not used — {code}: {message}"
                    else:
                        note.why = f"the summary call failed — {code}: {message}"
            case "compaction/end" if note is not None:
                error = payload_of(event, "compaction/end").get("error")
                if error is not None:
                    note.error = (str(error.get("code", "UNKNOWN")), str(error.get("message", "")))
                note.open = False
            case _:
                return
        self._redraw(note, entries)

    def close(self, entries: Entries) -> None:
        """The turn ended: a compaction still open then never ended (a crash; repair closed the
        turn, never the compaction) — its line says so."""
        note = self._note
        if note is not None and note.open:
            note.open = False
            note.error = ("INTERRUPTED", "the kernel stopped before it ended")
            self._redraw(note, entries)

    @staticmethod
    def _redraw(note: _Note | None, entries: Entries) -> None:
        if note is None:
            return
        old = note.item
        level = "warning" if note.error is not None else "info"
        note.item = NoticeItem(key=old.key, text=note.text(), level=level)
        for i in range(len(entries) - 1, -1, -1):
            if entries[i] is old:
                entries[i] = note.item
                return
