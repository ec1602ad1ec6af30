"""The ``replay`` provider: answers model requests from a recorded session's stream chunks.

A recording is cut into *attempts*: the ``assistant/chunk`` events of one model call, in log order,
grouped by (turn, step) and split after each ``finish`` chunk — so failed attempts and their retries are
separate entries and a recorded retry replays as a retry. Each ``stream()`` call plays the next attempt's
chunks verbatim. An attempt whose recording never finished (cancelled, or cut by a crash) streams its
chunks and then fails with ``REPLAY_INCOMPLETE``.

Before answering, the request is checked against the recording: the messages after the last assistant
message (the new prompt, or the tool results being returned) — only those typed by the user
(``source.kind == "user"``) and tool results — user messages compared by text, tool results by
tool-call id and error flag (their text depends on the machine), never by message id — must equal what the recorded request had at that point, rebuilt from the recorded
``user/message`` and ``tool/result`` events. Otherwise the stream fails with ``LlmError`` code
``REPLAY_DIVERGED`` naming the recorded turn and step and both texts. Asking for more attempts than
were recorded fails with ``REPLAY_EXHAUSTED``. Injected context (runtime snapshots, plugins) is not
compared: it may legitimately differ between runs.

A compacted recording replays its compactions: a ``purpose: "compaction"`` request is answered with
the next recorded answer of a summary call (``compaction/summary`` with ``method: model``, or the
``rawOutput`` of one that was not used, which the replay then sets aside again), in order, and not
checked against the recording (its messages are the history being summarised); with none left it
fails with ``REPLAY_EXHAUSTED``, so the compaction falls back to its deterministic reduction. The
model then reports the recording's context window (its first ``request/context``) as its
``ModelInfo``, so the replayed agent compacts where the recording did.

Tools that change the notebook are not applied again: ``notebook_edits`` (the recorded
``notebook/insert`` payloads by call id) and ``tool_failures`` (the recorded failed results' code and
message by call id) let ``notebook_insert`` answer a replayed call with what was recorded
(``kernel.toolbox.notebook``), so its card shows the recorded insertion and the result's error flag
matches the recording.

``assert_consumed()`` raises ``AssertionError`` unless every recorded attempt was played.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from typing import cast

from dsh_kernel.errors import LlmError
from dsh_kernel.jsonvalue import JsonObject, JsonValue
from dsh_kernel.llm.codec import chunk_from_json, message_to_json
from dsh_kernel.llm.provider import REPLAY_PROVIDER_ID, BaseProvider
from dsh_kernel.llm.types import (
    BlockEndChunk,
    FinishChunk,
    FinishStop,
    GenerateRequest,
    LlmFailure,
    ModelInfo,
    StreamChunk,
    TextBlock,
    TextDeltaChunk,
)
from dsh_kernel.session.codec import canonical
from dsh_kernel.session.events import ReplaceOp, SessionEvent, SessionHeader
from dsh_kernel.session.log import Session
from dsh_kernel.session.payloads import ToolResult, payload_of
from dsh_kernel.store.journal import read_session
from dsh_kernel.store.layout import Store

REPLAY_DIVERGED = "REPLAY_DIVERGED"
REPLAY_EXHAUSTED = "REPLAY_EXHAUSTED"
REPLAY_INCOMPLETE = "REPLAY_INCOMPLETE"

_COMPARED_SOURCES = frozenset({"user", "tool"})


@dataclass(frozen=True, slots=True, kw_only=True)
class RecordedAttempt:
    turn: int
    step: int
    attempt: int
    chunks: tuple[StreamChunk, ...]
    finished: bool
    expected: tuple[str, ...]
    """Fingerprints of the compared tail messages of the recorded request."""
    expected_text: str


def _tail(messages: Sequence[JsonValue]) -> list[JsonObject]:
    """Messages after the last assistant message with content, restricted to user and tool sources."""
    start = 0
    for i, m in enumerate(messages):
        if isinstance(m, dict) and m.get("role") == "assistant" and m.get("content"):
            start = i + 1
    out: list[JsonObject] = []
    for m in messages[start:]:
        if not isinstance(m, dict):
            continue
        source = m.get("source")
        if isinstance(source, dict) and source.get("kind") in _COMPARED_SOURCES:
            out.append(m)
    return out


def _block_print(block: JsonValue) -> JsonValue:
    if not isinstance(block, dict):
        return None
    kind = block.get("type")
    if kind == "text":
        return ["text", block.get("text")]
    if kind == "tool-result":
        # A tool result's text depends on the machine it ran on (paths, counters, timings, library
        # versions), so a replay compares which call it answers and whether it failed, not its text.
        return ["tool-result", block.get("toolCallId"), block.get("isError") is True]
    return [kind]


def fingerprint(message: JsonObject) -> str:
    content = message.get("content")
    blocks = [_block_print(b) for b in content] if isinstance(content, list) else []
    source = message.get("source")
    kind = source.get("kind") if isinstance(source, dict) else None
    return canonical([message.get("role"), kind, blocks])


def describe(messages: Sequence[JsonObject]) -> str:
    parts: list[str] = []
    for m in messages:
        content = m.get("content")
        for b in content if isinstance(content, list) else []:
            if not isinstance(b, dict):
                continue
            if b.get("type") == "text":
                parts.append(f"user: {str(b.get('text'))[:120]!r}")
            elif b.get("type") == "tool-result":
                inner = b.get("content")
                text = (
                    "".join(str(x.get("text", "")) for x in inner if isinstance(x, dict))
                    if isinstance(inner, list)
                    else ""
                )
                parts.append(f"tool result {b.get('toolCallId')}: {text[:120]!r}")
    return "; ".join(parts) or "(no user message or tool result)"


def recorded_attempts(
    events: Sequence[SessionEvent], *, start_seq: int = 0
) -> list[RecordedAttempt]:
    """Cut a log into attempts (see the module docstring); chunks before ``start_seq`` are skipped."""
    surface: list[int] = []
    by_seq: dict[int, SessionEvent] = {}
    out: list[RecordedAttempt] = []
    key: tuple[int, int] | None = None
    number = 0
    chunks: list[StreamChunk] = []
    finished = False
    expected: tuple[str, ...] = ()
    expected_text = ""

    def close() -> None:
        if key is not None and chunks:
            out.append(
                RecordedAttempt(
                    turn=key[0],
                    step=key[1],
                    attempt=number,
                    chunks=tuple(chunks),
                    finished=finished,
                    expected=expected,
                    expected_text=expected_text,
                )
            )

    for ev in events:
        by_seq[ev.seq] = ev
        op = ev.surface_op
        if op == "append":
            surface.append(ev.seq)
        elif isinstance(op, ReplaceOp):
            i, j = surface.index(op.start), surface.index(op.end)
            surface[i : j + 1] = [ev.seq]
        if ev.type != "assistant/chunk" or ev.seq < start_seq:
            continue
        data = payload_of(ev, "assistant/chunk")
        turn, step = data["turn"], data["step"]
        if key != (turn, step) or finished:
            close()
            number = number + 1 if key == (turn, step) else 1
            key, chunks, finished = (turn, step), [], False
            tail = _tail([_surface_message(by_seq[s]) for s in surface])
            expected = tuple(fingerprint(m) for m in tail)
            expected_text = describe(tail)
        chunk = chunk_from_json(data["chunk"])
        chunks.append(chunk)
        finished = isinstance(chunk, FinishChunk)
    close()
    return out


def recorded_summaries(events: Sequence[SessionEvent], *, start_seq: int = 0) -> list[str]:
    """What the model answered each compaction's summary call, in log order (from ``start_seq``
    on): the summary it wrote, or the answer that was not used (``rawOutput``)."""
    out: list[str] = []
    for ev in events:
        if ev.type == "compaction/summary" and ev.seq >= start_seq:
            data = payload_of(ev, "compaction/summary")
            if data["method"] == "model":
                out.append(data["summary"])
            elif "rawOutput" in data:
                out.append(data["rawOutput"])
    return out


def _recorded_window(events: Sequence[SessionEvent]) -> ModelInfo | None:
    """The context window the recording ran with (its first ``request/context`` that says one)."""
    for ev in events:
        if ev.type == "request/context":
            window = payload_of(ev, "request/context").get("contextWindow")
            if window is not None:
                return ModelInfo(context_window=window)
    return None


def _surface_message(ev: SessionEvent) -> JsonValue:
    if ev.type == "assistant/message":
        return payload_of(ev, "assistant/message")["message"]
    if ev.type == "tool/result":
        return payload_of(ev, "tool/result")["message"]
    return ev.data  # user/message: the data is the message


class ReplayProvider(BaseProvider):
    """A ``Provider`` that plays a recording (see the module docstring)."""

    def __init__(
        self,
        events: Sequence[SessionEvent],
        *,
        id: str = REPLAY_PROVIDER_ID,
        start_seq: int = 0,
        info: ModelInfo | None = None,
        header: SessionHeader | None = None,
    ) -> None:
        self._id = id
        self.header = header
        """The recorded session's header, when known (``recording``)."""
        self._events = events
        self._start_seq = start_seq
        self._recording: Session | None = None
        self.turn: int | None = None
        """The recorded turn the latest answer came from (``None`` before the first)."""
        self.summaries = recorded_summaries(events, start_seq=start_seq)
        self._info = info if info is not None or not self.summaries else _recorded_window(events)
        self.attempts = recorded_attempts(events, start_seq=start_seq)
        self.notebook_edits: dict[str, JsonObject] = {}
        self.tool_failures: dict[str, tuple[str, str]] = {}
        for ev in events:
            if ev.seq < start_seq:
                continue
            if ev.type == "notebook/insert":
                edit = payload_of(ev, "notebook/insert")
                self.notebook_edits[edit["callId"]] = cast("JsonObject", dict(edit))
            elif ev.type == "tool/result":
                _recorded_failure(self.tool_failures, payload_of(ev, "tool/result"))
        self._next = 0
        self._next_summary = 0
        self.requests: list[GenerateRequest] = []

    @classmethod
    def from_store(
        cls, store: Store, session_id: str, *, id: str = REPLAY_PROVIDER_ID
    ) -> ReplayProvider:
        """Replay a stored session (repaired in memory if its last turn was left open); a fork's
        copied prefix is not replayed — but a rewind's or an import's is: such a session *is* the
        notebook's conversation from its first cell (``kernel.rewind``, ``kernel.capsules``), so a
        Run All replays it from the top."""
        loaded = read_session(store.find_journal(session_id))
        whole = loaded.header.parent_kind in ("rewind", "import")
        start = 0 if whole else loaded.header.seed_length or 0
        return cls(loaded.events, id=id, start_seq=start, header=loaded.header)

    def recording(self) -> Session | None:
        """The recorded session as a ``Session`` (built once), when its header is known: a
        replayed chat cell saves the *recording's* turn as its capsule, so a replay's saved
        outputs are the same bytes every run (``capsule``)."""
        if self._recording is None and self.header is not None:
            header = self.header
            if self._start_seq == 0 and header.seed_length:  # replayed from its first turn
                header = dataclasses.replace(header, seed_length=None)
            self._recording = Session(header=header, seed=self._events)
        return self._recording

    @property
    def id(self) -> str:
        return self._id

    def model_info(self, model: str) -> ModelInfo:
        return self._info if self._info is not None else ModelInfo()

    @property
    def remaining(self) -> int:
        return len(self.attempts) - self._next

    def assert_consumed(self) -> None:
        if self.remaining:
            nxt = self.attempts[self._next]
            raise AssertionError(
                f"ReplayProvider: {self.remaining} recorded attempt(s) not replayed (next: turn "
                f"{nxt.turn}, step {nxt.step}, attempt {nxt.attempt})"
            )

    def stream(self, request: GenerateRequest) -> AsyncIterator[StreamChunk]:
        self.requests.append(request)
        return self._play(request)

    async def _play(self, request: GenerateRequest) -> AsyncIterator[StreamChunk]:
        if request.purpose == "compaction":
            if self._next_summary >= len(self.summaries):
                raise _exhausted(f"{len(self.summaries)} model summaries", "this compaction")
            text = self.summaries[self._next_summary]
            self._next_summary += 1
            for chunk in (
                TextDeltaChunk(index=0, text=text),
                BlockEndChunk(index=0, block=TextBlock(text=text)),
                FinishChunk(reason=FinishStop()),
            ):
                await asyncio.sleep(0)
                yield chunk
            return
        if self._next >= len(self.attempts):
            raise _exhausted(f"{len(self.attempts)} model calls", "this request")
        rec = self.attempts[self._next]
        tail = _tail([message_to_json(m) for m in request.messages])
        got = tuple(fingerprint(m) for m in tail)
        if got != rec.expected:
            raise LlmError(
                LlmFailure(
                    code=REPLAY_DIVERGED,
                    message=(
                        f"replay diverged from the recording at turn {rec.turn}, step {rec.step}: "
                        f"the recorded request had {rec.expected_text}; this request has "
                        f"{describe(tail)}"
                    ),
                )
            )
        self._next += 1
        self.turn = rec.turn
        for chunk in rec.chunks:
            await asyncio.sleep(0)
            yield chunk
        if not rec.finished:
            raise LlmError(
                LlmFailure(
                    code=REPLAY_INCOMPLETE,
                    message=f"replay: the recorded call at turn {rec.turn}, step {rec.step} never "
                    "finished (it was cancelled or the kernel stopped)",
                )
            )


def _recorded_failure(into: dict[str, tuple[str, str]], result: ToolResult) -> None:
    """Keep a failed result's code and text under its call id (``ReplayProvider.tool_failures``)."""
    error = result.get("error")
    message = result["message"]
    content = message.get("content")
    block = content[0] if isinstance(content, list) and content else None
    if error is None or not isinstance(block, dict):
        return
    call_id = block.get("toolCallId")
    inner = block.get("content")
    text = (
        "".join(str(x.get("text", "")) for x in inner if isinstance(x, dict))
        if isinstance(inner, list)
        else ""
    )
    if isinstance(call_id, str):
        into[call_id] = (error["code"], text.removeprefix("Error: "))


def _exhausted(recorded: str, what: str) -> LlmError:
    """``REPLAY_EXHAUSTED``: the recording holds only ``recorded``, and ``what`` goes beyond it."""
    message = f"replay: the recording has only {recorded}; {what} goes beyond it"
    return LlmError(LlmFailure(code=REPLAY_EXHAUSTED, message=message))
