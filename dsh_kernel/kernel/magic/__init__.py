"""The ``%agent`` line magic: its words, its subcommands and their lines in ``%agent status``.

``agent`` is the magic itself and its dispatch; ``args`` splits an ``%agent`` line into words;
``compact``, ``context`` and ``vision`` are the subcommands of those settings and their status
lines. A mistyped subcommand or value is a one-line error naming what was wrong and what to type.
"""
