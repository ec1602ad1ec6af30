"""The durable inbox: two ordered lists of user messages waiting to enter the model's history.

``next-turn`` holds follow-ups (each becomes the one ordinary message of its own turn, FIFO);
``next-step`` holds steering and injected context (all of it enters at the next step boundary).

Every mutation appends an ``agent/inbox/spliced{target, start, removedCount?, inserted, outcome?}``
event *before* the live list changes, so the inbox is a projection of the log: ``Inbox.replay``
rebuilds it from the splices after the session's seed, and queued prompts survive a restart.
Message ids are unique across both lists. Cancellations (``remove``/``clear``) carry
``outcome: "canceled"``; a claim is a pure deletion with no outcome.

A claim returns its messages in the order they were queued (the seq of the splice that inserted
each; a message spliced in where one was removed, as ``replace`` does, keeps that one's place),
so context ``inject``-ed before a follow-up enters the log and the request before that
follow-up's prompt, not after it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Literal, TypeAlias

from dsh_kernel.errors import UsageError
from dsh_kernel.llm.codec import message_from_json, message_to_json
from dsh_kernel.llm.types import Message
from dsh_kernel.session.events import SessionEvent
from dsh_kernel.session.log import Session
from dsh_kernel.session.log_images import record_images
from dsh_kernel.session.payloads import InboxSpliced, payload_of

Target: TypeAlias = Literal["next-turn", "next-step"]
TARGETS: tuple[Target, Target] = ("next-turn", "next-step")


class Inbox:
    """The ``next-turn`` and ``next-step`` lists of one session; every change is logged (module docstring)."""

    def __init__(self, session: Session) -> None:
        self._session = session
        self._lists: dict[Target, list[Message]] = {"next-turn": [], "next-step": []}
        self._queued_at: dict[str, int] = {}  # message id → seq of the splice that queued it
        self.on_inserted: list[Callable[[Message, Target], None]] = []
        self.on_discarded: list[Callable[[Message, Target], None]] = []

    # --- views -------------------------------------------------------------------------------------

    @property
    def next_turn(self) -> tuple[Message, ...]:
        return tuple(self._lists["next-turn"])

    @property
    def next_step(self) -> tuple[Message, ...]:
        return tuple(self._lists["next-step"])

    @property
    def has_pending(self) -> bool:
        return bool(self._lists["next-turn"] or self._lists["next-step"])

    def _ids(self) -> set[str]:
        return {m.id for lst in self._lists.values() for m in lst}

    # --- the one primitive --------------------------------------------------------------------------

    def splice(
        self,
        target: Target,
        start: int,
        removed_count: int = 0,
        inserted: Sequence[Message] = (),
        *,
        outcome: Literal["canceled"] | None = None,
    ) -> list[Message]:
        lst = self._lists[target]
        if not 0 <= start <= len(lst) or removed_count < 0 or start + removed_count > len(lst):
            raise UsageError(f"inbox splice out of range: {target} [{start}:+{removed_count}]")
        removed_ids = {m.id for m in lst[start : start + removed_count]}
        existing = self._ids() - removed_ids
        for m in inserted:
            if m.role != "user":
                raise UsageError(f"inbox messages must be user messages, got role {m.role!r}")
            if m.id in existing:
                raise UsageError(f"message id {m.id} is already in the inbox")
            existing.add(m.id)
        for m in inserted:  # the bytes are durable no later than the queued reference
            record_images(self._session, m.content)
        data = InboxSpliced(
            target=target, start=start, inserted=[message_to_json(m) for m in inserted]
        )
        if removed_count:
            data["removedCount"] = removed_count
        if outcome is not None:
            data["outcome"] = outcome
        seq = self._session.append("agent/inbox/spliced", data).seq
        removed = lst[start : start + removed_count]
        lst[start : start + removed_count] = list(inserted)
        self._requeued(removed, inserted, seq)
        if outcome == "canceled":
            for m in removed:
                for fn in self.on_discarded:
                    fn(m, target)
        for m in inserted:
            for fn in self.on_inserted:
                fn(m, target)
        return removed

    # --- presets -----------------------------------------------------------------------------------

    def append(self, target: Target, message: Message) -> None:
        self.splice(target, len(self._lists[target]), 0, (message,))

    def prepend(self, target: Target, message: Message) -> None:
        self.splice(target, 0, 0, (message,))

    def remove(self, message_id: str) -> bool:
        for target in TARGETS:
            for i, m in enumerate(self._lists[target]):
                if m.id == message_id:
                    self.splice(target, i, 1, outcome="canceled")
                    return True
        return False

    def replace(self, message_id: str, message: Message) -> bool:
        for target in TARGETS:
            for i, m in enumerate(self._lists[target]):
                if m.id == message_id:
                    self.splice(target, i, 1, (message,))
                    for fn in self.on_discarded:
                        fn(m, target)
                    return True
        return False

    def clear(self) -> None:
        for target in TARGETS:
            if self._lists[target]:
                self.splice(target, 0, len(self._lists[target]), outcome="canceled")

    def claim(self, target: Target) -> list[Message]:
        """Take all of ``next-step``, plus the first ``next-turn`` message when ``target`` is
        ``next-turn``. Logged as pure deletions."""
        order = dict(self._queued_at)  # the splices below forget the claimed messages' places
        claimed: list[Message] = []
        if target == "next-turn" and self._lists["next-turn"]:
            claimed += self.splice("next-turn", 0, 1)
        if self._lists["next-step"]:
            claimed += self.splice("next-step", 0, len(self._lists["next-step"]))
        return sorted(claimed, key=lambda m: order.get(m.id, 0))

    def _requeued(self, removed: Sequence[Message], inserted: Sequence[Message], seq: int) -> None:
        # A message that takes the place of a removed one (a replacement) keeps its place in line.
        places = [self._queued_at.pop(m.id, seq) for m in removed]
        for i, m in enumerate(inserted):
            self._queued_at[m.id] = places[i] if i < len(places) else seq

    # --- durability ----------------------------------------------------------------------------------

    def replay(self, events: Sequence[SessionEvent], start_seq: int = 0) -> None:
        """Rebuild the live lists from the splices logged at or after ``start_seq``."""
        self._lists = {"next-turn": [], "next-step": []}
        self._queued_at = {}
        for ev in events[start_seq:]:
            if ev.type != "agent/inbox/spliced":
                continue
            data = payload_of(ev, "agent/inbox/spliced")  # kinds checked on append and load
            target, start, inserted = data["target"], data["start"], data["inserted"]
            removed = data.get("removedCount", 0)
            if target not in TARGETS:
                continue
            lst = self._lists["next-turn" if target == "next-turn" else "next-step"]
            messages = [message_from_json(m) for m in inserted]
            self._requeued(lst[start : start + removed], messages, ev.seq)
            lst[start : start + removed] = messages
