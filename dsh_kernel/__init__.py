"""dsh-kernel: a Jupyter kernel that hosts an LLM agent, built on a Python port of the DeepSeek
Harness spine (an append-only session log, a chunk protocol with one block assembler, a durable
inbox, a tool pipeline with approval, retry by policy, crash repair).

Public API::

    from dsh_kernel import Agent, tool
    from dsh_kernel import api_key  # a key the kernel holds, for code of your own
    from dsh_kernel.testing import ScriptedProvider, FunctionProvider, text_response, tool_call_response
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from dsh_kernel.agent.agent import Agent
    from dsh_kernel.llm.keys import api_key
    from dsh_kernel.tools.decorator import tool

__all__ = ["Agent", "__version__", "api_key", "tool"]

__version__ = "0.1.0.dev0"


def __getattr__(name: str) -> object:
    # Lazy, so importing a submodule (e.g. dsh_kernel.llm.types) stays cheap.
    if name == "Agent":
        from dsh_kernel.agent.agent import Agent

        return Agent
    if name == "api_key":
        from dsh_kernel.llm.keys import api_key

        return api_key
    if name == "tool":
        from dsh_kernel.tools.decorator import tool

        return tool
    raise AttributeError(f"module 'dsh_kernel' has no attribute {name!r}")
