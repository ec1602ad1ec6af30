"""The structural invariants of a session log (SPINE §1.6, plus the tool-result pairing of §9.2 item 3).

``check_invariants(events)`` walks a log once (linear time, so tests can run it after every turn) and
returns every ``Violation`` it finds; ``assert_invariants(events)`` raises ``InvariantError`` listing them.
The checker is *prefix-closed*: a log that is still being written (an open turn, an open step, tool calls
not yet answered) is valid; only what can no longer be put right by later events is reported. Repairing
any prefix of a valid log (``dsh_kernel.session.repair``) yields a valid, balanced log.

Rules (the ``rule`` string of each ``Violation``):

``seq-contiguous``
    ``seq`` runs 0, 1, 2, … with no gap or repeat.
``turn-number``
    ``turn/start`` numbers turns from 1, one at a time.
``turn-overlap``
    ``turn/start`` while another turn is open.
``turn-end-mismatch``
    ``turn/end`` names a turn that is not the open one (or no turn is open).
``turn-end-reason``
    ``turn/end`` carries no ``reason`` object with a string ``kind``.
``step-open-at-turn-end``
    ``turn/end`` while a step is still open.
``step-start-mismatch``
    ``step/start`` outside an open turn, or naming a turn that is not the open one.
``step-overlap``
    ``step/start`` while another step is open.
``step-number``
    Steps are numbered from 1 inside each turn, one at a time.
``open-step``
    ``step/end``, ``assistant/chunk``, ``assistant/message``, ``tool/call`` or an *appended* ``tool/result``
    does not name the turn and step open right now.
``result-without-call``
    An appended ``tool/result`` has no earlier ``tool/call`` with its ``callId`` in the same step. A
    synthetic ``TOOL_NOT_STARTED`` result (``isError`` with ``error.code == "TOOL_NOT_STARTED"``) is exempt.
``in-turn``
    An event the catalog marks in-turn (``request/header``, ``request/context``, ``todo/write``,
    ``approval/asked|decided``, ``llm/retry``, ``llm/retry-started``) outside an open turn, or naming
    (``data.turn``) a turn that is not the open one.
``replace-outside-turn``
    A ``tool/result`` *replacement* (pruning) outside an open turn; it needs nothing else.
``pairing-order``
    Tool results must answer the tool-call blocks of the step's assistant message in model order.
``pairing-duplicate``
    A second appended ``tool/result`` for a call already answered in the step.
``pairing-orphan``
    An appended ``tool/result`` answers no tool-call block of an assistant message of its step.
``pairing-unanswered``
    A step closed (``step/end``, or ``turn/end`` with the step still open) with a tool-call block of
    its assistant message unanswered. Reported at the closing event, once per call.
``end-seed-in-open-turn``
    ``session/end-seed`` inside an open turn (see below).
``malformed``
    An event this checker reads lacks a field it needs, or has it with the wrong JSON type.

Pairing (§9.2 item 3): every tool-call block of a logged ``assistant/message`` that is not
``interrupted`` must get exactly one appended ``tool/result`` in the same step, in model order, before the
step closes. An interrupted message is the visible prefix of an aborted stream; it owes nothing.

The end-seed decision: a seed copied from a dead lifecycle (resume, fork, replay) must be balanced. The
store commits crash repair on load (the synthetic ``turn/end{interrupted}`` closes the dead turn) and
fork refuses a boundary inside an open turn, so an open turn right before ``session/end-seed`` is
allowed only once repair has closed it — i.e. never at the end-seed itself. A violation here means a
``Session`` was seeded with an unrepaired log. ``session/end-seed`` resets no turn or step state.

``user/message`` and plugin events the catalog does not mark in-turn are not constrained here.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal, TypeAlias

from dsh_kernel.errors import InvariantError
from dsh_kernel.jsonvalue import JsonObject, JsonValue
from dsh_kernel.session.events import EVENT_CATALOG, SessionEvent

Rule: TypeAlias = Literal[
    "seq-contiguous",
    "turn-number",
    "turn-overlap",
    "turn-end-mismatch",
    "turn-end-reason",
    "step-open-at-turn-end",
    "step-start-mismatch",
    "step-overlap",
    "step-number",
    "open-step",
    "result-without-call",
    "in-turn",
    "replace-outside-turn",
    "pairing-order",
    "pairing-duplicate",
    "pairing-orphan",
    "pairing-unanswered",
    "end-seed-in-open-turn",
    "malformed",
]

TOOL_NOT_STARTED = "TOOL_NOT_STARTED"
"""The error code of a synthetic result for a call that never started (exempt from needing a call)."""

_IN_TURN: frozenset[str] = frozenset(
    t
    for t, spec in EVENT_CATALOG.items()
    if spec.in_turn
    and t not in ("assistant/chunk", "assistant/message", "tool/call", "tool/result")
)


@dataclass(frozen=True, slots=True, kw_only=True)
class Violation:
    """One broken rule, found at the event with this ``seq`` and ``type``."""

    seq: int
    type: str
    rule: Rule
    message: str

    def __str__(self) -> str:
        return f"seq {self.seq} {self.type} [{self.rule}]: {self.message}"


def _int(data: JsonObject, key: str) -> int | None:
    v = data.get(key)
    return v if type(v) is int else None


def _obj(value: JsonValue) -> JsonObject | None:
    return value if isinstance(value, dict) else None


def result_call_id(data: JsonObject) -> str | None:
    """The call a ``tool/result`` answers: ``message.source.callId`` (else the block's ``toolCallId``)."""
    msg = _obj(data.get("message"))
    if msg is None:
        return None
    source = _obj(msg.get("source"))
    if source is not None and isinstance(cid := source.get("callId"), str):
        return cid
    content = msg.get("content")
    if isinstance(content, list) and content and isinstance(block := content[0], dict):
        tcid = block.get("toolCallId")
        if isinstance(tcid, str):
            return tcid
    return None


def message_tool_call_ids(data: JsonObject) -> list[str] | None:
    """The ids of the tool-call blocks of an ``assistant/message``, in model order (``None``: malformed)."""
    msg = _obj(data.get("message"))
    if msg is None:
        return None
    content = msg.get("content")
    if not isinstance(content, list):
        return None
    ids: list[str] = []
    for block in content:
        if isinstance(block, dict) and block.get("type") == "tool-call":
            cid = block.get("id")
            if not isinstance(cid, str):
                return None
            ids.append(cid)
    return ids


def is_not_started_result(data: JsonObject) -> bool:
    """True for the synthetic ``TOOL_NOT_STARTED`` result (an error result with that code)."""
    error = _obj(data.get("error"))
    if error is None or error.get("code") != TOOL_NOT_STARTED:
        return False
    msg = _obj(data.get("message"))
    content = msg.get("content") if msg is not None else None
    return (
        isinstance(content, list)
        and bool(content)
        and isinstance(block := content[0], dict)
        and block.get("isError") is True
    )


class _Checker:
    """The walk's state. One instance per log; ``feed`` each event in order."""

    __slots__ = (
        "answered",
        "called",
        "last_turn",
        "next_seq",
        "next_step",
        "open_step",
        "open_turn",
        "out",
        "owed",
        "owed_at",
        "owed_from",
        "owed_pos",
    )

    def __init__(self) -> None:
        self.out: list[Violation] = []
        self.next_seq = 0
        self.last_turn = 0
        self.open_turn: int | None = None
        self.open_step: int | None = None
        self.next_step = 1
        self.called: set[str] = set()  # tool/call ids of the open step not yet answered
        self.owed: list[str] = []  # tool-call blocks of the step's assistant messages, model order
        self.owed_at: dict[str, int] = {}  # call id -> its index in ``owed``
        self.owed_from: dict[str, int] = {}  # call id -> seq of the assistant message
        self.owed_pos = 0  # ``owed[:owed_pos]`` are all answered
        self.answered: set[str] = set()

    def fail(self, ev: SessionEvent, rule: Rule, message: str) -> None:
        self.out.append(Violation(seq=ev.seq, type=ev.type, rule=rule, message=message))

    def feed(self, ev: SessionEvent) -> None:
        if ev.seq != self.next_seq:
            self.fail(ev, "seq-contiguous", f"expected seq {self.next_seq}, got {ev.seq}")
        self.next_seq = ev.seq + 1
        t = ev.type
        if t == "assistant/chunk":  # the hot path: most of a log is chunks
            self.require_open_step(ev)
        elif t == "assistant/message":
            self.assistant_message(ev)
        elif t == "tool/call":
            if self.require_open_step(ev):
                cid = ev.data.get("callId")
                if isinstance(cid, str):
                    self.called.add(cid)
                else:
                    self.fail(ev, "malformed", "tool/call has no string callId")
        elif t == "tool/result":
            self.tool_result(ev)
        elif t == "turn/start":
            self.turn_start(ev)
        elif t == "turn/end":
            self.turn_end(ev)
        elif t == "step/start":
            self.step_start(ev)
        elif t == "step/end":
            if self.require_open_step(ev):
                self.close_step(ev)
        elif t == "session/end-seed":
            if self.open_turn is not None:
                self.fail(
                    ev,
                    "end-seed-in-open-turn",
                    f"the seed ends inside open turn {self.open_turn}; repair must close it first",
                )
        elif t in _IN_TURN:
            if self.open_turn is None:
                self.fail(ev, "in-turn", "appended outside any open turn")
            elif "turn" in ev.data and ev.data["turn"] != self.open_turn:
                self.fail(
                    ev,
                    "in-turn",
                    f"names turn {ev.data['turn']!r} but turn {self.open_turn} is open",
                )

    # --- turns and steps ----------------------------------------------------------------------------

    def turn_start(self, ev: SessionEvent) -> None:
        turn = _int(ev.data, "turn")
        if turn is None:
            self.fail(ev, "malformed", "turn/start has no integer turn")
            return
        if self.open_turn is not None:
            self.fail(ev, "turn-overlap", f"turn {turn} starts while turn {self.open_turn} is open")
        if turn != self.last_turn + 1:
            self.fail(ev, "turn-number", f"expected turn {self.last_turn + 1}, got {turn}")
        self.last_turn = turn
        self.open_turn = turn
        self.open_step = None
        self.next_step = 1
        self.reset_step()

    def turn_end(self, ev: SessionEvent) -> None:
        turn = _int(ev.data, "turn")
        if self.open_turn is None or turn != self.open_turn:
            self.fail(
                ev,
                "turn-end-mismatch",
                f"turn/end names turn {ev.data.get('turn')!r} but the open turn is {self.open_turn}",
            )
        reason = _obj(ev.data.get("reason"))
        if reason is None or not isinstance(reason.get("kind"), str):
            self.fail(ev, "turn-end-reason", "turn/end needs a reason object with a string kind")
        if self.open_step is not None:
            self.fail(ev, "step-open-at-turn-end", f"step {self.open_step} is still open")
            self.flush_unanswered(ev)
        self.open_turn = None
        self.open_step = None
        self.reset_step()

    def step_start(self, ev: SessionEvent) -> None:
        turn, step = _int(ev.data, "turn"), _int(ev.data, "step")
        if step is None or turn is None:
            self.fail(ev, "malformed", "step/start needs integer turn and step")
            return
        if self.open_turn is None or turn != self.open_turn:
            self.fail(
                ev,
                "step-start-mismatch",
                f"step in turn {turn} but the open turn is {self.open_turn}",
            )
        if self.open_step is not None:
            self.fail(ev, "step-overlap", f"step {step} starts while step {self.open_step} is open")
        if step != self.next_step:
            self.fail(ev, "step-number", f"expected step {self.next_step}, got {step}")
        self.open_step = step
        self.next_step = step + 1
        self.reset_step()

    def close_step(self, ev: SessionEvent) -> None:
        self.flush_unanswered(ev)
        self.open_step = None
        self.reset_step()

    def reset_step(self) -> None:
        if self.called:
            self.called.clear()
        if self.owed:
            self.owed = []
            self.owed_at.clear()
            self.owed_from.clear()
            self.answered.clear()
        self.owed_pos = 0

    def require_open_step(self, ev: SessionEvent) -> bool:
        """Check that ``ev`` names the open turn and step; False when it does not."""
        data = ev.data
        step = self.open_step
        if step is not None and data.get("step") == step and data.get("turn") == self.open_turn:
            return True
        self.fail(
            ev,
            "open-step",
            f"names turn {data.get('turn')!r} step {data.get('step')!r} but the open one is "
            f"turn {self.open_turn} step {step}",
        )
        return False

    # --- messages, calls, results -------------------------------------------------------------------

    def assistant_message(self, ev: SessionEvent) -> None:
        if not self.require_open_step(ev):
            return
        ids = message_tool_call_ids(ev.data)
        if ids is None:
            self.fail(ev, "malformed", "assistant/message has no message with a content list")
            return
        if ev.data.get("interrupted") is True:
            return
        for cid in ids:
            self.owed_at[cid] = len(self.owed)
            self.owed_from[cid] = ev.seq
            self.owed.append(cid)

    def tool_result(self, ev: SessionEvent) -> None:
        if ev.surface_op != "append":
            if self.open_turn is None:
                self.fail(
                    ev, "replace-outside-turn", "a tool/result replacement needs an open turn"
                )
            return
        if not self.require_open_step(ev):
            return
        cid = result_call_id(ev.data)
        if cid is None:
            self.fail(ev, "malformed", "tool/result has no message.source.callId")
            return
        if cid in self.called:
            self.called.discard(cid)
        elif not is_not_started_result(ev.data):
            self.fail(ev, "result-without-call", f"no tool/call {cid!r} earlier in this step")
        self.pair(ev, cid)

    def pair(self, ev: SessionEvent, cid: str) -> None:
        at = self.owed_at.get(cid)
        if at is None:
            self.fail(
                ev,
                "pairing-orphan",
                f"{cid!r} is no tool-call block of this step's assistant message",
            )
            return
        if cid in self.answered:
            self.fail(ev, "pairing-duplicate", f"{cid!r} was already answered in this step")
            return
        owed = self.owed
        if at != self.owed_pos:
            self.fail(
                ev,
                "pairing-order",
                f"{cid!r} is answered before {owed[self.owed_pos]!r}, out of model order",
            )
        self.answered.add(cid)
        pos = self.owed_pos
        while pos < len(owed) and owed[pos] in self.answered:
            pos += 1
        self.owed_pos = pos

    def flush_unanswered(self, ev: SessionEvent) -> None:
        for cid in self.owed[self.owed_pos :]:
            if cid not in self.answered:
                self.fail(
                    ev,
                    "pairing-unanswered",
                    f"tool call {cid!r} (assistant/message seq {self.owed_from[cid]}) got no "
                    "tool/result before the step closed",
                )


def check_invariants(events: Sequence[SessionEvent]) -> list[Violation]:
    """Every violation of the structural rules in ``events`` (empty when the log is valid)."""
    checker = _Checker()
    feed = checker.feed
    for ev in events:
        feed(ev)
    return checker.out


class SessionInvariantError(InvariantError):
    """``assert_invariants`` failed; ``violations`` lists every broken rule, in log order."""

    def __init__(self, violations: Sequence[Violation]) -> None:
        listing = "\n".join(f"  {v}" for v in violations)
        super().__init__(f"{len(violations)} session invariant violation(s):\n{listing}")
        self.violations: tuple[Violation, ...] = tuple(violations)


def assert_invariants(events: Sequence[SessionEvent]) -> None:
    """Raise ``SessionInvariantError`` (an ``InvariantError``) listing every violation, if any."""
    violations = check_invariants(events)
    if violations:
        raise SessionInvariantError(violations)
