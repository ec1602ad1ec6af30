"""``sigint_calls``: SIGINT calls the callback while the block runs, then the previous handler is
back — whichever it was, not a fixed default."""

from __future__ import annotations

import asyncio
import os
import signal
from types import FrameType

from dsh_kernel.kernel.interrupts import sigint_calls


def test_sigint_calls_the_callback_then_restores_the_previous_handler() -> None:
    seen: list[str] = []

    def mine(signum: int, frame: FrameType | None) -> None:
        seen.append("previous handler")

    async def main() -> None:
        calls: list[str] = []
        with sigint_calls(lambda: calls.append("callback")):
            os.kill(os.getpid(), signal.SIGINT)
            for _ in range(100):
                if calls:
                    break
                await asyncio.sleep(0.01)
        assert calls == ["callback"]

    before = signal.signal(signal.SIGINT, mine)
    try:
        asyncio.run(main())
        assert signal.getsignal(signal.SIGINT) is mine
        os.kill(os.getpid(), signal.SIGINT)
        assert seen == ["previous handler"]
    finally:
        signal.signal(signal.SIGINT, before)
