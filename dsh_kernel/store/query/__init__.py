"""Querying the store with SQL: ``%%sql`` cells and the agent's read-only ``sql`` tool's core.

``run`` opens the views for a query and runs it (the Python API behind ``%%sql``); ``readonly``
lets through exactly one read statement or refuses in one line; ``sandbox`` runs a model-written
query in a child process with hard limits on time, memory and output.
"""
