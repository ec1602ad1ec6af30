"""``read_journal``: the header, event decoding, seq continuity, and the torn-tail rule."""

from __future__ import annotations

import io
import random

import pytest

from dsh_kernel.errors import SessionFormatError
from dsh_kernel.jsonvalue import JsonObject
from dsh_kernel.session.codec import JOURNAL_BAD_SHAPE, dumps, encode_event, header_to_json
from dsh_kernel.session.events import SessionEvent
from dsh_kernel.session.journal_io import (
    JOURNAL_DAMAGED,
    LoadedJournal,
    read_journal,
)
from dsh_kernel.session.repair import repair
from tests.unit.session.scripts import HEADER, scripted_log

HEADER_LINE = dumps(header_to_json(HEADER))

TITLE: JsonObject = {"title": "t", "source": "user"}
"""A valid standalone event to append after a log."""


def journal_lines(events: list[SessionEvent]) -> list[str]:
    return [HEADER_LINE, *(encode_event(e) for e in events)]


def text_of(lines: list[str]) -> str:
    return "".join(line + "\n" for line in lines)


def sample_log(seed: int = 1) -> list[SessionEvent]:
    return scripted_log(random.Random(seed).randrange, turns=3)


def damaged(text: str, words: str) -> SessionFormatError:
    with pytest.raises(SessionFormatError, match=words) as info:
        read_journal(text, name="j.jsonl")
    return info.value


def test_round_trip_from_text_and_from_a_file_object() -> None:
    log = sample_log()
    text = text_of(journal_lines(log))
    for source in (text, io.StringIO(text), text.splitlines(keepends=True)):
        loaded = read_journal(source, name="j.jsonl")
        assert loaded == LoadedJournal(header=HEADER, events=tuple(log))
        assert loaded.torn_tail is False


def test_a_complete_last_line_without_newline_is_kept() -> None:
    log = sample_log()
    text = text_of(journal_lines(log)).rstrip("\n")
    loaded = read_journal(text, name="j.jsonl")
    assert loaded.events == tuple(log)
    assert not loaded.torn_tail


def test_header_only_journal() -> None:
    loaded = read_journal(HEADER_LINE + "\n", name="j.jsonl")
    assert loaded == LoadedJournal(header=HEADER, events=())


def test_a_torn_last_line_is_dropped_at_every_cut() -> None:
    log = sample_log()
    lines = journal_lines(log)
    last = lines[-1]
    head = text_of(lines[:-1])
    for cut in range(1, len(last)):
        loaded = read_journal(head + last[:cut], name="j.jsonl")
        assert loaded.torn_tail, cut
        assert loaded.events == tuple(log[:-1])


