"""The turn model's types, re-exported from ``dsh_kernel.session.turn_model`` (where the turn reader,
below ``store/`` and ``views/``, produces them) under the names the views have always used."""

from dsh_kernel.session.turn_model import (
    SETTLED,
    CardStatus,
    ContextNote,
    NoticeItem,
    ReasoningItem,
    SteerItem,
    TextItem,
    ToolCardModel,
    ToolItem,
    TurnError,
    TurnItem,
    TurnModel,
    TurnState,
    UsageSummary,
)

__all__ = [
    "SETTLED",
    "CardStatus",
    "ContextNote",
    "NoticeItem",
    "ReasoningItem",
    "SteerItem",
    "TextItem",
    "ToolCardModel",
    "ToolItem",
    "TurnError",
    "TurnItem",
    "TurnModel",
    "TurnState",
    "UsageSummary",
]
