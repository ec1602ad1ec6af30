"""A child process for the crash and concurrency tests: an Agent journaling into a store.

``python child_agent.py hang <store>`` — one turn: a tool call, then a model stream that hangs after a
few chunks. Prints ``CHECKPOINT <n>`` (events in the log) at every checkpoint and ``HANGING <session id>``
once stuck, then waits to be killed.

``python child_agent.py compact-hang <store>`` — long answers in a 4,096-token window until a
question whose compaction's summary call hangs: prints ``HANGING <session id>`` once the call is under
way (the ``compaction/start`` durable), then waits to be killed.

``python child_agent.py chat <store> <turns>`` — ``turns`` turns, each a tool call and an answer, with
an ingest after every turn (deferred if another process holds the database); prints ``DONE <session id>
<events>`` at the end.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import AsyncIterator
from pathlib import Path

from dsh_kernel import Agent, tool
from dsh_kernel.agent.hooks import Checkpoint
from dsh_kernel.agent.request.window import ContextWindows
from dsh_kernel.llm.types import GenerateRequest, StreamChunk, TokenUsage
from dsh_kernel.store.ingest.incremental import ingest
from dsh_kernel.store.journal import attach_journal
from dsh_kernel.store.layout import Store
from dsh_kernel.testing import FunctionProvider, text_response, tool_call_response
from dsh_kernel.tools.approval import ApprovalPolicy


@tool(read_only=True)
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


async def hang_mode(store: Store) -> None:
    calls = 0

    async def respond(request: GenerateRequest) -> AsyncIterator[StreamChunk]:
        nonlocal calls
        calls += 1
        if calls == 1:
            for c in tool_call_response("add", {"a": 1, "b": 2}, call_id="c1"):
                yield c
            return
        for c in text_response("I am thinking about it", pieces=4)[:-2]:  # no block-end, no finish
            yield c
        await asyncio.sleep(0.3)  # let the write-behind window pass for some of them
        print(f"HANGING {agent.id}", flush=True)
        await asyncio.get_running_loop().create_future()

    agent = Agent(
        provider=FunctionProvider(respond, id="child"),
        model="m",
        tools=[add],
        approval_policy=ApprovalPolicy("auto"),
    )
    attach_journal(agent, store)

    async def report(cp: Checkpoint) -> None:
        print(f"CHECKPOINT {len(agent.session)} {cp.reason}", flush=True)

    agent.hooks.checkpoint.on(report)  # registered after the writer's: the flush has happened
    agent.followup("add 1 and 2, then think")
    await agent.when_idle()


async def compact_hang_mode(store: Store) -> None:
    async def respond(request: GenerateRequest) -> AsyncIterator[StreamChunk]:
        if request.purpose == "compaction":
            await asyncio.sleep(0.3)  # let the write-behind window pass
            print(f"HANGING {agent.id}", flush=True)
            await asyncio.get_running_loop().create_future()
        for c in text_response("A long answer about the data. " * 200):
            yield c

    agent = Agent(
        provider=FunctionProvider(respond, id="child"),
        model="m",
        context_windows=ContextWindows(configured=4096),
    )
    attach_journal(agent, store)
    for question in ("one?", "two?", "three?", "four?"):
        agent.followup(question)
        await agent.when_idle()


async def chat_mode(store: Store, turns: int) -> None:
    usage = TokenUsage(input_tokens=10, output_tokens=5)
    script = []
    for t in range(turns):
        script.append(tool_call_response("add", {"a": t, "b": 1}, usage=usage))
        script.append(text_response(f"answer {t}", usage=usage, pieces=5))
    replies = iter(script)

    def respond(request: GenerateRequest) -> list[StreamChunk]:
        return next(replies)

    agent = Agent(
        provider=FunctionProvider(respond, id="child"),
        model="m",
        tools=[add],
        approval_policy=ApprovalPolicy("auto"),
    )
    writer = attach_journal(agent, store)
    for t in range(turns):
        agent.followup(f"turn {t} please")
        await agent.when_idle()
        await asyncio.to_thread(ingest, store)
    writer.close()
    print(f"DONE {agent.id} {len(agent.session)}", flush=True)


def main() -> None:
    mode, root = sys.argv[1], Path(sys.argv[2])
    store = Store.at(root)
    if mode == "hang":
        asyncio.run(hang_mode(store))
    elif mode == "compact-hang":
        asyncio.run(compact_hang_mode(store))
    elif mode == "chat":
        asyncio.run(chat_mode(store, int(sys.argv[3])))
    else:
        raise SystemExit(f"unknown mode {mode}")


if __name__ == "__main__":
    main()