def test_the_torn_prefix_repairs_to_a_valid_balanced_log() -> None:
    from dsh_kernel.session.check.invariants import check_invariants

    log = sample_log(3)
    lines = journal_lines(log)
    for k in range(2, len(lines)):
        loaded = read_journal(text_of(lines[:k]) + lines[k][: len(lines[k]) // 2], name="j")
        assert loaded.torn_tail
        assert check_invariants(repair(loaded.events)) == []


def test_invalid_json_before_the_last_line_is_damage() -> None:
    lines = journal_lines(sample_log())
    lines[3] = lines[3][:10]
    err = damaged(text_of(lines), "j.jsonl:4: not valid JSON")
    assert err.code == JOURNAL_DAMAGED


def test_a_blank_line_in_the_middle_is_damage() -> None:
    lines = journal_lines(sample_log())
    lines.insert(2, "")
    assert damaged(text_of(lines), "j.jsonl:3:").code == JOURNAL_DAMAGED


def test_a_complete_but_invalid_last_event_is_not_a_tear() -> None:
    lines = journal_lines(sample_log())
    lines[-1] = '{"type":"turn/end","seq":"x","time":1,"data":{}}'
    damaged(text_of(lines), f"j.jsonl:{len(lines)}: .*no valid seq")


def test_nan_is_damage_even_on_the_last_line() -> None:
    log = sample_log()
    lines = journal_lines(log)
    lines.append(f'{{"type":"session/title","seq":{len(log)},"time":1,"data":{{"v":NaN}}}}')
    err = damaged(text_of(lines), f"j.jsonl:{len(lines)}:")
    assert err.code == JOURNAL_DAMAGED


def test_unknown_type_is_refused_naming_type_seq_and_line() -> None:
    log = sample_log()
    lines = journal_lines(log)
    lines.append(f'{{"type":"future/x","seq":{len(log)},"time":1,"data":{{}}}}')
    lines.append(
        encode_event(SessionEvent(type="session/title", seq=len(log) + 1, time=1, data=TITLE))
    )
    err = damaged(text_of(lines), "future/x")
    assert err.code == "UNKNOWN_EVENT_TYPE"
    assert f"seq {len(log)}" in str(err)
    assert str(err).startswith(f"j.jsonl:{len(lines) - 1}:")


def test_unknown_ignorable_events_are_kept_in_place() -> None:
    log = sample_log()
    n = len(log)
    lines = journal_lines(log)
    lines.append(f'{{"type":"future/x","seq":{n},"time":1,"data":{{"a":1}},"ignorable":true}}')
    lines.append(encode_event(SessionEvent(type="session/title", seq=n + 1, time=2, data=TITLE)))
    loaded = read_journal(text_of(lines), name="j")
    assert loaded.unknown_ignorable_seqs == (n,)
    assert [e.seq for e in loaded.events] == list(range(n + 2))
    assert loaded.events[n].type == "future/x"
    assert loaded.events[n].ignorable


@pytest.mark.parametrize("delta", [-1, 1, 5])
def test_a_seq_gap_or_repeat_is_damage(delta: int) -> None:
    log = sample_log()
    lines = journal_lines(log)
    bad = SessionEvent(type="session/title", seq=len(log) + delta, time=1, data=TITLE)
    lines.append(encode_event(bad))
    lines.append(encode_event(SessionEvent(type="session/title", seq=0, time=1, data=TITLE)))
    err = damaged(text_of(lines), f"j.jsonl:{len(lines) - 1}: .*seq {len(log) + delta}")
    assert err.code == JOURNAL_DAMAGED


def test_seqs_start_at_zero() -> None:
    text = text_of([HEADER_LINE, encode_event(SessionEvent(type="x/y", seq=1, time=1, data={}))])
    damaged(text, "j.jsonl:2:")


def test_empty_journal_and_bad_headers_are_refused() -> None:
    damaged("", "j.jsonl:1: empty journal")
    damaged('{"type":"turn/start","seq":0}\n', "j.jsonl:1: the first line is not a session header")
    damaged('{"type":"session"', "j.jsonl:1: not valid JSON")
    err = damaged('{"type":"session","version":7,"id":"s","createdAt":1}\n', "version 7")
    assert err.code == "SESSION_FORMAT_UNSUPPORTED"


def test_line_separators_inside_strings_do_not_split_lines() -> None:
    ev = SessionEvent(
        type="session/title", seq=0, time=1, data={"title": "a\u2028b\u2029c\x85d", "source": "u"}
    )
    text = text_of([HEADER_LINE, encode_event(ev)])
    assert "\u2028" in text  # written raw (ensure_ascii=False)
    assert read_journal(text, name="j").events == (ev,)


def test_an_event_whose_data_is_not_its_payload_is_refused_naming_line_and_key() -> None:
    log = sample_log()
    lines = journal_lines(log)
    bad = SessionEvent(type="turn/start", seq=len(log), time=1, data={"turn": "3"})
    lines.append(encode_event(bad))
    err = damaged(
        text_of(lines), f"j.jsonl:{len(lines)}: turn/start data field 'turn' must be an integer"
    )
    assert err.code == JOURNAL_BAD_SHAPE
    lines[-1] = encode_event(SessionEvent(type="turn/start", seq=len(log), time=1, data={}))
    err = damaged(text_of(lines), "missing data field.*turn")
    assert err.code == JOURNAL_BAD_SHAPE
