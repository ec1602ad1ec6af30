"""An MCP server's tools as our ``ToolDefinition``s: named, checked, approved and rendered like ours.

``tool_definitions(server, listed, …)`` makes one definition per tool the server listed (wire JSON,
``mcp.server.McpServer.tools``):

* **Name** ``<server>__<tool>`` with every character outside ``[A-Za-z0-9_-]`` made ``_``, cut to the
  providers' 64 characters with a short hash of the full name when longer (``exposed_name``); the
  ``origin`` (``{"mcp": server, "tool": tool}``) goes onto the call's ``tool/call`` event and into
  every result's meta, so the store names the server of every call, from its start (``mcp_calls``).
* **Description** marked as the server's (``[MCP server time] …``) and cut to ``MAX_DESCRIPTION``
  characters: it is text from outside, shown through the safe renderer like every card.
* **Parameters**: the server's input schema turned into our checked subset when it fits
  (``tools.schema.from_json_schema``: validation keywords become hints); when it does not, the model
  is offered an object whose description carries the schema. Either way ``check_args`` validates the
  call against the server's *full* schema (``jsonschema``) before approval, so a call that cannot
  run is never shown for approval.
* **Approval**: every tool asks, unless the server's entry trusts read-only hints and the tool is
  annotated ``readOnlyHint: true`` and not ``destructiveHint: true`` (``read_only``). Under the
  course policy ``explain`` only servers the course names as trusted (``c.DshKernel.mcp_trusted``)
  may have read-only tools; the rest of MCP is not offered there (``mcp.servers``). What an
  "Always allow" was given to is the tool's ``fingerprint``.
* **Results** (``render``): text as text; images through the image path the ``python`` tool uses
  (reduced, described for a model that takes none); an embedded resource as its URI and media type
  with its text cut to ``MAX_RESOURCE_TEXT``; a resource link as its URI; audio named, not sent.
  Structured content is kept in the result's ``meta`` (``structuredContent``, up to
  ``MAX_STRUCTURED_BYTES`` of JSON) and shown as JSON text only when the server sent no text. A result
  the server flags ``isError`` fails the call (``MCP_TOOL_ERROR``) with its text.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from dsh_kernel.errors import ToolArgsError, ToolSchemaError
from dsh_kernel.jsonvalue import JsonObject, JsonValue
from dsh_kernel.llm.types import ContentBlock, TextBlock
from dsh_kernel.mcp.server import McpCallError
from dsh_kernel.runtime.image_blocks import output_image_blocks
from dsh_kernel.runtime.image_reduce import ImageCaps
from dsh_kernel.tools.schema import from_json_schema
from dsh_kernel.tools.types import ToolContext, ToolDefinition

if TYPE_CHECKING:
    from dsh_kernel.mcp.server import McpServer

MAX_NAME: Final = 64
MAX_DESCRIPTION: Final = 2_000
MAX_RESOURCE_TEXT: Final = 4_000
MAX_STRUCTURED_BYTES: Final = 32_000
SEPARATOR: Final = "__"


@dataclass(frozen=True, slots=True, kw_only=True)
class CallLimits:
    """How long a call may take: ``idle_s`` without a message from the server, ``deadline_s`` in
    all (``mcp.server.McpServer.call``)."""

    idle_s: float = 120.0
    deadline_s: float = 3600.0


def exposed_name(server: str, tool: str) -> str:
    """``server__tool`` within the providers' name rules (module docstring)."""
    raw = f"{server}{SEPARATOR}{tool}"
    name = re.sub(r"[^A-Za-z0-9_-]", "_", raw)
    if name == raw and len(name) <= MAX_NAME:
        return name
    # changed or cut: a short hash of the full name keeps two such names apart
    digest = hashlib.sha256(raw.encode()).hexdigest()[:6]
    return f"{name[: MAX_NAME - 7]}_{digest}"


def fingerprint(defn: ToolDefinition, program: str) -> str:
    """What an "Always allow" was given to: the tool's name, description, parameters and
    read-only-ness, and the program behind it (``program``: the entry's command or URL). Any
    change asks again."""
    body = json.dumps(
        {
            "name": defn.name,
            "origin": defn.origin,
            "description": defn.description,
            "parameters": defn.parameters,
            "readOnly": defn.read_only,
            "program": program,
        },
        sort_keys=True,
        separators=(",", ":"),
    )
    return hashlib.sha256(body.encode()).hexdigest()[:16]


