"""``ThinkTags``: ``<think>…</think>`` in content is reasoning, also when only ``</think>`` comes."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from dsh_kernel.llm.providers.openai_compat.think_tags import MAX_UNSAY_CHARS, Piece, ThinkTags


def pieces(text: str, step: int = 1) -> list[Piece]:
    """Every piece of ``text`` fed in steps of ``step``, neighbours of one kind merged."""
    tags = ThinkTags()
    out: list[Piece] = []
    for i in range(0, len(text), step):
        out += tags.feed(text[i : i + step])
    out += tags.finish()
    merged: list[Piece] = []
    for kind, piece in out:
        if merged and merged[-1][0] == kind and kind != "unsay":
            merged[-1] = (kind, merged[-1][1] + piece)
        else:
            merged.append((kind, piece))
    return merged


def test_an_opening_tag_makes_reasoning_and_the_tags_and_their_whitespace_go() -> None:
    text = "\n<think>\nThe user wants 2+2.\n</think>\n\nIt is 4."
    for step in (1, 2, 5, 100):
        assert pieces(text, step) == [
            ("reasoning", "The user wants 2+2.\n"),
            ("answer", "It is 4."),
        ]


def settled(out: list[Piece]) -> list[Piece]:
    """What stands once every ``unsay`` has taken back the answer before it."""
    kept: list[Piece] = []
    for kind, piece in out:
        if kind == "unsay":
            kept = [p for p in kept if p[0] != "answer"]
        else:
            kept.append((kind, piece))
    return kept


def test_only_a_closing_tag_unsays_the_answer_so_far_and_resends_it_as_reasoning() -> None:
    text = "Okay, 2+2 is basic.</think>\n\nIt is 4."
    for step in (1, 3):  # streamed as answer first, then taken back
        assert pieces(text, step) == [
            ("answer", "Okay, 2+2 is basic."),
            ("unsay", ""),
            ("reasoning", "Okay, 2+2 is basic."),
            ("answer", "It is 4."),
        ]
    assert settled(pieces(text, 100)) == [
        ("reasoning", "Okay, 2+2 is basic."),
        ("answer", "It is 4."),
    ]


def test_an_answer_without_tags_streams_as_it_comes() -> None:
    tags = ThinkTags()
    assert tags.feed("Paris is") == [("answer", "Paris is")]
    assert tags.feed(" the capital <") == [("answer", " the capital ")]  # "<" may start a tag
    assert tags.feed("b>really</b>.") == [("answer", "<b>really</b>.")]
    assert tags.finish() == []


def test_look_alikes_are_answer() -> None:
    for text in ("<thinking>x</thinking>", "<", "a</thin", "a<thi", "2 < 3"):
        assert pieces(text) == [("answer", text)]


def test_a_think_block_after_some_answer_starts_reasoning_there() -> None:
    text = "Sure.\n<think>\nThree spiders, eight legs each.\n</think>\n\n24 legs."
    for step in (1, 4, 100):
        assert pieces(text, step) == [
            ("answer", "Sure.\n"),
            ("reasoning", "Three spiders, eight legs each.\n"),
            ("answer", "24 legs."),
        ]
    assert pieces("x <think> y") == [("answer", "x "), ("reasoning", "y")]


def test_an_empty_think_block_yields_no_reasoning() -> None:
    assert pieces("<think>\n\n</think>\n\nHi") == [("answer", "Hi")]


def test_reasoning_cut_off_before_its_closing_tag_stays_reasoning() -> None:
    assert pieces("<think>I was thinking abo", 4) == [("reasoning", "I was thinking abo")]


def test_a_second_closing_tag_is_answer() -> None:
    assert pieces("<think>a</think>b</think>c") == [
        ("reasoning", "a"),
        ("answer", "b</think>c"),
    ]


def test_no_unsay_after_the_bound() -> None:
    long = "x" * (MAX_UNSAY_CHARS + 10)
    out = pieces(long + "</think>y", 4096)
    assert out == [("answer", long + "</think>y")]


@settings(max_examples=300, deadline=None)
@given(
    before=st.text(alphabet="ab </>thinkTH\n", max_size=30),
    after=st.text(alphabet="ab </>thinkTH\n", max_size=30),
    opened=st.booleans(),
    step=st.integers(min_value=1, max_value=9),
)
def test_any_split_reads_the_same(before: str, after: str, opened: bool, step: int) -> None:
    text = ("<think>" if opened else "") + before + "</think>" + after
    assert settled(pieces(text, step)) == settled(pieces(text, len(text)))
