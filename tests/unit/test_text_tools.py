"""``TextToolCalls``: an answer that *is* tool calls written as text becomes calls; anything else
stays text, exactly as it came, and is shown as soon as it is decided."""

from __future__ import annotations

import itertools
import json

from hypothesis import given, settings
from hypothesis import strategies as st

from dsh_kernel.llm.providers.openai_compat.text_tools import (
    MAX_HELD_CHARS,
    MAX_HELD_SECONDS,
    SHORT_CALL_CHARS,
    RecoveredCall,
    TextToolCalls,
    call_id,
    read_call,
)

OFFERED = frozenset({"python", "sql", "ask_user"})
QWEN = '{"name": "python", "arguments": {"code": "17 * 23", "description": "Multiply"}}'
"""What Qwen2.5-Coder-0.5B wrote through llama-cpp-python's default template (research notes)."""


def stream(text: str, step: int = 1) -> tuple[list[str], str, tuple[RecoveredCall, ...]]:
    """Feed ``text`` in pieces of ``step``: ``(what each feed showed, the finish text, calls)``."""
    machine = TextToolCalls(OFFERED)
    shown = [machine.feed(text[i : i + step]) for i in range(0, len(text), step)]
    rest, calls = machine.finish()
    return shown, rest, calls


def as_text(text: str, step: int = 1) -> str:
    """``text`` must come back as text, whole; returns it as shown."""
    shown, rest, calls = stream(text, step)
    assert calls == ()
    out = "".join(shown) + rest
    assert out == text
    return out


def test_the_qwen_answer_is_one_call_and_nothing_is_shown_while_it_streams() -> None:
    shown, rest, calls = stream(QWEN)
    assert set(shown) == {""} and rest == ""
    (call,) = calls
    assert call.name == "python"
    assert json.loads(call.arguments) == {"code": "17 * 23", "description": "Multiply"}
    assert call.source == QWEN


def test_whitespace_around_the_object_is_allowed_and_left_out_of_the_source() -> None:
    _, rest, calls = stream("\n  " + QWEN + "\n\n")
    assert rest == "" and [c.source for c in calls] == [QWEN]


def test_arguments_given_as_a_json_string_are_kept_as_that_text() -> None:
    text = json.dumps({"name": "sql", "arguments": json.dumps({"query": "SELECT 1"})})
    (call,) = stream(text, 3)[2]
    assert call.arguments == '{"query": "SELECT 1"}'


def test_parameters_is_read_as_arguments_but_not_both() -> None:
    (call,) = stream('{"name": "python", "parameters": {"code": "1"}}')[2]
    assert json.loads(call.arguments) == {"code": "1"}
    as_text('{"name": "python", "parameters": {"code": "1"}, "arguments": {"code": "2"}}')


def test_several_tool_call_blocks_are_several_calls_in_order() -> None:
    first = '<tool_call>\n{"name": "python", "arguments": {"code": "x = 1"}}\n</tool_call>'
    second = '<tool_call>{"name": "sql", "arguments": {"query": "SELECT 2"}}</tool_call>'
    for step in (1, 4, 1000):
        shown, rest, calls = stream(f"{first}\n{second}\n", step)
        assert set(shown) == {""} and rest == ""
        assert [(c.name, c.source) for c in calls] == [("python", first), ("sql", second)]


def test_fenced_json_is_a_call_with_or_without_the_language() -> None:
    for fence in ("```json\n", "```\n", "```JSON \n"):
        text = f"{fence}{QWEN}\n```\n"
        (call,) = stream(text, 2)[2]
        assert call.name == "python" and call.source == text.strip()
    # a model that stops before the closing fence still wrote only the call
    assert len(stream("```json\n" + QWEN + "\n")[2]) == 1


def test_a_fence_in_another_language_is_shown_at_the_end_of_its_first_line() -> None:
    shown, _, calls = stream("```python\nprint(1)\n```")
    assert calls == ()
    assert "".join(shown[: len("```python\n")]) == "```python\n"


def test_a_call_quoted_in_prose_stays_text_and_streams_at_once() -> None:
    text = 'You could call {"name": "python", "arguments": {"code": "1"}} to check.'
    shown, _, _ = stream(text)
    assert shown[0] == "Y" and as_text(text) == text


def test_prose_after_the_closing_brace_releases_everything_as_text_there() -> None:
    text = QWEN + " That computes it."
    shown, _, calls = stream(text)
    assert calls == ()
    assert "".join(shown[: len(QWEN) + 1]) == ""  # whitespace after a call is still a call
    assert "".join(shown[: len(QWEN) + 2]) == QWEN + " T"  # the first word decides
    assert as_text(text, 5) == text


