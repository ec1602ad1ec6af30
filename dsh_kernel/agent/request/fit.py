"""What fits in the context window: the warning, the refusal, the output cap, and the input an
overflow leaves out.

``fit_request`` runs before each request is sent, with the route's window (``agent.request.window``) and
the meter's reading of the request (``agent.request.meter.measure``: real usage where it can anchor on one,
else ``chars / 4`` estimates, calibrated to the route's server: ``llm.calibration``):

* **warning** — when the request fills at least ``WARN_FRACTION`` of any window (even an assumed
  one), once per turn: a ``context/warning`` event (informational; the turn's view shows it as a
  one-line notice);
* **refusal** — when the window is *known* (configured or reported by the server) and the estimate
  plus ``MIN_ANSWER_TOKENS`` does not fit, nothing is sent: ``LlmError(CONTEXT_WINDOW_EXCEEDED)``
  saying how big the request is and how big the window;
* **output cap** — with a known window, ``max_tokens`` (each profile's own field on the wire) is
  the room left: ``window − padded estimate``, never below ``MIN_ANSWER_TOKENS``, never above a cap
  already set (the model's default or the caller's). It is marked an adapter default, so the next
  request computes its own.

The estimate is honest only within a factor: ``chars / 4`` is close for English prose and JSON but
can be half the real count for digits, code and other scripts (a real llama.cpp server counted
24,673 tokens where it said 12,821). So the two uses lean opposite ways. The refusal uses the plain
estimate: it only stops requests that are clearly too big, and one it lets through is still caught
by the server (a 400, or an empty stream that is probed). The cap uses the estimate padded by
``ESTIMATE_PADDING`` on its estimated part (a part anchored on real usage is exact), so the answer's
room is rather too small than too big — a server such as vLLM refuses prompt + cap over its window.

``drop_overflowed_turn`` makes the next message work after an overflow. The log is append-only, so
the failed turn's messages stay in it; but a turn that ended ``CONTEXT_WINDOW_EXCEEDED`` has its
messages taken off the surface — the model's history — by one ``user/message`` that replaces them
(``surfaceOp: replace`` citing them all, the surface's own mechanism for compaction), a one-line
note saying what was left out and why. ``derive_messages`` (and so every later request, the
dev-invariant rebuild, the meter and a replay's expected tail) reads the surface, so they agree;
the human transcript reads append-origin events, so the user still sees what they sent.
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Final

from dsh_kernel.agent.compaction.range import PLUGIN
from dsh_kernel.agent.request.meter import (
    TokenMeasurement,
    measure,
    prepared_header,
)
from dsh_kernel.agent.request.window import ContextWindow
from dsh_kernel.errors import LlmError
from dsh_kernel.ids import new_message_id
from dsh_kernel.llm.calibration import Calibration
from dsh_kernel.llm.codec import message_to_json
from dsh_kernel.llm.estimate import message_tokens
from dsh_kernel.llm.provider import PreparedCall
from dsh_kernel.llm.types import LlmFailure, Message, PluginSource, TextBlock, ToolSchema
from dsh_kernel.session.derive import project_event
from dsh_kernel.session.events import ReplaceOp, SessionEvent
from dsh_kernel.session.log import Session
from dsh_kernel.session.payloads import ContextWarning, payload_of

WARN_FRACTION: Final = 0.8
MIN_ANSWER_TOKENS: Final = 256
"""The least room an answer is given; a request that cannot leave it is refused."""
ESTIMATE_PADDING: Final = 1.5
"""Factor on the estimated part of a request when its answer's room is computed."""

DROPPED_PLUGIN: Final = "dsh/context-window"

"""The source plugin of the note that replaces an overflowed turn's messages."""


def padded_tokens(m: TokenMeasurement) -> int:
    """The request's size leaning high: estimated parts times ``ESTIMATE_PADDING``."""
    base = m.baseline_tokens if m.baseline == "usage" else m.baseline_tokens * ESTIMATE_PADDING
    return math.ceil(base + m.surface_delta_tokens * ESTIMATE_PADDING)


def _warned(session: Session, turn: int) -> bool:
    """Whether ``turn`` already has its ``context/warning``: from the log's index when ``turn`` is
    the latest turn (always, for the agent), else by reading back to its ``turn/start``."""
    warning = session.latest("context/warning")
    if warning is None:
        return False
    start = session.latest("turn/start")
    if start is not None and payload_of(start, "turn/start")["turn"] == turn:
        return warning.seq > start.seq
    for ev in reversed(session.events):
        if ev.type == "context/warning":
            return True
        if ev.type == "turn/start" and payload_of(ev, "turn/start")["turn"] == turn:
            return False
    return False


