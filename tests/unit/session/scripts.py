"""Valid session logs for tests, written through a real ``Session`` the way the agent loop writes them.

``LoopScript(choose)`` plays the turn algorithm of SPINE §1.3–§1.4 and §4.5 with every decision taken
by ``choose(n) -> int in [0, n)``: hypothesis supplies it from ``st.data()`` (so failing logs shrink),
plain tests from a seeded ``random.Random``. Decisions cover claimed user messages, request headers,
in-step retries (failed attempts keep their chunks), interrupted and failed streams, max-tokens, tool
calls with approvals and todo writes, abort mid-tools (started calls drain, the rest get a synthetic
``tool/call`` + result pair), pruning (a ``tool/result`` replacement), standalone events between turns,
and resuming from a repaired seed (which makes the ``Session`` write ``session/end-seed``).

The message builders here are also used by the hand-built tests.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable

from dsh_kernel.jsonvalue import JsonObject, JsonValue
from dsh_kernel.session.events import ReplaceOp, SessionEvent, SessionHeader
from dsh_kernel.session.log import Session
from dsh_kernel.session.repair import repair
from dsh_kernel.testing import FakeClock

Choose = Callable[[int], int]

HEADER = SessionHeader(id="s-test", created_at=1_700_000_000_000)


def new_session(seed: list[SessionEvent] | None = None) -> Session:
    return Session(header=HEADER, seed=seed or (), clock=FakeClock())


_ids = itertools.count(1)


def user_message(text: str = "hello") -> JsonObject:
    return {
        "id": f"u-{next(_ids)}",
        "role": "user",
        "content": [{"type": "text", "text": text}],
        "source": {"kind": "user"},
    }


def assistant_message(text: str = "", call_ids: tuple[str, ...] = ()) -> JsonObject:
    content: list[JsonValue] = []
    if text:
        content.append({"type": "text", "text": text})
    for cid in call_ids:
        content.append({"type": "tool-call", "id": cid, "name": "echo", "arguments": "{}"})
    return {
        "id": f"a-{next(_ids)}",
        "role": "assistant",
        "content": content,
        "source": {"kind": "model", "provider": "fake", "model": "fake-1"},
    }


def tool_result_data(
    turn: int, step: int, call_id: str, text: str = "ok", *, error_code: str | None = None
) -> JsonObject:
    block: JsonObject = {
        "type": "tool-result",
        "toolCallId": call_id,
        "content": [{"type": "text", "text": text}],
    }
    data: JsonObject = {"turn": turn, "step": step}
    if error_code is not None:
        block["isError"] = True
        data["error"] = {"name": "ToolError", "code": error_code}
    data["message"] = {
        "id": f"r-{next(_ids)}",
        "role": "user",
        "content": [block],
        "source": {"kind": "tool", "callId": call_id},
    }
    return data


def chunk(text: str = "hi") -> JsonObject:
    return {"type": "text-delta", "index": 0, "text": text}


HEADER_JSON: JsonObject = {"config": {"provider": "fake", "model": "fake-1"}, "system": "be brief"}


class LoopScript:
    """Writes turns into ``session`` as the loop would, steered by ``choose``."""

    def __init__(self, choose: Choose, session: Session | None = None) -> None:
        self.choose = choose
        self.session = session or new_session()
        self.calls = itertools.count(1)
        self.header_written = any(e.type == "request/header" for e in self.session.events)
        self.results: list[int] = []  # seqs of tool/result surface nodes that can be pruned

    def pick(self, n: int) -> int:
        return self.choose(n) if n > 1 else 0

    def flag(self, percent: int) -> bool:
        return self.pick(100) < percent

    # --- the script ----------------------------------------------------------------------------------

    def run(self, turns: int) -> Session:
        for _ in range(turns):
            self.between_turns()
            self.turn()
        return self.session

    def between_turns(self) -> None:
        s = self.session
        match self.pick(4):
            case 1:
                s.append("session/title", {"title": "t", "source": "user"})
            case 2:
                s.append(
                    "agent/inbox/spliced",
                    {"target": "next-turn", "start": 0, "inserted": [user_message("queued")]},
                )
            case 3:
                s.append("command/run", {"commandId": "c1", "name": "status"})
                s.append("command/done", {"commandId": "c1", "kind": "ok"})
            case _:
                pass

    def turn(self) -> None:
        s = self.session
        turn = s.last_turn + 1
        s.append("turn/start", {"turn": turn})
        reason: JsonObject = {"kind": "completed"}
        for step in itertools.count(1):
            if step > 1 and self.flag(15):  # blocked at pre-step, or nothing left to claim
                reason = {"kind": "blocked"}
                break
            s.append("step/start", {"turn": turn, "step": step})
            outcome = self.step(turn, step)
            s.append("step/end", {"turn": turn, "step": step})
            if outcome is not None:
                reason = outcome
                break
            if step >= 3:
                break
        s.append("turn/end", {"turn": turn, "reason": reason})

    def step(self, turn: int, step: int) -> JsonObject | None:
        """One step; returns the turn-end reason when the turn ends after it, else None."""
        s = self.session
        for _ in range(self.pick(3) if step > 1 else 1 + self.pick(2)):
            s.append("user/message", user_message(), surface_op="append")
        if self.results and self.flag(20):
            self.prune(turn)
        if not self.header_written or self.flag(20):
            reason = "initial" if not self.header_written else "change"
            s.append("request/header", {"header": HEADER_JSON, "reason": reason})
            self.header_written = True
            if self.flag(50):
                s.append("request/context", {"provider": "fake", "model": "fake-1"})
        for attempt in range(self.pick(3)):  # failed attempts, retried in the same step
            self.chunks(turn, step)
            s.append("llm/retry", self.retry_data(turn, step, attempt + 1))
            if self.flag(20):  # cancelled during the back-off sleep
                return {"kind": "aborted", "reason": {"kind": "user"}}
            s.append(
                "llm/retry-started",
                {"retryId": "r1", "turn": turn, "step": step, "retry": attempt + 1},
            )
        seqs = self.chunks(turn, step)
        match self.pick(10):
            case 0:  # the stream failed for good
                return {"kind": "error", "error": {"message": "boom", "code": "SERVER"}}
            case 1:  # interrupted: the visible prefix, if any, with interrupted: true
                if seqs and self.flag(70):
                    s.append(
                        "assistant/message",
                        {
                            "turn": turn,
                            "step": step,
                            "message": assistant_message("partial"),
                            "interrupted": True,
                        },
                        surface_op="append",
                        source_event_seqs=seqs,
                    )
                return {"kind": "aborted", "reason": {"kind": "user"}}
            case 2:  # max tokens: tool calls dropped; the message may be content-less
                text = "cut" if self.flag(50) else ""
                self.message(turn, step, seqs, assistant_message(text))
                return {"kind": "max-tokens"}
            case _:
                calls = tuple(f"call-{next(self.calls)}" for _ in range(self.pick(4)))
                self.message(turn, step, seqs, assistant_message("answer", calls))
                if not calls:
                    return {"kind": "completed"}
                return self.tools(turn, step, calls)

    def chunks(self, turn: int, step: int) -> list[int]:
        return [
            self.session.append(
                "assistant/chunk", {"turn": turn, "step": step, "chunk": chunk()}
            ).seq
            for _ in range(self.pick(4))
        ]

    def message(self, turn: int, step: int, seqs: list[int], message: JsonObject) -> None:
        data: JsonObject = {"turn": turn, "step": step, "message": message}
        if self.flag(50):
            data["usage"] = {"inputTokens": 10, "outputTokens": 5}
        self.session.append("assistant/message", data, surface_op="append", source_event_seqs=seqs)

    def tools(self, turn: int, step: int, calls: tuple[str, ...]) -> JsonObject | None:
        s = self.session
        abort_at = self.pick(len(calls) + 3)  # >= len(calls): no abort
        for i, cid in enumerate(calls):
            synthetic = i >= abort_at
            call_data: JsonObject = {
                "turn": turn,
                "step": step,
                "callId": cid,
                "name": "echo",
                "arguments": "{}",
            }
            if synthetic:
                call_data["synthetic"] = True
            call = s.append("tool/call", call_data)
            if not synthetic:
                if self.flag(20):
                    s.append("approval/asked", {"id": f"ap-{cid}", "toolName": "echo"})
                    s.append("approval/decided", {"id": f"ap-{cid}", "outcome": "allowed-once"})
                if self.flag(15):
                    s.append("todo/write", {"todos": [{"content": "x", "status": "pending"}]})
            code = "ABORTED_BEFORE_DISPATCH" if synthetic else None
            result = s.append(
                "tool/result",
                tool_result_data(turn, step, cid, error_code=code),
                surface_op="append",
                source_event_seqs=[call.seq],
            )
            self.results.append(result.seq)
        if abort_at < len(calls):
            return {"kind": "aborted", "reason": {"kind": "user"}}
        return None

    def prune(self, turn: int) -> None:
        """Replace an earlier tool result's content (content-only pruning)."""
        s = self.session
        target = self.results.pop(self.pick(len(self.results)))
        old = s.events[target].data
        msg = old["message"]
        assert isinstance(msg, dict)
        block = msg["content"][0]  # type: ignore[index]
        assert isinstance(block, dict)
        new_block: JsonObject = {**block, "content": [{"type": "text", "text": "[pruned]"}]}
        new_data: JsonObject = {**old, "message": {**msg, "content": [new_block]}}
        s.append(
            "tool/result",
            new_data,
            surface_op=ReplaceOp(start=target, end=target),
            source_event_seqs=[target],
        )

    def retry_data(self, turn: int, step: int, retry: int) -> JsonObject:
        return {
            "retryId": "r1",
            "turn": turn,
            "step": step,
            "provider": "fake",
            "mode": "normal",
            "policyKey": "{}",
            "retry": retry,
            "delayMs": 1,
            "failure": {"message": "busy", "code": "RATE_LIMIT"},
        }


def scripted_log(choose: Choose, *, turns: int = 3, resumes: int = 0) -> list[SessionEvent]:
    """A complete valid log; with ``resumes``, the log is cut at a chosen point, repaired, and
    continued by a new ``Session`` seeded with it (as a resume after a crash would)."""
    log = list(LoopScript(choose).run(turns).events)
    for _ in range(resumes):
        cut = choose(len(log) + 1)
        seed = repair(log[:cut])
        script = LoopScript(choose, new_session(seed))
        log = list(script.run(1 + choose(2)).events)
    return log