def test_a_name_not_offered_is_released_before_the_object_ends() -> None:
    text = '{"name": "rm_rf", "arguments": {"path": "/"}}'
    shown, _, calls = stream(text)
    assert calls == ()
    opened = len('{"name": "rm_rf"')
    assert "".join(shown[:opened]) == text[:opened]  # the name decided it
    as_text(text)


def test_json_that_is_not_a_call_is_released_at_its_first_key() -> None:
    text = '{"city": "Paris", "temp_c": 11}'
    shown, _, _ = stream(text)
    assert "".join(shown[: len('{"city"')]) == '{"city"'
    for other in ("{}", "[1, 2]", '{"name": 3, "arguments": {}}', "{ oops"):
        as_text(other)


def test_arguments_that_do_not_parse_stay_text() -> None:
    for args in ('"not json"', "[1]", '"[1]"', "17", '"{\\"a\\": NaN}"', "null"):
        as_text(f'{{"name": "python", "arguments": {args}}}')
    as_text('{"name": "python"}')  # no arguments at all
    as_text('{"name": "python", "arguments": {}, "id": "x"}')  # a key a call does not have


def test_a_bad_block_releases_the_whole_answer_including_good_blocks() -> None:
    good = '<tool_call>{"name": "python", "arguments": {"code": "1"}}</tool_call>'
    as_text(good + '\n<tool_call>{"name": "nope", "arguments": {}}</tool_call>')
    as_text(good + "\nand then some prose")
    as_text(good + "\n<b>bold</b>")
    as_text("<tool_call>{not json}</tool_call>")
    as_text("<tool_cal>x")
    as_text("<table><tr><td>1</td></tr></table>")


def test_an_unfinished_call_is_text_at_the_end() -> None:
    as_text(QWEN[:-1])
    as_text('<tool_call>{"name": "python", "arguments": {}}')
    as_text("  \n")
    as_text("")


def test_split_into_one_character_deltas_or_any_size_gives_the_same_calls() -> None:
    whole = stream(QWEN, len(QWEN))[2]
    for step in range(1, 12):
        assert stream(QWEN, step)[2] == whole


