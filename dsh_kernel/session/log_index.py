"""The log's index of its envelope events: what a request, a turn's end or a meter reading looks
back for, answered without walking the log, so a turn's cost does not grow with the session.

``LogIndex`` keeps, for each type in ``INDEXED`` — the turn brackets, the request envelope, context
warnings, answers: a few events a turn — the seqs of its events in log order, as the log appends
them (``add``), and the turn number of each ``turn/start``. ``Session`` owns one and answers
``latest``, ``seqs_of`` and ``turn_at`` from it; nothing else writes it.
"""

from __future__ import annotations

import bisect

from dsh_kernel.errors import UsageError

INDEXED: frozenset[str] = frozenset(
    {
        "turn/start",
        "turn/end",
        "request/header",
        "request/context",
        "context/warning",
        "assistant/message",
    }
)
"""The types whose seqs the log indexes: few per turn, read every request."""


class LogIndex:
    """The seqs of the ``INDEXED`` events of one log (module docstring)."""

    __slots__ = ("_seqs", "_turns")

    def __init__(self) -> None:
        self._seqs: dict[str, list[int]] = {t: [] for t in INDEXED}
        self._turns: list[int] = []
        """The turn number of each ``turn/start``, parallel to its seqs."""

    def add(self, type: str, seq: int, turn: int | None = None) -> None:
        """Take the event ``seq`` of ``type`` (ignored unless indexed); ``turn`` is a
        ``turn/start``'s number."""
        seqs = self._seqs.get(type)
        if seqs is None:
            return
        seqs.append(seq)
        if type == "turn/start":
            self._turns.append(turn if turn is not None else 0)

    def seqs(self, type: str) -> list[int]:
        """The live list of ``type``'s seqs (the caller must not change it). Raises
        ``UsageError`` for a type that is not indexed."""
        seqs = self._seqs.get(type)
        if seqs is None:
            raise UsageError(f"the log indexes only {sorted(INDEXED)}, not {type!r}")
        return seqs

    def turn_at(self, seq: int) -> int | None:
        """The turn open just before event ``seq`` — the latest ``turn/start`` before it, unless a
        ``turn/end`` came after that — else ``None``."""
        starts = self._seqs["turn/start"]
        i = bisect.bisect_left(starts, seq) - 1
        if i < 0:
            return None
        ends = self._seqs["turn/end"]
        j = bisect.bisect_left(ends, seq) - 1
        if j >= 0 and ends[j] > starts[i]:
            return None
        return self._turns[i]
