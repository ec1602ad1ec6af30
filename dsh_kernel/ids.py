"""Branded identifiers.

Every id that crosses a module boundary is a ``NewType`` over ``str``: structurally a string (JSON,
logging and comparison behave as usual) but not interchangeable at type-check time. Construction goes
through the ``new_*`` factories so a fresh id is always a UUID4 (or, for calls, whatever the model
sent).
"""

from __future__ import annotations

import uuid
from typing import NewType

SessionId = NewType("SessionId", str)
MessageId = NewType("MessageId", str)
CallId = NewType("CallId", str)
ProviderRequestId = NewType("ProviderRequestId", str)
ApprovalRequestId = NewType("ApprovalRequestId", str)
CommandId = NewType("CommandId", str)
RetryId = NewType("RetryId", str)


def new_session_id() -> SessionId:
    """A fresh random (UUID4) session id."""
    return SessionId(str(uuid.uuid4()))


def new_message_id() -> MessageId:
    """A fresh random (UUID4) message id."""
    return MessageId(str(uuid.uuid4()))


def new_approval_id() -> ApprovalRequestId:
    """A fresh random (UUID4) approval request id."""
    return ApprovalRequestId(str(uuid.uuid4()))


def new_command_id() -> CommandId:
    """A fresh random (UUID4) command id."""
    return CommandId(str(uuid.uuid4()))


def new_retry_id() -> RetryId:
    """A fresh random (UUID4) retry id."""
    return RetryId(str(uuid.uuid4()))
