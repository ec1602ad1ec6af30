"""Widgets without a frontend: every widget's comm records what it would send (the way ipywidgets'
own tests replace the comm), and tests can play the frontend's side through ``CommLog.frontend``."""

from __future__ import annotations

from collections.abc import Iterator

import comm
import pytest

from .helpers import CommLog, RecordingComm


@pytest.fixture
def comms(monkeypatch: pytest.MonkeyPatch) -> Iterator[CommLog]:
    log = CommLog()

    def create_comm(**kwargs: object) -> RecordingComm:
        return RecordingComm(log, **kwargs)

    monkeypatch.setattr(comm, "create_comm", create_comm)
    yield log
