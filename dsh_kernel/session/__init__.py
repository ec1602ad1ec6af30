"""The append-only session log, what is derived from it, its repair, invariants and codec."""
