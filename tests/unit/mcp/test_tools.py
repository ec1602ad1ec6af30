"""``mcp.tools``: an MCP server's listed tools as our ``ToolDefinition``s — their names within the
providers' rules, their schemas checked in full, their approval and the content their results give
the model. The server is a real ``McpServer`` that is never started: its listing is set by hand."""

from __future__ import annotations

import base64
import json
import re
from pathlib import Path

import pytest

from dsh_kernel.errors import ToolArgsError
from dsh_kernel.jsonvalue import JsonObject, JsonValue
from dsh_kernel.llm.types import ImageBlock, TextBlock
from dsh_kernel.mcp.config import ServerEntry, Trust
from dsh_kernel.mcp.server import McpServer
from dsh_kernel.mcp.tools import (
    MAX_DESCRIPTION,
    MAX_NAME,
    MAX_RESOURCE_TEXT,
    MAX_STRUCTURED_BYTES,
    CallLimits,
    exposed_name,
    fingerprint,
    render_result,
    result_meta,
    tool_definitions,
)
from dsh_kernel.runtime.image_blocks import output_image_blocks
from dsh_kernel.runtime.image_reduce import ImageCaps
from dsh_kernel.tools.schema import validate
from dsh_kernel.tools.types import TOOL_NAME_PATTERN, ToolDefinition
from tests.unit.runtime.images import make_png

CAPS = ImageCaps()
PNG_B64 = base64.b64encode(make_png(4, 3)).decode()


def server(
    *tools: JsonObject, name: str = "time", trust: Trust = "ask", path: Path = Path("/nonexistent")
) -> McpServer:
    entry = ServerEntry(name=name, source="test", command="x", trust=trust)
    s = McpServer(entry, log_dir=path)
    s.tools = tools
    return s


def definitions(s: McpServer, *, read_only_allowed: bool = False) -> list[ToolDefinition]:
    return tool_definitions(
        s, images=CAPS, limits=CallLimits(), read_only_allowed=read_only_allowed
    )


def one(tool: JsonObject, **kwargs: bool) -> ToolDefinition:
    (defn,) = definitions(server(tool), **kwargs)
    return defn


def text_of(blocks: tuple[object, ...]) -> str:
    return "\n".join(b.text for b in blocks if isinstance(b, TextBlock))


# -- names ----------------------------------------------------------------------------------------


def test_a_plain_name_is_server_and_tool() -> None:
    assert exposed_name("time", "get_current_time") == "time__get_current_time"
    assert exposed_name("git-2", "git_log") == "git-2__git_log"


def test_characters_outside_the_providers_set_are_replaced() -> None:
    name = exposed_name("my.srv", "get time/now")
    assert name.startswith("my_srv__get_time_now_")
    assert TOOL_NAME_PATTERN.match(name)
    # the hash keeps apart two tools whose names differ only in replaced characters
    assert exposed_name("s", "a.b") != exposed_name("s", "a_b") == "s__a_b"


def test_a_long_name_is_cut_with_a_hash() -> None:
    long_a = "summarise_" + "x" * 80 + "_a"
    long_b = "summarise_" + "x" * 80 + "_b"
    a, b = exposed_name("server", long_a), exposed_name("server", long_b)
    assert len(a) == MAX_NAME and len(b) == MAX_NAME
    assert a != b
    assert a.startswith("server__summarise_x") and TOOL_NAME_PATTERN.match(a)
    assert exposed_name("server", long_a) == a  # stable


def test_every_plain_name_is_within_64_characters() -> None:
    for length in range(1, 120):
        name = exposed_name("srv", "t" * length)
        assert len(name) <= MAX_NAME and TOOL_NAME_PATTERN.match(name), name


def test_every_replaced_name_is_within_64_characters() -> None:
    for length in range(1, 120):
        for tool in ("t." + "t" * length, "t" * length + " "):
            name = exposed_name("srv", tool)
            assert len(name) <= MAX_NAME and TOOL_NAME_PATTERN.match(name), name


def test_listed_names_are_unique_and_definitions_are_valid() -> None:
    s = server({"name": "a.b"}, {"name": "a_b"}, {"name": "a_b"}, {"name": ""}, {"nameless": 1})
    names = [d.name for d in definitions(s)]
    assert len(names) == 3 == len(set(names))
    assert all(TOOL_NAME_PATTERN.match(n) for n in names)


