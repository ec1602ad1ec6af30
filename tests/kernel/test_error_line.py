"""A failed chat cell shows its code once (issue 12, item 11).

The reply is ``ename`` = the code, ``evalue`` = what happened and what to do, and the one-line
traceback ``<code>: <evalue>`` that the notebook displays; the code used to be in ``evalue`` as well,
so the notebook showed ``EMPTY_RESPONSE: EMPTY_RESPONSE: …``.
"""

from __future__ import annotations

from tests.kernel.conftest import Live
from tests.support import scenarios as sc


def test_an_empty_answer_after_a_retry_shows_empty_response_once(live: Live) -> None:
    live.server.script(sc.text(sticky=True))  # every attempt: a stream that finishes with nothing
    ex = live.fe.run("Say nothing at all.", timeout=120)
    assert ex.status == "error", ex.content
    assert ex.content["ename"] == "EMPTY_RESPONSE"
    evalue = ex.content["evalue"]
    assert "the model returned nothing" in evalue and "rephrase the prompt" in evalue, evalue
    (error,) = ex.of_type("error")
    (line,) = error["content"]["traceback"]
    assert line == f"EMPTY_RESPONSE: {evalue}"
    assert line.count("EMPTY_RESPONSE") == 1, line
    assert len(live.server.requests) == 2  # the first attempt and one retry (issue 14: not five)
