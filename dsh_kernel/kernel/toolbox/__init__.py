"""The built-in tools: every tool the kernel gives its agent, and the notebook's choice among them.

Owns one module per tool family — ``python`` (``python`` and ``inspect`` over the notebook's
namespace), ``ask_user``, ``notebook`` (``notebook_read`` and ``notebook_insert``, served by the
kernel's ``NotebookDesk``), ``sql`` (read-only SQL over the store) — and ``toolset`` (which tools a
notebook switched off, and whether they are sent lean). ``builtin_tools`` is the one list of them:
the kernel registers exactly what it returns, in that order. Each tool is built from injected
collaborators (a namespace, a store, a question callback), so it runs and tests without Jupyter.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from dsh_kernel.kernel.toolbox.ask_user import ask_user_tool
from dsh_kernel.kernel.toolbox.python import LiveOutputLookup, inspect_tool, python_tool
from dsh_kernel.kernel.toolbox.sql import sql_tool
from dsh_kernel.runtime.image_reduce import ImageCaps
from dsh_kernel.runtime.runner import CodeRunner
from dsh_kernel.tools.questions import Asker
from dsh_kernel.tools.types import ToolDefinition

if TYPE_CHECKING:
    from dsh_kernel.agent.agent import Agent
    from dsh_kernel.kernel.toolbox.notebook import NotebookDesk
    from dsh_kernel.store.journal import JournalWriter
    from dsh_kernel.store.layout import Store


def builtin_tools(
    agent: Agent,
    *,
    namespace: dict[str, object],
    shell: object | None,
    images: ImageCaps,
    on_interrupt: Callable[[], None],
    ask: Asker,
    desk: NotebookDesk | None,
    store: Store | None,
    live: Callable[[], Sequence[JournalWriter]],
    live_output: LiveOutputLookup | None = None,
) -> list[ToolDefinition]:
    """Every built-in tool for ``agent``, in the order the model sees them.

    ``python`` and ``inspect`` always (``live_output``: where a ``python`` call shows its output
    while it runs); ``ask_user`` always (``ask`` puts the question to the
    person); ``notebook_read``/``notebook_insert`` when the kernel has a ``desk``; ``sql`` when it
    has a ``store`` (``live`` gives the journals not yet in the database).
    """
    tools = [
        python_tool(
            CodeRunner(namespace, shell=shell),
            on_interrupt=on_interrupt,
            images=images,
            live_output=live_output,
        ),
        inspect_tool(namespace),
        ask_user_tool(ask),
    ]
    if desk is not None:
        tools += desk.tools(agent)
    if store is not None:
        tools.append(sql_tool(store, live=live))
    return tools
