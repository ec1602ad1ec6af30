"""Cancellation that carries a cause.

A bare ``asyncio.CancelledError`` says nothing durable about *why* work stopped, so every cancellable
activity gets an ``AbortSignal``. ``AbortController.abort(cause)`` records the cause (the first one
wins) and runs the callbacks registered on the signal — the agent registers one that cancels the
driver task, so awaits stop at once. Code that catches ``CancelledError`` asks the signal whether the
cancellation was ours (``signal.aborted``) and, if so, which cause to log.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal, TypeAlias

from dsh_kernel.errors import DshError
from dsh_kernel.jsonvalue import JsonObject

AbortKind: TypeAlias = Literal["user", "parent", "hook", "disposed"]


@dataclass(frozen=True, slots=True, kw_only=True)
class AbortCause:
    """Why an activity was cancelled. ``reason`` is free text for ``hook`` causes."""

    kind: AbortKind
    reason: str | None = None

    def to_json(self) -> JsonObject:
        out: JsonObject = {"kind": self.kind}
        if self.reason is not None:
            out["reason"] = self.reason
        return out


USER_CANCEL = AbortCause(kind="user")


class AbortedError(DshError):
    """Raised by ``throw_if_aborted``; carries the cause."""

    code = "ABORTED"

    def __init__(self, cause: AbortCause) -> None:
        super().__init__(f"aborted ({cause.kind}{': ' + cause.reason if cause.reason else ''})")
        self.cause = cause


class AbortSignal:
    """Observe-only side of an ``AbortController``."""

    __slots__ = ("_callbacks", "_reason")

    def __init__(self) -> None:
        self._reason: AbortCause | None = None
        self._callbacks: list[Callable[[AbortCause], object]] = []

    @property
    def aborted(self) -> bool:
        return self._reason is not None

    @property
    def reason(self) -> AbortCause | None:
        return self._reason

    def throw_if_aborted(self) -> None:
        if self._reason is not None:
            raise AbortedError(self._reason)

    def add_callback(self, fn: Callable[[AbortCause], object]) -> Callable[[], None]:
        """Run ``fn(cause)`` on abort (at once if already aborted). Returns a disposer."""
        if self._reason is not None:
            fn(self._reason)
            return lambda: None
        self._callbacks.append(fn)

        def dispose() -> None:
            if fn in self._callbacks:
                self._callbacks.remove(fn)

        return dispose

    def _fire(self, cause: AbortCause) -> None:
        if self._reason is not None:
            return
        self._reason = cause
        callbacks, self._callbacks = self._callbacks, []
        for fn in callbacks:
            try:
                fn(cause)
            except Exception:  # a callback's failure must not stop the others
                import logging

                logging.getLogger(__name__).exception("abort callback failed")


class AbortController:
    """Owns one ``AbortSignal`` and is the only way to fire it (``abort(cause)``)."""

    __slots__ = ("signal",)

    def __init__(self) -> None:
        self.signal = AbortSignal()

    def abort(self, cause: AbortCause) -> bool:
        """Abort with ``cause``. Returns False when already aborted (the first cause wins)."""
        if self.signal.aborted:
            return False
        self.signal._fire(cause)  # pyright: ignore[reportPrivateUsage]
        return True


def any_of(*signals: AbortSignal) -> AbortSignal:
    """A signal that aborts when any of ``signals`` does, with that signal's cause."""
    ctl = AbortController()
    for s in signals:
        s.add_callback(ctl.abort)
    return ctl.signal