# -- descriptions and origin ---------------------------------------------------------------------


def test_the_description_is_marked_as_the_servers() -> None:
    defn = one({"name": "now", "description": "  Get the time. In any zone.  "})
    assert defn.description == "[MCP server time] Get the time. In any zone."
    assert defn.lean_description == "[MCP server time] Get the time."
    assert defn.origin == {"mcp": "time", "tool": "now"}


def test_a_tool_without_a_description_is_still_marked() -> None:
    assert one({"name": "now"}).description == "[MCP server time]"


def test_a_long_description_is_capped() -> None:
    defn = one({"name": "now", "description": "word " * 2_000})
    assert len(defn.description) == MAX_DESCRIPTION
    assert defn.description.startswith("[MCP server time] word") and defn.description.endswith("…")


# -- schemas --------------------------------------------------------------------------------------

SCHEMA: JsonObject = {
    "type": "object",
    "properties": {
        "count": {"type": "integer", "minimum": 1, "maximum": 10},
        "branch": {"type": "string", "pattern": "^[a-z]+$"},
        "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 2},
    },
    "required": ["count"],
}


def test_validation_keywords_are_hints_in_our_subset() -> None:
    defn = one({"name": "log", "inputSchema": SCHEMA})
    properties = defn.parameters["properties"]
    assert isinstance(properties, dict)
    count = properties["count"]
    assert isinstance(count, dict) and count["type"] == "integer"
    assert "minimum: 1" in str(count["description"])
    # our subset alone would accept what the server's schema refuses
    assert validate(defn.parameters, {"count": 0, "branch": "Main!"}) == []


@pytest.mark.parametrize(
    ("args", "where", "said"),
    [
        ({"count": 0}, "$.count", "less than the minimum of 1"),
        ({"count": 11}, "$.count", "greater than the maximum of 10"),
        ({"count": 2, "branch": "Main!"}, "$.branch", "does not match"),
        ({"count": 2, "tags": ["a", "b", "c"]}, "$.tags", "is too long"),
        ({}, "$", "'count' is a required property"),
    ],
)
def test_check_args_validates_against_the_full_schema(
    args: JsonObject, where: str, said: str
) -> None:
    defn = one({"name": "log", "inputSchema": SCHEMA})
    assert defn.check_args is not None
    with pytest.raises(ToolArgsError) as caught:
        defn.check_args(args)
    assert caught.value.code == "INVALID_ARGS"
    message = caught.value.message
    assert "input schema of 'time__log'" in message
    assert f"{where}: " in message and said in message


def test_check_args_accepts_what_the_schema_accepts() -> None:
    defn = one({"name": "log", "inputSchema": SCHEMA})
    assert defn.check_args is not None
    defn.check_args({"count": 3, "branch": "main", "tags": ["x"]})


def test_check_args_lists_three_errors_and_counts_the_rest() -> None:
    schema: JsonObject = {
        "type": "object",
        "properties": {k: {"type": "integer", "minimum": 5} for k in "abcde"},
    }
    defn = one({"name": "many", "inputSchema": schema})
    assert defn.check_args is not None
    with pytest.raises(ToolArgsError) as caught:
        defn.check_args({k: 1 for k in "abcde"})
    message = caught.value.message
    assert message.count("less than the minimum") == 3 and "(and 2 more)" in message


def test_a_schema_our_subset_cannot_express_is_carried_in_the_description() -> None:
    schema: JsonObject = {
        "type": "object",
        "properties": {"when": {"type": "string"}},
        "patternProperties": {"^x-": {"type": "string"}},
        "not": {"required": ["forbidden"]},
    }
    defn = one({"name": "odd", "inputSchema": schema})
    params = defn.parameters
    assert params["type"] == "object" and "properties" not in params
    description = params["description"]
    assert isinstance(description, str)
    assert description.startswith("The arguments, as this JSON Schema says: ")
    assert json.loads(description.split("says: ", 1)[1]) == schema
    # the full schema is still what a call is checked against
    assert defn.check_args is not None
    with pytest.raises(ToolArgsError) as caught:
        defn.check_args({"forbidden": 1})
    assert "$: " in caught.value.message
    defn.check_args({"when": "now", "x-extra": "y"})


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "object", "properties": {"a": {"type": "string"}}, "required": "a"},
        {"type": "object", "oneOf": [{"type": "object"}, {"type": "null"}]},
    ],
)
def test_any_schema_a_server_sends_gives_a_definition(schema: JsonObject) -> None:
    defn = one({"name": "sloppy", "inputSchema": schema})
    assert defn.parameters["type"] == "object"


