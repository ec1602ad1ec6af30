"""A session whose agent calls MCP servers' tools, recorded by a real ``Agent``.

The tools are the kernel's own MCP definitions (``dsh_kernel.mcp.tools.tool_definitions``: names,
schema checks, approval, rendering, the ``origin`` the pipeline puts into every result's meta); the
fakes are at the edge only — the scripted provider, and ``ServerDouble``, which stands for a
connected server by answering each ``tools/call`` with the wire JSON a real one sends (or the
``McpCallError`` the client raises). Three servers:

* ``time`` (tools annotated read-only, its entry trusting the hints): ``get_current_time`` answers
  with text and ``structuredContent``; called once more without its required argument, the server's
  schema refuses it before approval (``INVALID_ARGS``); ``convert_time`` answers ``isError``
  (``MCP_TOOL_ERROR``);
* ``my.files`` (a name the providers' rules change: its tools are ``my_files__…_<hash>``):
  ``read_file`` answers with an embedded resource; ``write_file`` is not read-only, asks, and the
  person rejects it (``DENIED``: its result's meta is the origin alone);
* ``db``: ``query`` times out (``MCP_TIMEOUT``, no meta of its own).

Then the kernel's own ``add`` runs, and the model answers.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

from dsh_kernel import Agent
from dsh_kernel.abort import AbortSignal
from dsh_kernel.jsonvalue import JsonObject
from dsh_kernel.mcp.config import ServerEntry
from dsh_kernel.mcp.server import McpCallError
from dsh_kernel.mcp.tools import CallLimits, exposed_name, tool_definitions
from dsh_kernel.runtime.image_reduce import ImageCaps
from dsh_kernel.store.layout import Store
from dsh_kernel.testing import text_response, tool_call_response
from dsh_kernel.tools.approval import ApprovalPolicy, ApprovalRequest
from dsh_kernel.tools.types import ToolDefinition

from .conftest import chat, make_agent, usage

if TYPE_CHECKING:
    from dsh_kernel.mcp.server import McpServer

NOW = "2026-03-01T12:00:00+00:00"
TIME_STRUCTURED: JsonObject = {"timezone": "UTC", "datetime": NOW, "is_dst": False}
CONVERT_STRUCTURED: JsonObject = {"error": "unknown timezone", "given": "Mars/Base"}
NOTES_URI = "file:///project/notes.txt"
READ_FILE = exposed_name("my.files", "read_file")  # my_files__read_file and a short hash
WRITE_FILE = exposed_name("my.files", "write_file")


class ServerDouble:
    """A connected MCP server as ``tool_definitions`` and the definitions' ``execute`` use one:
    its name and entry, its listed tools (wire JSON) and ``call``, answering from ``answers``."""

    def __init__(
        self, name: str, tools: list[JsonObject], answers: dict[str, JsonObject | McpCallError]
    ) -> None:
        self.name = name
        self.entry = ServerEntry(name=name, source="mcp.json", trust="read-only-hints")
        self.tools = tools
        self.answers = answers
        self.calls: list[tuple[str, JsonObject]] = []

    async def call(
        self,
        tool: str,
        arguments: JsonObject,
        *,
        signal: AbortSignal,
        idle_s: float,
        deadline_s: float,
        on_progress: object = None,
    ) -> JsonObject:
        del signal, idle_s, deadline_s, on_progress
        self.calls.append((tool, arguments))
        answer = self.answers[tool]
        if isinstance(answer, McpCallError):
            raise answer
        return answer


def _tool(name: str, properties: JsonObject, *, read_only: bool) -> JsonObject:
    schema: JsonObject = {"type": "object", "properties": properties, "required": list(properties)}
    return {
        "name": name,
        "description": f"The {name} tool.",
        "inputSchema": schema,
        "annotations": {"readOnlyHint": read_only},
    }


def servers() -> tuple[ServerDouble, ...]:
    string: JsonObject = {"type": "string"}
    time = ServerDouble(
        "time",
        [
            _tool("get_current_time", {"timezone": string}, read_only=True),
            _tool("convert_time", {"time": string, "target_timezone": string}, read_only=True),
        ],
        {
            "get_current_time": {
                "content": [{"type": "text", "text": f"It is {NOW} in UTC."}],
                "structuredContent": TIME_STRUCTURED,
                "isError": False,
            },
            "convert_time": {
                "content": [{"type": "text", "text": "unknown timezone: Mars/Base"}],
                "structuredContent": CONVERT_STRUCTURED,
                "isError": True,
            },
        },
    )
    files = ServerDouble(
        "my.files",
        [
            _tool("read_file", {"path": string}, read_only=True),
            _tool("write_file", {"path": string, "text": string}, read_only=False),
        ],
        {
            "read_file": {
                "content": [
                    {
                        "type": "resource",
                        "resource": {
                            "uri": NOTES_URI,
                            "mimeType": "text/plain",
                            "text": "buy milk",
                        },
                    }
                ],
                "isError": False,
            },
            "write_file": {"content": [{"type": "text", "text": "written"}], "isError": False},
        },
    )
    db = ServerDouble(
        "db",
        [_tool("query", {"sql": string}, read_only=True)],
        {
            "query": McpCallError(
                "MCP server 'db' sent nothing for 120 s (no result, no progress); the call was "
                "cancelled",
                code="MCP_TIMEOUT",
            )
        },
    )
    return time, files, db


def definitions(doubles: tuple[ServerDouble, ...]) -> list[ToolDefinition]:
    """The agent's tools for ``doubles``, as the kernel makes them."""
    out: list[ToolDefinition] = []
    for double in doubles:
        out += tool_definitions(
            cast("McpServer", double),
            images=ImageCaps(),
            limits=CallLimits(),
            read_only_allowed=True,
        )
    return out


async def record_mcp_session(store: Store) -> tuple[Agent, tuple[ServerDouble, ...]]:
    """The session of the module docstring, its journal closed; the agent and the servers."""
    doubles = servers()

    async def answer(rid: object, request: ApprovalRequest) -> object:
        del rid, request
        return "rejected"

    agent, provider, writer = make_agent(
        store,
        [
            tool_call_response(
                "time__get_current_time", {"timezone": "UTC"}, call_id="m-time", usage=usage()
            ),
            tool_call_response("time__get_current_time", {}, call_id="m-bad", usage=usage()),
            tool_call_response(
                "time__convert_time",
                {"time": "12:00", "target_timezone": "Mars/Base"},
                call_id="m-convert",
                usage=usage(),
            ),
            tool_call_response(READ_FILE, {"path": "notes.txt"}, call_id="m-read", usage=usage()),
            tool_call_response(
                WRITE_FILE,
                {"path": "notes.txt", "text": "sell milk"},
                call_id="m-write",
                usage=usage(),
            ),
            tool_call_response("db__query", {"sql": "SELECT 1"}, call_id="m-query", usage=usage()),
            tool_call_response("add", {"a": 1, "b": 2}, call_id="c-own", usage=usage()),
            text_response("It is noon in UTC; the file says to buy milk.", usage=usage()),
        ],
        answerer=answer,
        extra_tools=definitions(doubles),
        approval=ApprovalPolicy("ask"),
    )
    await chat(agent, "What time is it, and what is in my notes?")
    provider.assert_consumed()
    writer.close()
    return agent, doubles
