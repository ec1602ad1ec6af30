"""dsh-kernel: a Jupyter kernel that hosts an LLM agent, built on a Python port of the DeepSeek
Harness spine (an append-only session log, a chunk protocol with one block assembler, a durable
inbox, a tool pipeline with approval, retry by policy, crash repair).

The public API is what this package exports (``__all__``, pinned by ``tests/unit/test_public_api.py``),
with the public fakes of ``dsh_kernel.testing`` and the store's API in ``dsh_kernel.store``; every
other module is internal and may move::

    from dsh_kernel import Agent, ApprovalPolicy, tool
    from dsh_kernel import config_from_env, make_provider  # a real provider, from DSH_* variables
    from dsh_kernel import api_key  # a key the kernel holds, for code of your own
    from dsh_kernel.testing import ScriptedProvider, FunctionProvider, text_response, tool_call_response

The exports load on first use, so importing one submodule (``dsh_kernel.llm.types``, the CLI's
``export``) does not import the agent, the providers and their HTTP client.
"""

# No other public name is bound here (no ``from __future__``, private module aliases): the names of
# this namespace are the public API, as the test pinning ``__all__`` reads them.
import importlib as _importlib
import typing as _typing

if _typing.TYPE_CHECKING:
    from dsh_kernel.agent.agent import Agent
    from dsh_kernel.llm.config import config_from_env, make_provider
    from dsh_kernel.llm.keys import api_key
    from dsh_kernel.session.events import SessionEvent
    from dsh_kernel.session.log import Session
    from dsh_kernel.tools.approval import ApprovalPolicy
    from dsh_kernel.tools.decorator import tool
    from dsh_kernel.tools.types import ToolDefinition

__all__ = [
    "Agent",
    "ApprovalPolicy",
    "Session",
    "SessionEvent",
    "ToolDefinition",
    "__version__",
    "api_key",
    "config_from_env",
    "make_provider",
    "tool",
]

__version__ = "0.1.0.dev0"

_HOMES: dict[str, str] = {
    "Agent": "dsh_kernel.agent.agent",
    "ApprovalPolicy": "dsh_kernel.tools.approval",
    "Session": "dsh_kernel.session.log",
    "SessionEvent": "dsh_kernel.session.events",
    "ToolDefinition": "dsh_kernel.tools.types",
    "api_key": "dsh_kernel.llm.keys",
    "config_from_env": "dsh_kernel.llm.config",
    "make_provider": "dsh_kernel.llm.config",
    "tool": "dsh_kernel.tools.decorator",
}
"""Where each export lives: imported from there on first use."""


def __getattr__(name: str) -> object:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'dsh_kernel' has no attribute {name!r}")
    value: object = getattr(_importlib.import_module(home), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