def test_a_tool_without_an_input_schema_takes_an_object() -> None:
    defn = one({"name": "ping"})
    assert defn.parameters["type"] == "object"


def test_an_invalid_schema_has_no_full_check_but_still_a_definition() -> None:
    defn = one({"name": "bad", "inputSchema": {"type": "object", "minProperties": "two"}})
    assert defn.check_args is None
    assert defn.parameters["type"] == "object"


def test_the_fingerprint_follows_the_schema_the_description_and_the_program() -> None:
    a = one({"name": "log", "inputSchema": SCHEMA, "description": "one"})
    same = one({"name": "log", "inputSchema": SCHEMA, "description": "one"})
    b = one({"name": "log", "inputSchema": SCHEMA, "description": "two"})
    changed = one({"name": "log", "inputSchema": {**SCHEMA, "required": ["count", "branch"]}})
    assert fingerprint(a, "stdio: x") == fingerprint(same, "stdio: x")
    assert fingerprint(a, "stdio: x") != fingerprint(b, "stdio: x")
    assert fingerprint(a, "stdio: x") != fingerprint(changed, "stdio: x")
    assert fingerprint(a, "stdio: x") != fingerprint(a, "stdio: y")


def test_a_destructive_hint_is_never_read_only() -> None:
    both: JsonObject = {
        "name": "wipe",
        "annotations": {"readOnlyHint": True, "destructiveHint": True},
    }
    assert one(both, read_only_allowed=True).read_only is False


# -- approval -------------------------------------------------------------------------------------

HINTED: JsonObject = {"name": "now", "annotations": {"readOnlyHint": True}}


def test_read_only_needs_both_the_hint_and_the_permission() -> None:
    assert one(HINTED, read_only_allowed=True).read_only is True
    assert one(HINTED, read_only_allowed=False).read_only is False
    assert one({"name": "now"}, read_only_allowed=True).read_only is False
    false_hint: JsonObject = {"name": "now", "annotations": {"readOnlyHint": False}}
    assert one(false_hint, read_only_allowed=True).read_only is False
    truthy: JsonObject = {"name": "now", "annotations": {"readOnlyHint": "yes"}}
    assert one(truthy, read_only_allowed=True).read_only is False


# -- results --------------------------------------------------------------------------------------


def test_text_is_text() -> None:
    blocks = render_result(
        {"content": [{"type": "text", "text": "12:00"}, {"type": "text", "text": "UTC"}]}, CAPS
    )
    assert blocks == (TextBlock(text="12:00\nUTC"),)


def test_an_image_goes_through_the_python_tools_image_path() -> None:
    result: JsonObject = {
        "content": [
            {"type": "text", "text": "a chart"},
            {"type": "image", "mimeType": "image/png", "data": PNG_B64},
        ]
    }
    blocks = render_result(result, CAPS)
    assert blocks[0] == TextBlock(text="a chart")
    image = blocks[1]
    assert isinstance(image, ImageBlock)
    assert (image.media_type, image.width, image.height) == ("image/png", 4, 3)
    expected, _ = output_image_blocks(
        [{"output_type": "display_data", "data": {"image/png": PNG_B64}, "metadata": {}}], CAPS
    )
    assert (image,) == expected and image.data == expected[0].data


def test_an_image_alone_is_one_image_block() -> None:
    blocks = render_result(
        {"content": [{"type": "image", "mimeType": "image/png", "data": PNG_B64}]}, CAPS
    )
    assert len(blocks) == 1 and isinstance(blocks[0], ImageBlock)


def test_an_image_that_cannot_be_sent_is_named() -> None:
    blocks = render_result(
        {
            "content": [
                {"type": "image", "mimeType": "image/png", "data": base64.b64encode(b"no").decode()}
            ]
        },
        CAPS,
    )
    text = text_of(blocks)
    assert "image 1 not sent" in text and not any(isinstance(b, ImageBlock) for b in blocks)


