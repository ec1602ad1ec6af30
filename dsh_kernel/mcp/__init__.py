"""MCP: the tools of any Model Context Protocol server, offered to the agent like our own.

``config`` finds and reads ``mcp.json`` files; ``server`` keeps one server connected (the official
SDK, ``pip install 'dsh-kernel[mcp]'``); ``tools`` turns its tools into ``ToolDefinition``s;
``servers`` is the kernel's set of them and ``%agent mcp``. docs/mcp.md is the user's guide.
Nothing here imports the SDK at import time: a kernel with no MCP configuration never loads it.
"""