def fit_request(
    session: Session,
    prepared: PreparedCall,
    window: ContextWindow | None,
    *,
    system: str,
    tools: tuple[ToolSchema, ...],
    turn: int,
    step: int,
    calibration: Calibration | None = None,
) -> PreparedCall:
    """``prepared`` with its output cap fitted to ``window``; may log a warning or refuse (module
    docstring). ``calibration``: the token estimate's (default: the log's)."""
    if window is None:
        return prepared
    header = prepared_header(prepared, system=system, tools=tools)
    m = measure(session, header=header, context_window=window.tokens, calibration=calibration)
    size = m.total_tokens
    how = "measured" if m.baseline == "usage" else "estimated"
    if window.known and size + MIN_ANSWER_TOKENS > window.tokens:
        raise LlmError(
            LlmFailure(
                code="CONTEXT_WINDOW_EXCEEDED",
                message=f"this request is ~{size:,} tokens ({how}) and the model's context window "
                f"is {window.describe()}, with at least {MIN_ANSWER_TOKENS} kept for the answer: "
                "it was not sent",
            )
        )
    if size >= WARN_FRACTION * window.tokens and not _warned(session, turn):
        session.append(
            "context/warning",
            ContextWarning(
                turn=turn,
                step=step,
                tokens=size,
                measured=m.baseline == "usage",
                contextWindow=window.tokens,
                source=window.source,
            ),
            ignorable=True,
        )
    if not window.known:
        return prepared
    room = max(MIN_ANSWER_TOKENS, window.tokens - padded_tokens(m))
    cap = prepared.config.max_tokens
    if cap is not None and cap <= room:
        return prepared
    return with_cap(prepared, room)


def with_cap(prepared: PreparedCall, cap: int | None) -> PreparedCall:
    """``prepared`` with output cap ``cap``; a cap the adapter filled in (none was asked for)
    stays marked as the adapter's, so the logged request says who chose it."""
    filled = prepared.config.max_tokens is None or "maxTokens" in prepared.adapter_defaults
    return PreparedCall(
        config=replace(prepared.config, max_tokens=cap),
        adapter_defaults=prepared.adapter_defaults | {"maxTokens"}
        if filled
        else prepared.adapter_defaults,
    )


def _of_turn(event: SessionEvent, turn: int) -> bool:
    """Whether surface node ``event`` (at or after the turn's start) was added by turn ``turn``: a
    compaction's checkpoint, or a pruned result of an earlier turn, was not — it stays."""
    if event.type in ("assistant/message", "tool/result"):
        return event.data.get("turn") == turn
    source = event.data.get("source")
    return not (isinstance(source, dict) and source.get("plugin") == PLUGIN)


def drop_overflowed_turn(session: Session, turn: int, failure: LlmFailure) -> None:
    """After a turn failed with ``CONTEXT_WINDOW_EXCEEDED``: replace the messages it added to the
    surface with one short note (module docstring). Anything else changes nothing."""
    if failure.code != "CONTEXT_WINDOW_EXCEEDED":
        return
    events = session.events
    start = next(
        (
            ev.seq
            for ev in reversed(events)
            if ev.type == "turn/start" and payload_of(ev, "turn/start")["turn"] == turn
        ),
        None,
    )
    if start is None:
        return
    nodes: list[int] = []
    for seq in reversed(session.surface):
        if seq < start or not _of_turn(events[seq], turn):
            break
        nodes.insert(0, seq)
    if not nodes:
        return
    answered = any(events[s].type == "assistant/message" for s in nodes)
    tokens = sum(message_tokens(m) for s in nodes if (m := project_event(events[s])) is not None)
    if answered:
        text = (
            f"[Turn {turn} (~{tokens:,} tokens with its tool calls and results) is left out here: "
            "its next request did not fit the model's context window. What its tools did in the "
            "notebook stays done.]"
        )
    else:
        text = (
            f"[A message of ~{tokens:,} tokens is left out here: it did not fit the model's context "
            "window and was not answered.]"
        )
    note = Message(
        id=new_message_id(),
        role="user",
        content=(TextBlock(text=text),),
        source=PluginSource(
            plugin=DROPPED_PLUGIN,
            form={"kind": "dropped-input", "turn": turn, "answered": answered},
        ),
    )
    session.append(
        "user/message",
        message_to_json(note),
        surface_op=ReplaceOp(start=nodes[0], end=nodes[-1]),
        source_event_seqs=nodes,
    )
