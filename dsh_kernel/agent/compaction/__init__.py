"""Compaction: older turns of a session become one summary, so a long session fits its window.

``run`` owns when a compaction happens (automatic before a request that would not fit, or asked
for by ``%agent compact``) and what it appends to the log; ``range`` chooses which messages a
compaction replaces and builds the messages that stand for them; ``summary`` writes the summary
(a model call, checked, else the deterministic reduction). A compaction never erases the log: it
appends a replacement over a range, and the request is rebuilt from the log as always.
"""
