"""A session holding every shape of compaction, appended event by event with ``Session.append``
through a real journal writer (the shape of ISSUE16's log: ``compaction/start`` · [``compaction/prune``
· ``tool/result`` replace]* · ``compaction/summary`` · ``user/message`` replace · ``compaction/end``).

* turns 1-2: a python call with a huge result, answers;
* turn 3: a **pressure** compaction before the step's request — it prunes the huge result, then a
  model summary (reported usage) replaces turns 1-2;
* between turns: a **manual** compaction whose summary call failed (``RATE_LIMIT``, no usage): a
  deterministic reduction replaced the first summary and turn 3's prompt;
* turn 4: the request overflows; the **overflow** compaction is cancelled (failed: nothing
  replaced) and so is the turn;
* turn 5: a pressure compaction starts and the journal ends there (the kernel died mid-compaction):
  the **orphan**; ``resume_after_crash`` continues the session (``session/end-seed``, turn 6), and the
  orphan is then **stale**.

``Recorded.sent`` is what the log itself derives at each agent request (``derive_messages()``: the
message count, and the token meter's estimate) — the oracle for ``requests.message_count``.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from dsh_kernel.ids import CallId, MessageId
from dsh_kernel.jsonvalue import JsonObject
from dsh_kernel.llm.assembler import BlockAssembler
from dsh_kernel.llm.codec import chunk_to_json, message_to_json, usage_to_json
from dsh_kernel.llm.estimate import message_tokens
from dsh_kernel.llm.types import (
    FinishError,
    Message,
    ModelSource,
    PluginSource,
    StreamChunk,
    TextBlock,
    TokenUsage,
    ToolResultBlock,
    ToolSource,
    UserSource,
)
from dsh_kernel.session.derive import project_event
from dsh_kernel.session.events import ReplaceOp, SessionHeader
from dsh_kernel.session.log import Session
from dsh_kernel.store.journal import JournalWriter, attach_journal
from dsh_kernel.store.layout import Store
from dsh_kernel.store.sessions import resume
from dsh_kernel.testing import error_response, text_response, tool_call_response

SID = "00000016-0000-4000-8000-000000000000"
PROVIDER, MODEL = "scripted", "m1"
BIG = "\n".join(f"row {i}: {'x' * 60}" for i in range(400))
PRUNED = BIG[:600] + "\n[… cut …]\n" + BIG[-300:]
SUMMARY_1 = "## Goal\n- look at df\n## Notebook state\n- df: 400 rows"
SUMMARY_2 = (
    "(A deterministic reduction, not a model's summary: the summary call failed — RATE_LIMIT.)"
)
SUMMARY_USAGE = TokenUsage(input_tokens=900, output_tokens=120, cache_read_tokens=800)
HEADER: JsonObject = {
    "config": {"provider": PROVIDER, "model": MODEL},
    "system": "You are a helpful assistant.",
    "tools": [{"name": "python", "description": "Run code.", "parameters": {"type": "object"}}],
}


def usage(inp: int, out: int) -> TokenUsage:
    return TokenUsage(input_tokens=inp, output_tokens=out)


def clock(start: int = 1_767_225_600_000) -> Callable[[], int]:
    return itertools.count(start, 10).__next__


@dataclass
class Recorded:
    """The recorded session, its writer, and what the log derived at each agent request."""

    session: Session
    writer: JournalWriter
    sent: list[tuple[int, int]] = field(default_factory=list[tuple[int, int]])
    seqs: dict[str, int] = field(default_factory=dict[str, int])

    # --- writing one event kind at a time ----------------------------------------------------------

    def user(self, name: str, text: str) -> int:
        msg = Message(
            id=MessageId(f"u-{name}"),
            role="user",
            content=(TextBlock(text=text),),
            source=UserSource(),
        )
        seq = self.session.append("user/message", message_to_json(msg), surface_op="append").seq
        self.seqs[name] = seq
        return seq

    def call(self, name: str, turn: int, step: int, chunks: Sequence[StreamChunk]) -> int | None:
        """One agent request: what the log derives now is what it sends; its chunks, then its
        assistant message (none when it failed)."""
        history = self.session.derive_messages()
        self.sent.append((len(history), sum(message_tokens(m) for m in history)))
        asm = BlockAssembler()
        seqs: list[int] = []
        for c in chunks:
            asm.push(c)
            data = {"turn": turn, "step": step, "chunk": chunk_to_json(c)}
            seqs.append(self.session.append("assistant/chunk", data).seq)
        if isinstance(asm.finish, FinishError):
            return None
        msg = Message(
            id=MessageId(f"a-{name}"),
            role="assistant",
            content=asm.blocks(),
            source=ModelSource(provider=PROVIDER, model=MODEL),
        )
        data: JsonObject = {"turn": turn, "step": step, "message": message_to_json(msg)}
        if asm.usage is not None:
            data["usage"] = usage_to_json(asm.usage)
        seq = self.session.append(
            "assistant/message", data, surface_op="append", source_event_seqs=seqs
        ).seq
        self.seqs[name] = seq
        return seq

    def tool(
        self, name: str, turn: int, step: int, call_id: str, code: str, text: str, tool: str
    ) -> int:
        s = self.session
        args = f'{{"code": "{code}"}}'
        call = s.append(
            "tool/call",
            {"turn": turn, "step": step, "callId": call_id, "name": tool, "arguments": args},
        )
        msg = Message(
            id=MessageId(f"r-{name}"),
            role="user",
            content=(
                ToolResultBlock(tool_call_id=CallId(call_id), content=(TextBlock(text=text),)),
            ),
            source=ToolSource(call_id=CallId(call_id)),
        )
        seq = s.append(
            "tool/result",
            {"turn": turn, "step": step, "message": message_to_json(msg), "durationMs": 5},
            surface_op="append",
            source_event_seqs=[call.seq],
        ).seq
        self.seqs[name] = seq
        return seq

    def tokens(self, seqs: Sequence[int]) -> int:
        events = self.session.events
        return sum(message_tokens(m) for s in seqs if (m := project_event(events[s])) is not None)

    def prune(self, cid: str, name: str, text: str) -> int:
        """``compaction/prune`` and the one-node ``tool/result`` rewrite of result ``name``."""
        s = self.session
        old = s.events[self.seqs[name]]
        message = old.data["message"]
        assert isinstance(message, dict) and isinstance(message["content"], list)
        block = message["content"][0]
        assert isinstance(block, dict)
        cut: JsonObject = {**block, "content": [{"type": "text", "text": text}]}
        data: JsonObject = {**old.data, "message": {**message, "content": [cut]}}
        before = self.tokens([old.seq])
        after = message_tokens(project_event_data(data))
        s.append(
            "compaction/prune",
            {
                "compactionId": cid,
                "shadowedRange": {"start": old.seq, "end": old.seq},
                "shadowedSeqs": [old.seq],
                "shadowedTokenCount": before,
                "prunedTokenCount": after,
            },
        )
        seq = s.append(
            "tool/result",
            data,
            surface_op=ReplaceOp(start=old.seq, end=old.seq),
            source_event_seqs=[old.seq],
        ).seq
        self.seqs[name + "-pruned"] = seq
        return seq

    def summarise(
        self,
        cid: str,
        name: str,
        nodes: Sequence[int],
        summary: str,
        turns: Sequence[int],
        *,
        method: str,
        call: JsonObject,
    ) -> None:
        """``compaction/summary`` and the ``<compacted-summary>`` that replaces ``nodes``."""
        msg = Message(
            id=MessageId(f"s-{name}"),
            role="user",
            content=(
                TextBlock(
                    text="[checkpoint]\n\n<compacted-summary>\n"
                    + summary
                    + "\n</compacted-summary>"
                ),
            ),
            source=PluginSource(
                plugin="dsh/compaction",
                form={"kind": "compacted-summary", "compactionId": cid, "turns": list(turns)},
            ),
        )
        shadowed = self.tokens(nodes)
        data: JsonObject = {
            "compactionId": cid,
            "summary": summary,
            "method": method,
            "shadowedRange": {"start": nodes[0], "end": nodes[-1]},
            "shadowedSeqs": list(nodes),
            "shadowedTokenCount": shadowed,
            "summaryTokenCount": message_tokens(msg),
            "turns": list(turns),
            **call,
        }
        self.seqs[name + "-event"] = self.session.append("compaction/summary", data).seq
        self.seqs[name] = self.session.append(
            "user/message",
            message_to_json(msg),
            surface_op=ReplaceOp(start=nodes[0], end=nodes[-1]),
            source_event_seqs=list(nodes),
        ).seq


def project_event_data(data: JsonObject) -> Message:
    from dsh_kernel.llm.codec import message_from_json

    return message_from_json(data["message"])


def record_compacted_session(store: Store, *, tool: str = "python") -> Recorded:
    """Turns 1-5 as the module docstring says; the writer is closed after turn 5's orphan start
    (the kernel died there). ``tool`` names turn 1's tool."""
    s = Session(header=SessionHeader(id=SID, created_at=1_767_225_600_000), clock=clock())
    r = Recorded(session=s, writer=attach_journal(s, store))
    s.append("request/header", {"header": HEADER, "reason": "initial"})

    def settle() -> None:
        r.writer.flush()

    # turn 1: a python call with a huge result, then the answer
    s.append("turn/start", {"turn": 1})
    s.append("step/start", {"turn": 1, "step": 1})
    r.user("u1", "load the data")
    r.call("a1", 1, 1, tool_call_response(tool, {"code": "df"}, call_id="c1", usage=usage(100, 10)))
    r.tool("r1", 1, 1, "c1", "df", BIG, tool)
    s.append("step/end", {"turn": 1, "step": 1})
    s.append("step/start", {"turn": 1, "step": 2})
    r.call("a1b", 1, 2, text_response("The data has 400 rows.", usage=usage(2000, 12)))
    s.append("step/end", {"turn": 1, "step": 2})
    s.append("turn/end", {"turn": 1, "reason": {"kind": "completed"}})
    settle()

    # turn 2
    s.append("turn/start", {"turn": 2})
    s.append("step/start", {"turn": 2, "step": 1})
    r.user("u2", "summarise it")
    r.call("a2", 2, 1, text_response("It is a table of x.", usage=usage(2100, 9)))
    s.append("step/end", {"turn": 2, "step": 1})
    s.append("turn/end", {"turn": 2, "reason": {"kind": "completed"}})
    settle()

    # turn 3: pressure compaction (a prune, a model summary of turns 1-2), then the request
    s.append("turn/start", {"turn": 3})
    s.append("step/start", {"turn": 3, "step": 1})
    r.user("u3", "now plot it")
    before = sum(message_tokens(m) for m in s.derive_messages())
    s.append(
        "compaction/start",
        {
            "compactionId": "cmp-p",
            "turn": 3,
            "trigger": "pressure",
            "tokens": before,
            "contextWindow": 4096,
        },
    )
    r.prune("cmp-p", "r1", PRUNED)
    nodes = list(s.surface[: s.surface.index(r.seqs["u3"])])
    r.seqs["nodes-p"] = len(nodes)
    r.summarise(
        "cmp-p",
        "s1",
        nodes,
        SUMMARY_1,
        [1, 2],
        method="model",
        call={
            "provider": PROVIDER,
            "model": MODEL,
            "maxTokens": 512,
            "usage": usage_to_json(SUMMARY_USAGE),
        },
    )
    s.append("compaction/end", {"compactionId": "cmp-p", "turn": 3})
    r.call("a3", 3, 1, text_response("Here is the plot.", usage=usage(300, 20)))
    s.append("step/end", {"turn": 3, "step": 1})
    s.append("turn/end", {"turn": 3, "reason": {"kind": "completed"}})
    settle()

    # between turns: %agent compact; the summary call failed, a reduction stood in
    s.append(
        "compaction/start",
        {
            "compactionId": "cmp-m",
            "turn": None,
            "trigger": "manual",
            "tokens": 200,
            "contextWindow": 4096,
        },
    )
    r.summarise(
        "cmp-m",
        "s2",
        [r.seqs["s1"], r.seqs["u3"]],
        SUMMARY_2,
        [1, 2, 3],
        method="reduction",
        call={
            "provider": PROVIDER,
            "model": MODEL,
            "maxTokens": 256,
            "failure": {"code": "RATE_LIMIT", "message": "slow down"},
        },
    )
    s.append("compaction/end", {"compactionId": "cmp-m", "turn": None})
    settle()

    # turn 4: the request overflows; the overflow compaction is cancelled, and the turn with it
    s.append("turn/start", {"turn": 4})
    s.append("step/start", {"turn": 4, "step": 1})
    r.user("u4", "and a table")
    r.call("a4", 4, 1, error_response("CONTEXT_WINDOW_EXCEEDED", "too long", status=400))
    s.append("compaction/start", {"compactionId": "cmp-f", "turn": 4, "trigger": "overflow"})
    s.append(
        "compaction/end",
        {
            "compactionId": "cmp-f",
            "turn": 4,
            "error": {"code": "ABORTED", "message": "the compaction was cancelled"},
        },
    )
    s.append("step/end", {"turn": 4, "step": 1})
    s.append("turn/end", {"turn": 4, "reason": {"kind": "aborted", "reason": {"kind": "user"}}})
    settle()

    # turn 5: a pressure compaction starts, and the kernel dies
    s.append("turn/start", {"turn": 5})
    s.append("step/start", {"turn": 5, "step": 1})
    r.user("u5", "try again")
    r.seqs["orphan"] = s.append(
        "compaction/start", {"compactionId": "cmp-o", "turn": 5, "trigger": "pressure"}
    ).seq
    r.writer.close()
    return r


def resume_after_crash(store: Store, recorded: Recorded) -> Recorded:
    """The session resumed (crash repair committed by then), and turn 6 answered."""
    s = resume(store, SID, clock=clock(1_767_226_000_000))
    r = Recorded(session=s, writer=attach_journal(s, store), sent=recorded.sent, seqs=recorded.seqs)
    s.append("turn/start", {"turn": 6})
    s.append("step/start", {"turn": 6, "step": 1})
    r.user("u6", "hello again")
    r.call("a6", 6, 1, text_response("Hello.", usage=usage(150, 3)))
    s.append("step/end", {"turn": 6, "step": 1})
    s.append("turn/end", {"turn": 6, "reason": {"kind": "completed"}})
    r.writer.close()
    return r
