"""The store's token estimate (``t_messages.est_tokens``, SQL) is the one in ``llm.estimate``: the
SQL expression, run by DuckDB on logged messages, gives what the Python gives, block kind by kind —
an unknown block and non-text blocks nested in a tool result included."""

from __future__ import annotations

import duckdb
import pytest

from dsh_kernel.ids import CallId, MessageId
from dsh_kernel.jsonvalue import JsonObject
from dsh_kernel.llm.codec import message_from_json, message_to_json
from dsh_kernel.llm.estimate import message_tokens
from dsh_kernel.llm.types import (
    ContentBlock,
    ImageBlock,
    Message,
    ReasoningBlock,
    TextBlock,
    ToolCallBlock,
    ToolResultBlock,
    ToolSource,
    UnknownBlock,
    UserSource,
)
from dsh_kernel.session.codec import dumps
from dsh_kernel.store.ingest.statements import EST_TOKENS, MESSAGE_SHAPE

IMAGE = ImageBlock(
    sha256="a" * 64,
    media_type="image/png",
    width=1024,
    height=768,
    size=88_000,
    description="Figure: 1 axes",
)
SMALL_IMAGE = ImageBlock(
    sha256="b" * 64,
    media_type="image/png",
    width=8,
    height=8,
    size=90,
    description="Figure: " + "a long legend, " * 40,
)
CALL = ToolCallBlock(id=CallId("c1"), name="python", arguments='{"code": "df.head()"}')
UNKNOWN_WITH_TEXT = UnknownBlock(type="citation", raw={"type": "citation", "text": "see p. 12"})
UNKNOWN_WITHOUT = UnknownBlock(
    type="server-tool-use", raw={"type": "server-tool-use", "input": {"query": "x" * 400}}
)


def _message(*content: ContentBlock) -> Message:
    return Message(id=MessageId("m"), role="user", content=content, source=UserSource())


def _result(*content: ContentBlock) -> Message:
    return Message(
        id=MessageId("r"),
        role="user",
        content=(ToolResultBlock(tool_call_id=CallId("c1"), content=content),),
        source=ToolSource(call_id=CallId("c1")),
    )


CASES = {
    "empty": _message(),
    "text": _message(TextBlock(text="What is in the frame? " * 7)),
    "non-ascii text": _message(TextBlock(text="Größe der Stichprobe: 12 µg, 5 °C — ok")),
    "reasoning, text and a call": Message(
        id=MessageId("a"),
        role="assistant",
        content=(
            ReasoningBlock(text="look at the columns first", signature="sig"),
            TextBlock(text="Let me look."),
            CALL,
        ),
        source=UserSource(),
    ),
    "images": _message(TextBlock(text="see"), IMAGE, SMALL_IMAGE),
    "unknown blocks": _message(UNKNOWN_WITH_TEXT, UNKNOWN_WITHOUT),
    "a tool result of text and images": _result(
        TextBlock(text="   a  b\n0  1  2"), IMAGE, SMALL_IMAGE
    ),
    "non-text blocks nested in a tool result": _result(
        ReasoningBlock(text="thought"),
        CALL,
        UNKNOWN_WITH_TEXT,
        UNKNOWN_WITHOUT,
        ToolResultBlock(tool_call_id=CallId("c0"), content=(TextBlock(text="deep"),)),
    ),
}


def _sql_estimate(con: duckdb.DuckDBPyConnection, message: JsonObject) -> int:
    row = con.execute(
        f"SELECT {EST_TOKENS} FROM (SELECT json_transform(?::JSON, '{MESSAGE_SHAPE}') AS m)",
        [dumps(message)],
    ).fetchone()
    assert row is not None
    return int(row[0])


@pytest.mark.parametrize("name", list(CASES))
def test_sql_and_python_estimate_a_message_alike(name: str) -> None:
    message = CASES[name]
    logged = message_to_json(message)
    with duckdb.connect() as con:
        assert _sql_estimate(con, logged) == message_tokens(message_from_json(logged))


def test_nested_non_text_blocks_count_their_text_only() -> None:
    # a tool call or a block this version does not know, nested in a tool result, is not measured
    # by its JSON: each counts its text (none: 4), as the store counts it
    nested = CASES["non-text blocks nested in a tool result"]
    thought, call, cited, unknown, inner = 2 + 4, 4, 3 + 4, 4, 4
    assert message_tokens(nested) == 4 + 4 + thought + call + cited + unknown + inner
    assert message_tokens(_message(UNKNOWN_WITHOUT)) == 4 + 4
