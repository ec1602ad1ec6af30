"""``WidgetAnswerer``: the approval answerer behind the tool cards' Allow / Deny / Always allow.

``ApprovalService`` asks ``await answerer(request_id, request)``; the service has already logged
``approval/asked`` with that id and the call id, so the turn view shows the buttons on the call's
card. A click reaches ``ViewControls.on_approval(approval_id, outcome)``, which the kernel wires to
``resolve(approval_id, outcome)``; that completes the waiting future and the service logs
``approval/decided``.

``available`` (optional) is asked first: when it says no frontend shows the view (the turn view's
``rendered`` is still false, e.g. headless under nbclient), the answerer returns ``unavailable`` at
once instead of waiting for the service's timeout — the service fails closed either way. Cancelling
the wait (abort, timeout) forgets the request; a late click then resolves nothing.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Final

from dsh_kernel.ids import ApprovalRequestId
from dsh_kernel.tools.approval import ApprovalOutcome, ApprovalRequest

ANSWERS: Final[frozenset[str]] = frozenset({"allowed-once", "allowed-always", "rejected"})


class WidgetAnswerer:
    """An approval answerer whose answers come from the cards' buttons (module docstring)."""

    def __init__(self, *, available: Callable[[], bool] | None = None) -> None:
        self._available = available
        self._pending: dict[str, asyncio.Future[ApprovalOutcome]] = {}
        self.requests: dict[str, ApprovalRequest] = {}
        """The open requests by id (for a kernel that wants to show or list them)."""

    @property
    def pending(self) -> tuple[str, ...]:
        return tuple(self._pending)

    async def __call__(
        self, request_id: ApprovalRequestId, request: ApprovalRequest
    ) -> ApprovalOutcome:
        if self._available is not None and not self._available():
            return "unavailable"
        fut: asyncio.Future[ApprovalOutcome] = asyncio.get_running_loop().create_future()
        self._pending[request_id] = fut
        self.requests[request_id] = request
        try:
            return await fut
        finally:
            self._pending.pop(request_id, None)
            self.requests.pop(request_id, None)

    def resolve(self, approval_id: str, outcome: str) -> bool:
        """Answer request ``approval_id``. ``False`` when nothing waits for it (already answered,
        cancelled, unknown) or ``outcome`` is not an answer a person can give."""
        fut = self._pending.get(approval_id)
        if fut is None or fut.done():
            return False
        match outcome:
            case "allowed-once" | "allowed-always" | "rejected":
                fut.set_result(outcome)
                return True
            case _:
                return False
