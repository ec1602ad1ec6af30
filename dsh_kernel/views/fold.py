"""The turn reader under its views name: ``TurnFold``, ``fold_turn``, ``find_turn``, ``turn_events``
and ``URGENT_TYPES`` are ``dsh_kernel.session.turn``'s (the one reading of a turn, below ``store/``
and ``views/``, that the live view, the static rendering, the footer and the export share)."""

from dsh_kernel.session.turn import URGENT_TYPES, TurnFold, find_turn, fold_turn, turn_events

__all__ = ["URGENT_TYPES", "TurnFold", "find_turn", "fold_turn", "turn_events"]