def test_a_withheld_image_note_is_bracketed_once() -> None:
    blocks = render_result(
        {"content": [{"type": "image", "mimeType": "image/svg+xml", "data": "PHN2Zy8+"}]}, CAPS
    )
    text = text_of(blocks)
    assert text.startswith("[image 1 not sent") and "[[" not in text


def test_an_embedded_text_resource_gives_its_uri_and_its_text_cut() -> None:
    long = "line\n" * 2_000
    blocks = render_result(
        {
            "content": [
                {
                    "type": "resource",
                    "resource": {
                        "uri": "file:///repo/README.md",
                        "mimeType": "text/markdown",
                        "text": long,
                    },
                }
            ]
        },
        CAPS,
    )
    text = text_of(blocks)
    head, body = text.split("\n", 1)
    assert head == "[resource file:///repo/README.md (text/markdown)]"
    assert len(body) == MAX_RESOURCE_TEXT and body.endswith("…")


def test_a_blob_resource_is_named_not_sent() -> None:
    blob = base64.b64encode(b"\x00" * 300).decode()
    blocks = render_result(
        {"content": [{"type": "resource", "resource": {"uri": "file:///x.bin", "blob": blob}}]},
        CAPS,
    )
    assert text_of(blocks) == "[resource file:///x.bin: 300 bytes of binary data, not shown]"


def test_a_resource_link_audio_and_unknown_content_are_lines() -> None:
    blocks = render_result(
        {
            "content": [
                {"type": "resource_link", "uri": "file:///repo/a.py", "name": "a.py"},
                {"type": "resource_link", "uri": "file:///repo/b.py"},
                {"type": "audio", "mimeType": "audio/wav", "data": "AAAA"},
                {"type": "video"},
            ]
        },
        CAPS,
    )
    assert text_of(blocks).splitlines() == [
        "[resource link: a.py file:///repo/a.py]",
        "[resource link: file:///repo/b.py]",
        "[audio (audio/wav) not sent: audio is not supported]",
        "[content of type 'video' not shown]",
    ]


def test_structured_content_alone_is_json_text() -> None:
    blocks = render_result({"content": [], "structuredContent": {"temp": 21, "unit": "°C"}}, CAPS)
    assert json.loads(text_of(blocks)) == {"temp": 21, "unit": "°C"}


def test_structured_content_with_text_gives_the_text_only() -> None:
    blocks = render_result(
        {"content": [{"type": "text", "text": "21 °C"}], "structuredContent": {"temp": 21}}, CAPS
    )
    assert blocks == (TextBlock(text="21 °C"),)


def test_an_empty_result_is_a_line() -> None:
    assert render_result({"content": []}, CAPS) == (
        TextBlock(text="(the tool returned no content)"),
    )
    assert render_result({}, CAPS) == (TextBlock(text="(the tool returned no content)"),)


def test_the_definitions_render_and_meta_are_these() -> None:
    defn = one({"name": "now"})
    result: JsonObject = {
        "content": [{"type": "text", "text": "noon"}],
        "structuredContent": {"hour": 12},
    }
    assert defn.render({}, result) == (TextBlock(text="noon"),)
    assert defn.presentation_meta is not None
    assert defn.presentation_meta({}, result) == {"structuredContent": {"hour": 12}}


def test_result_meta_keeps_structured_content_and_resource_uris() -> None:
    meta = result_meta(
        {
            "content": [
                {"type": "text", "text": "x"},
                {"type": "resource", "resource": {"uri": "file:///a", "text": "a"}},
                {"type": "resource_link", "uri": "file:///b", "name": "b"},
            ],
            "structuredContent": {"rows": [1, 2]},
        }
    )
    assert meta == {"structuredContent": {"rows": [1, 2]}, "resources": ["file:///a", "file:///b"]}


def test_result_meta_omits_structured_content_over_its_cap() -> None:
    rows: list[JsonValue] = ["x" * 100] * (MAX_STRUCTURED_BYTES // 100)
    big: JsonObject = {"rows": rows}
    meta = result_meta({"content": [], "structuredContent": big})
    assert "structuredContent" not in meta
    omitted = meta["structuredContentOmitted"]
    assert isinstance(omitted, str) and re.fullmatch(r"[\d,]+ bytes of JSON", omitted)


def test_result_meta_of_plain_text_is_empty() -> None:
    assert result_meta({"content": [{"type": "text", "text": "x"}]}) == {}
