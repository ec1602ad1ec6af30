"""WidgetAnswerer: the bridge from the approval service to the cards' buttons."""

from __future__ import annotations

import asyncio

from dsh_kernel.abort import AbortCause, AbortController
from dsh_kernel.ids import ApprovalRequestId
from dsh_kernel.tools.approval import ApprovalRecorder, ApprovalRequest, ApprovalService
from dsh_kernel.views import WidgetAnswerer

REQUEST = ApprovalRequest(tool_name="python", arguments='{"code": "1"}')


async def test_resolve_answers_the_waiting_request_once() -> None:
    answerer = WidgetAnswerer()
    task = asyncio.ensure_future(answerer(ApprovalRequestId("a1"), REQUEST))
    await asyncio.sleep(0)
    assert answerer.pending == ("a1",) and answerer.requests["a1"] == REQUEST
    assert not answerer.resolve("a1", "maybe")  # not an answer a person can give
    assert not answerer.resolve("a2", "rejected")  # nothing waits for it
    assert answerer.resolve("a1", "allowed-always")
    assert not answerer.resolve("a1", "rejected")  # already answered
    assert await task == "allowed-always"
    assert answerer.pending == () and answerer.requests == {}


async def test_through_the_service_a_click_grants_and_an_abort_forgets() -> None:
    answerer = WidgetAnswerer()
    asked: list[str] = []
    service = ApprovalService(
        answerer, ApprovalRecorder(on_asked=lambda rid, req: asked.append(rid))
    )
    ctl = AbortController()
    task = asyncio.ensure_future(service.request(REQUEST, ctl.signal))
    await asyncio.sleep(0.01)
    assert answerer.pending == tuple(asked)
    answerer.resolve(asked[0], "allowed-once")
    assert await task == "allowed-once"

    ctl2 = AbortController()
    task2 = asyncio.ensure_future(service.request(REQUEST, ctl2.signal))
    await asyncio.sleep(0.01)
    (rid,) = answerer.pending
    ctl2.abort(AbortCause(kind="user"))
    assert await task2 == "cancelled"
    assert answerer.pending == ()
    assert not answerer.resolve(rid, "allowed-once")  # a late click resolves nothing


async def test_no_frontend_fails_at_once() -> None:
    shown = False
    answerer = WidgetAnswerer(available=lambda: shown)
    service = ApprovalService(answerer, timeout_s=30)
    loop = asyncio.get_running_loop()
    start = loop.time()
    assert await service.request(REQUEST, AbortController().signal) == "unavailable"
    assert loop.time() - start < 1.0  # not the 30 s timeout
    assert answerer.pending == ()
