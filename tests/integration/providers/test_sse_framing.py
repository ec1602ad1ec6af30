"""The byte-level SSE decoder (WIRE §1): framing rules, and any split of the bytes gives one answer."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from dsh_kernel.llm.providers.sse import SseDecoder
from tests.support import wire_transcripts as wt


def decode(*reads: bytes) -> tuple[list[bytes], bool]:
    d = SseDecoder()
    out: list[bytes] = []
    for r in reads:
        out.extend(d.feed(r))
    return out, d.truncated


def test_rules() -> None:
    raw = (
        b": keep-alive\n\n"
        b"data: a\n\n"
        b"data:b\r\n\r\n"  # no space, CRLF
        b"event: x\rid: 7\rretry: 5\rdata: c\r\r"  # bare CR
        b"data: line1\ndata: line2\n\n"  # multi-line data joined with \n
        b"data:\n\n"  # empty data: not dispatched
        b"data:  two spaces\n\n"  # only one space is stripped
        b"nonsense line\n\n"
        b"data: tail without blank line"
    )
    out, truncated = decode(raw)
    assert out == [b"a", b"b", b"c", b"line1\nline2", b" two spaces"]
    assert truncated


def test_crlf_split_across_reads_is_one_terminator() -> None:
    out, truncated = decode(b"data: a\r", b"\ndata: b\r\n\r", b"\n")
    assert out == [b"a\nb"]
    assert not truncated


def test_a_bare_cr_ending_a_read_dispatches_at_once() -> None:
    d = SseDecoder()
    assert d.feed(b"data: a\r\r") == [b"a"]
    assert d.feed(b"\ndata: b\r\r") == [b"b"]  # the LF completing the CR LF is not a blank line


def test_comments_are_counted() -> None:
    d = SseDecoder()
    d.feed(b": keep-alive\n\n: keep-alive\n\ndata: x\n\n")
    assert d.comments == 2


TRANSCRIPTS = [
    wt.OPENAI_TEXT,
    wt.DEEPSEEK_THINKING_TOOL,
    wt.ANTHROPIC_THINKING_TOOL,
    wt.chat_text_stream(["Grüße ☀️", "東京"]),
]


@settings(max_examples=150, deadline=None)
@given(
    which=st.sampled_from(range(len(TRANSCRIPTS))),
    ending=st.sampled_from(["\n", "\r\n", "\r"]),
    cuts=st.lists(st.integers(min_value=0, max_value=10_000), max_size=40),
)
def test_any_split_of_any_line_ending_decodes_the_same(
    which: int, ending: str, cuts: list[int]
) -> None:
    raw = TRANSCRIPTS[which].replace("\n", ending).encode()
    whole, _ = decode(raw)
    points = sorted({c % (len(raw) + 1) for c in cuts})
    pieces = [raw[a:b] for a, b in zip([0, *points], [*points, len(raw)], strict=True)]
    split, truncated = decode(*pieces)
    assert split == whole
    assert not truncated
    for payload in split:  # every piece of text decodes intact, multi-byte characters included
        payload.decode("utf-8")
