"""Crash repair judged from a journal's end (``repair_orphan_if_open``) decides as the full read
does: at every point a process could have died — each prefix of a real two-turn session, whole or
cut mid-line — it either repairs exactly as ``repair_orphan`` would, or says nothing is needed
(``None``) only where ``repair_orphan`` would write nothing. Damage before the end is not its to
find (the shipper's checked read finds it: ``tests/integration/shared/test_ship_checked.py``)."""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path

import pytest

from dsh_kernel.errors import SessionFormatError
from dsh_kernel.store.journal import repair_orphan, repair_orphan_if_open
from dsh_kernel.store.layout import Store

from .conftest import record_rich_session


def _outcome(path: Path, repair) -> tuple[object, bytes]:
    try:
        result = repair(path)
    except SessionFormatError as exc:
        result = str(exc).replace(str(path), "<journal>")
    return result, path.read_bytes()


def test_judged_from_its_end_a_journal_is_repaired_as_the_full_read_repairs_it(
    store: Store, tmp_path: Path
) -> None:
    _, writer = asyncio.run(record_rich_session(store))
    writer.close()
    whole = writer.path.read_bytes()
    lines = whole.splitlines(keepends=True)
    assert len(lines) > 20
    prefixes = [b"".join(lines[:n]) for n in range(len(lines) + 1)]
    prefixes += [b"".join(lines[:n]) + lines[n][: len(lines[n]) // 2] for n in range(len(lines))]
    prefixes += [whole + b"\n", whole.replace(b"\n", b"", 1)]  # an empty line; a merged header
    closed = 0
    for n, data in enumerate(prefixes):
        full, judged = tmp_path / f"full-{n}.jsonl", tmp_path / f"judged-{n}.jsonl"
        full.write_bytes(data)
        shutil.copyfile(full, judged)
        expected = _outcome(full, repair_orphan)
        got = _outcome(judged, repair_orphan_if_open)
        if got[0] is None:
            closed += 1
            assert got[1] == expected[1] == data, n  # nothing was written, by either
            if n != len(prefixes) - 1:
                assert expected[0] is False, n  # nothing to repair
        else:
            assert got == expected, n
    # the header alone, each whole turn, and the events between turns are judged closed
    assert closed >= 4
    # a header merged with the first event (damage, not a tear) is the full read's to find
    assert str(expected[0]).startswith("<journal>:1: not valid JSON")


def test_a_live_journal_is_left_alone(store: Store) -> None:
    agent, writer = asyncio.run(record_rich_session(store))
    before = writer.path.read_bytes()
    try:
        assert repair_orphan_if_open(writer.path) is False  # its writer holds the lock
    finally:
        writer.close()
    assert writer.path.read_bytes() == before
    del agent


def test_a_missing_journal_needs_nothing(tmp_path: Path) -> None:
    assert repair_orphan_if_open(tmp_path / "gone.jsonl") is False


@pytest.mark.parametrize("tail", [b"", b"\n", b"[]\n"])
def test_what_is_not_a_journal_is_refused_in_the_full_read_s_words(
    tmp_path: Path, tail: bytes
) -> None:
    path = tmp_path / "odd.jsonl"
    path.write_bytes(tail)
    with pytest.raises(SessionFormatError) as full:
        repair_orphan(path)
    with pytest.raises(SessionFormatError) as judged:
        repair_orphan_if_open(path)
    assert str(judged.value) == str(full.value)
