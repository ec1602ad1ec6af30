"""Real MCP servers the tests talk to, cached outside the repository (``reference.py``)."""