def tool_definitions(
    server: McpServer,
    *,
    images: ImageCaps,
    limits: CallLimits,
    read_only_allowed: bool,
) -> list[ToolDefinition]:
    """The definitions of ``server``'s listed tools (module docstring). ``read_only_allowed``: may
    a ``readOnlyHint`` make a tool read-only here (the entry's trust and the policy in force)."""
    out: list[ToolDefinition] = []
    taken: set[str] = set()
    for tool in server.tools:
        original = tool.get("name")
        if not isinstance(original, str) or not original:
            continue
        name = exposed_name(server.name, original)
        if name in taken:
            name = exposed_name(server.name, f"{original}#{len(taken)}")
        taken.add(name)
        out.append(
            _definition(
                server,
                tool,
                original,
                name,
                images=images,
                limits=limits,
                read_only=read_only_allowed and _read_only_hint(tool),
            )
        )
    return out


def _read_only_hint(tool: JsonObject) -> bool:
    """Annotated read-only, and not also destructive (a contradiction is not read-only)."""
    annotations = tool.get("annotations")
    return (
        isinstance(annotations, dict)
        and annotations.get("readOnlyHint") is True
        and annotations.get("destructiveHint") is not True
    )


def _definition(
    server: McpServer,
    tool: JsonObject,
    original: str,
    name: str,
    *,
    images: ImageCaps,
    limits: CallLimits,
    read_only: bool,
) -> ToolDefinition:
    given = tool.get("inputSchema")
    schema: JsonObject = given if isinstance(given, dict) else {"type": "object"}
    text = tool.get("description")
    description = text.strip() if isinstance(text, str) else ""
    marker = f"[MCP server {server.name}]"
    description = _cut(f"{marker} {description}".strip(), MAX_DESCRIPTION)
    parameters = _parameters(schema)
    origin: JsonObject = {"mcp": server.name, "tool": original}
    idle = server.entry.timeout_s or limits.idle_s

    async def execute(args: JsonObject, ctx: ToolContext) -> JsonValue:
        result = await server.call(
            original, args, signal=ctx.signal, idle_s=idle, deadline_s=limits.deadline_s
        )
        if result.get("isError") is True:
            error = McpCallError(
                _text_of(result) or f"the MCP tool {original!r} reported an error",
                code="MCP_TOOL_ERROR",
            )
            error.meta = result_meta(result)
            raise error
        return result

    def render(args: JsonObject, value: JsonValue) -> tuple[ContentBlock, ...]:
        del args
        return render_result(value if isinstance(value, dict) else {}, images)

    return ToolDefinition(
        name=name,
        description=description,
        parameters=parameters,
        execute=execute,
        render=render,
        presentation_meta=lambda _args, value: result_meta(
            value if isinstance(value, dict) else {}
        ),
        check_args=_checker(schema, name),
        read_only=read_only,
        lean_description=_cut(f"{marker} {_first_sentence(description[len(marker) :])}", 300),
        origin=origin,
    )


def _parameters(schema: JsonObject) -> JsonObject:
    if schema.get("type") == "object":
        try:
            converted = from_json_schema(schema)
        except (ToolSchemaError, AssertionError, TypeError, ValueError, KeyError, RecursionError):
            converted = None  # outside our subset: the model reads the schema, the check is full
        if converted is not None and converted.get("type") == "object":
            if "additionalProperties" not in json.dumps(schema):
                _allow_extra(converted)  # the server accepts what JSON Schema does by default
            return converted
    shown = _cut(json.dumps(schema, separators=(",", ":"), ensure_ascii=False), 3_000)
    return {
        "type": "object",
        "description": f"The arguments, as this JSON Schema says: {shown}",
    }


def _allow_extra(node: JsonValue) -> None:
    """Drop the ``additionalProperties: false`` our subset's conversion adds where the server's
    schema said nothing: the model may send what the server takes (the full check still runs)."""
    if isinstance(node, dict):
        if node.get("additionalProperties") is False:
            del node["additionalProperties"]
        for value in node.values():
            _allow_extra(value)
    elif isinstance(node, list):
        for value in node:
            _allow_extra(value)


