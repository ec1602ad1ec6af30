"""Reading a turn: the log's events as what a person sees — the one reading every consumer shares.

``turn`` folds one turn's events into a ``TurnModel`` (``model``: frozen data — the answer, the
reasoning, one card per tool call, the footer's numbers); ``compaction_notes`` says in one line
what a compaction inside the turn did; ``markdown`` writes a whole session as a Markdown
transcript. The live view, the static rendering, ``%agent replay`` and the exports all read turns
here, so they never disagree. Pure functions of the events: no store, no widgets.
"""
