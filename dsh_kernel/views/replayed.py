"""What a *replayed* turn draws: the same thing on every run.

A turn is replayed when its model calls were answered from a recording (``%agent replay``): its
requests log the replay provider (``llm.provider.REPLAY_PROVIDER_ID``), so the predicate is a
function of the turn's own events, like everything a view draws. Re-running a replayed notebook
(Run All, ``jupyter nbconvert --execute``) must leave its saved outputs as they were, so a
replayed turn leaves out what measures this run rather than the lesson:

* the footer's times (first token, total) and its session id — a replay starts a new session every
  run — give way to one ``replayed`` marker (``format.footer_parts``);
* tool-card durations are dropped (``as_drawn``): the tools ran for real, on this machine.

Only the drawing changes. The log and the store keep the real times and ids (``turns``,
``tool_calls.duration_ms``, ``usage``), and a live turn is drawn exactly as before.
"""

from __future__ import annotations

from dataclasses import replace

from dsh_kernel.llm.provider import REPLAY_PROVIDER_ID
from dsh_kernel.transcript.model import ToolItem, TurnModel


def replayed(model: TurnModel) -> bool:
    """The turn's requests were answered by the replay provider."""
    return model.provider == REPLAY_PROVIDER_ID


def as_drawn(model: TurnModel) -> TurnModel:
    """The model a view draws: ``model`` itself, or for a replayed turn a copy whose tool cards
    have no duration (the footer's part is ``footer_parts``'s own)."""
    if not replayed(model):
        return model
    items = tuple(
        replace(i, card=replace(i.card, duration_ms=None)) if isinstance(i, ToolItem) else i
        for i in model.items
    )
    return replace(model, items=items)