def test_more_than_the_bound_is_released_as_text() -> None:
    code = "x = 1\n" * (MAX_HELD_CHARS // 3)
    text = json.dumps({"name": "python", "arguments": {"code": code}})
    shown, rest, calls = stream(text, 1000)
    assert calls == () and rest == ""
    assert "".join(shown) == text
    released = next(i for i, s in enumerate(shown) if s)
    assert released * 1000 <= MAX_HELD_CHARS + 1000  # not held to the end


LOOP = '{"name": "python", "arguments": {"code": "' + "print(1)\\n" * 2_000
"""A model looping inside an unclosed JSON string (what Qwen 2.5-Coder-0.5B did for 2,869 tokens)."""


def test_a_looping_unclosed_string_is_released_at_the_character_bound_whole_and_once() -> None:
    for step in (1, 7, 64):
        machine = TextToolCalls(OFFERED)
        shown: list[str] = []
        for i in range(0, len(LOOP), step):
            shown.append(machine.feed(LOOP[i : i + step]))
            if machine.passing:
                break
        assert machine.passing and machine.held == 0
        said = "".join(shown)
        assert MAX_HELD_CHARS < len(said) <= MAX_HELD_CHARS + step  # released at the bound
        assert LOOP.startswith(said)  # every character, in order, once
        assert machine.feed("more") == "more"  # and from then on it streams
        assert machine.finish() == ("", ())


def test_a_looping_unclosed_string_is_released_after_the_time_bound() -> None:
    machine = TextToolCalls(OFFERED)
    pieces = [LOOP[i : i + 16] for i in range(0, 1_600, 16)]  # 160 characters a second
    shown = [machine.feed(p, now=0.1 * n) for n, p in enumerate(pieces)]
    released = next(n for n, s in enumerate(shown) if s)
    assert 0.1 * released > MAX_HELD_SECONDS >= 0.1 * (released - 1)  # the first piece past it
    assert SHORT_CALL_CHARS < 16 * (released + 1) < MAX_HELD_CHARS  # by the clock, not the size
    assert shown[released] == "".join(pieces[: released + 1])  # all that was held, once
    assert shown[released + 1 :] == pieces[released + 1 :]  # then it streams as it comes


def test_a_short_call_on_a_slow_server_is_held_past_the_time_bound_until_it_closes() -> None:
    machine = TextToolCalls(OFFERED)
    assert len(QWEN) < SHORT_CALL_CHARS
    # one character a second: ten times the time bound, and still a call
    assert all(machine.feed(c, now=float(n)) == "" for n, c in enumerate(QWEN))
    assert machine.held == len(QWEN)
    assert [c.source for c in machine.finish()[1]] == [QWEN]


def test_a_call_that_closes_within_the_bounds_is_a_call_however_slow_or_split() -> None:
    for step in (1, 5, len(QWEN)):
        pieces = [QWEN[i : i + step] for i in range(0, len(QWEN), step)]
        machine = TextToolCalls(OFFERED)
        # the whole call arrives within the time bound, however it is split
        gap = MAX_HELD_SECONDS / (len(pieces) + 1)
        assert all(machine.feed(p, now=gap * n) == "" for n, p in enumerate(pieces))
        assert machine.held == len(QWEN)
        _, calls = machine.finish()
        assert [c.source for c in calls] == [QWEN]


def test_closed_calls_are_not_released_by_the_clock_and_each_call_has_its_own() -> None:
    block = '<tool_call>{"name": "sql", "arguments": {"query": "SELECT 1"}}</tool_call>'
    machine = TextToolCalls(OFFERED)
    assert machine.feed(block, now=0.0) == ""
    assert machine.feed("\n", now=MAX_HELD_SECONDS * 3) == ""  # a closed call waits for the end
    assert machine.feed(block[:20], now=MAX_HELD_SECONDS * 3 + 1) == ""  # a second call's clock
    assert machine.feed(block[20:], now=MAX_HELD_SECONDS * 3 + 2) == ""
    rest, calls = machine.finish()
    assert rest == "" and len(calls) == 2


def test_held_counts_a_candidate_only() -> None:
    machine = TextToolCalls(OFFERED)
    assert machine.feed("  \n") == "" and machine.held == 0  # whitespace is no candidate yet
    assert machine.feed('{"na') == "" and machine.held == 7
    assert machine.feed('me": "print"') == '  \n{"name": "print"'  # not offered: released
    assert machine.held == 0


def test_release_gives_back_what_was_held_and_then_passes_through() -> None:
    machine = TextToolCalls(OFFERED)
    assert machine.feed('{"name": "py') == ""
    assert machine.release() == '{"name": "py'
    assert machine.passing
    assert machine.feed('thon"}') == 'thon"}'
    assert machine.finish() == ("", ())


def test_nothing_offered_means_nothing_is_held() -> None:
    machine = TextToolCalls(frozenset())
    assert machine.feed(QWEN) == QWEN and machine.finish() == ("", ())


def test_read_call_is_the_one_check_of_an_object() -> None:
    assert read_call(QWEN, OFFERED) is not None
    assert read_call(QWEN, frozenset({"sql"})) is None
    assert (
        read_call('{"name": "python", "arguments": ' + "[" * 70 + "]" * 70 + "}", OFFERED) is None
    )


def test_call_ids_are_stable_and_distinct() -> None:
    a = call_id("chatcmpl-1\x003", 0, QWEN)
    assert a == call_id("chatcmpl-1\x003", 0, QWEN)
    assert a.startswith("call_") and len(a) == len("call_") + 24
    assert len({a, call_id("chatcmpl-1\x003", 1, QWEN), call_id("chatcmpl-1\x005", 0, QWEN)}) == 3


_CALLS = st.sampled_from(
    [
        QWEN,
        "```json\n" + QWEN + "\n```",
        '<tool_call>{"name": "sql", "arguments": {"query": "SELECT \\"}\\" AS x"}}</tool_call>',
    ]
)
_ANSWERS = st.one_of(
    _CALLS,
    st.text(max_size=80),
    st.builds(lambda a, b: a + b, _CALLS, st.text(min_size=1, max_size=20)),
    st.builds(lambda a, b: a + b, st.text(min_size=1, max_size=20), _CALLS),
)


def run(pieces: list[str]) -> tuple[str, str, tuple[RecoveredCall, ...]]:
    machine = TextToolCalls(OFFERED)
    shown = "".join(machine.feed(p) for p in pieces)
    return (shown, *machine.finish())


@settings(max_examples=300, deadline=None)
@given(text=_ANSWERS, cuts=st.lists(st.integers(min_value=0, max_value=200), max_size=12))
def test_any_answer_under_any_split_is_either_its_calls_or_itself(
    text: str, cuts: list[int]
) -> None:
    points = sorted({min(c, len(text)) for c in cuts} | {0, len(text)})
    pieces = [text[a:b] for a, b in itertools.pairwise(points) if b > a]
    shown, rest, calls = run(pieces)
    assert calls == run([text])[2]  # the split changes nothing
    if calls:
        assert shown == "" and rest == ""
        assert text.strip().endswith(calls[-1].source)
    else:
        assert shown + rest == text
