"""The session capsule: a chat turn's events in its cell's saved output (issue 34)."""

CAPSULE_KEY = "application/vnd.dsh.capsule+json"