def _checker(schema: JsonObject, name: str) -> Callable[[JsonObject], object] | None:
    try:
        from jsonschema import validators
    except ImportError:  # pragma: no cover - the SDK brings it
        return None
    try:
        cls: Any = validators.validator_for(schema)
        cls.check_schema(schema)
        validator: Any = cls(schema)
        list(validator.iter_errors({}))  # a schema that refers to itself in a loop fails here
    except (Exception, RecursionError):
        return None

    def check(args: JsonObject) -> None:
        errors: list[Any] = sorted(validator.iter_errors(args), key=lambda e: list(e.path))
        if errors:
            parts: list[str] = []
            for e in errors[:3]:
                path: list[Any] = list(e.path)
                where = "$" + "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in path)
                parts.append(f"{where}: {_cut(str(e.message), 200)}")
            more = f" (and {len(errors) - 3} more)" if len(errors) > 3 else ""
            raise ToolArgsError(
                f"arguments do not match the input schema of '{name}': " + "; ".join(parts) + more
            )

    return check


def render_result(result: JsonObject, images: ImageCaps) -> tuple[ContentBlock, ...]:
    """The content the model gets for a ``CallToolResult`` (wire JSON; module docstring)."""
    lines: list[str] = []
    outputs: list[JsonObject] = []
    content = result.get("content")
    for item in content if isinstance(content, list) else []:
        if not isinstance(item, dict):
            continue
        kind = item.get("type")
        if kind == "text":
            text = item.get("text")
            if isinstance(text, str):
                lines.append(text)
        elif kind == "image":
            mime, data = item.get("mimeType"), item.get("data")
            if isinstance(mime, str) and isinstance(data, str):
                outputs.append(
                    {"output_type": "display_data", "data": {mime: data}, "metadata": {}}
                )
        elif kind == "resource":
            lines.append(_resource_text(item.get("resource")))
        elif kind == "resource_link":
            uri, label = item.get("uri"), item.get("name")
            lines.append(f"[resource link: {label or ''} {uri}]".replace("  ", " "))
        elif kind == "audio":
            lines.append(f"[audio ({item.get('mimeType')}) not sent: audio is not supported]")
        else:
            lines.append(f"[content of type {str(kind)[:40]!r} not shown]")
    structured = result.get("structuredContent")
    if not lines and structured is not None:
        lines.append(json.dumps(structured, ensure_ascii=False, separators=(",", ":")))
    blocks, notes = output_image_blocks(outputs, images)
    text = "\n".join((*lines, *notes))
    if not text and not blocks:
        text = "(the tool returned no content)"
    head: tuple[ContentBlock, ...] = (TextBlock(text=text),) if text else ()
    return (*head, *blocks)


def _resource_text(resource: JsonValue) -> str:
    if not isinstance(resource, dict):
        return "[an embedded resource without contents]"
    uri, mime = resource.get("uri"), resource.get("mimeType")
    kind = f" ({mime})" if isinstance(mime, str) else ""
    text = resource.get("text")
    if isinstance(text, str):
        return f"[resource {uri}{kind}]\n{_cut(text, MAX_RESOURCE_TEXT)}"
    blob = resource.get("blob")
    size = len(blob) * 3 // 4 if isinstance(blob, str) else 0
    return f"[resource {uri}{kind}: {size:,} bytes of binary data, not shown]"


def result_meta(result: JsonObject) -> JsonObject:
    """What the result's card and the store keep beyond the content (module docstring)."""
    meta: JsonObject = {}
    structured = result.get("structuredContent")
    if structured is not None:
        body = json.dumps(structured, ensure_ascii=False, separators=(",", ":"))
        if len(body.encode()) <= MAX_STRUCTURED_BYTES:
            meta["structuredContent"] = structured
        else:
            meta["structuredContentOmitted"] = f"{len(body.encode()):,} bytes of JSON"
    uris: list[JsonValue] = []
    content = result.get("content")
    for item in content if isinstance(content, list) else []:
        if isinstance(item, dict):
            resource = item.get("resource")
            uri = resource.get("uri") if isinstance(resource, dict) else item.get("uri")
            if isinstance(uri, str):
                uris.append(uri)
    if uris:
        meta["resources"] = uris
    return meta


def _text_of(result: JsonObject) -> str:
    content = result.get("content")
    parts = [
        str(item.get("text"))
        for item in (content if isinstance(content, list) else [])
        if isinstance(item, dict) and item.get("type") == "text"
    ]
    return _cut("\n".join(parts).strip(), 4_000)


def _first_sentence(text: str) -> str:
    text = text.strip()
    match = re.search(r"[.!?](\s|$)", text)
    return text[: match.start() + 1] if match else text


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"
