"""A long session on a real small model compacts and still sends the user's turn-1 fact.

Qwen2.5-Coder-0.5B on a real llama-cpp-python server, through a real kernel with a small window
(``DSH_CONTEXT_WINDOW``): twenty turns, then ``%agent compact`` (the kernel also compacts on its own
if the answers fill 80 % of the window first, so the test never depends on how long they were). The
user gives one name in turn 1 — the project's code name — and no other name or number, so the
substance check (``agent.compaction.substance``) must see it kept: either the model's summary
carries it, or the summary is set aside and the deterministic reduction, which keeps each turn's
first message, stands in (on 2026-12-03 this model answered with the instruction's empty headings
again: ``SUMMARY_UNFIT``). Asserted on the log only — the compactions, and the history the last
request was built from — never on what the model answered.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.local.conftest import KernelFactory, sql
from tests.local.server import LlamaServer

pytestmark = [pytest.mark.local, pytest.mark.timeout(3000)]

CODE_NAME = "Zephyrine"
FIRST = f"My project's code name is {CODE_NAME}. Reply with one word: noted."
ASKS = (  # answers of a few sentences: twenty turns fill the small window
    "Describe the colour blue in three short sentences.",
    "Describe a ripe apple in three short sentences.",
    "Describe a cat in three short sentences.",
    "Describe the autumn in three short sentences.",
    "Describe the red planet in three short sentences.",  # no name: the code name is the only one
)
WINDOW = 2600


def surface(k: Any) -> list[dict[str, Any]]:
    """The model's view now: each surface node's seq, event type, source and text."""
    out = k.python(
        "import json as _j\n"
        "_s = get_ipython().kernel.host.agent.session\n"
        "_v = []\n"
        "for _q in _s.surface:\n"
        "    _m = _s.projection(_q)\n"
        "    if _m is not None:\n"
        "        _v.append({'seq': _q, 'type': _s.events[_q].type, 'plugin': "
        "getattr(_m.source, 'plugin', None), 'text': _m.text()})\n"
        "print(_j.dumps(_v))"
    )
    return json.loads(out)


def test_twenty_turns_compact_and_the_code_name_is_still_sent(
    kernel_at: KernelFactory, qwen: LlamaServer
) -> None:
    with kernel_at(qwen, DSH_CONTEXT_WINDOW=str(WINDOW)) as k:
        first = k.execute(FIRST, timeout=900)
        assert first.status == "ok", first.content
        for i in range(19):  # the cells' outcomes are the model's: only the log is asserted
            k.execute(ASKS[i % len(ASKS)], timeout=900)
        by_hand = k.execute("%agent compact", timeout=900)
        assert by_hand.status == "ok" and by_hand.stdout.startswith("compacted "), by_hand.content
        k.execute("What is my project's code name? Reply with one word.", timeout=900)

        done = sql(
            k,
            "SELECT trigger, method, failure_code, summary FROM compactions "
            "WHERE status = 'done' AND method IS NOT NULL ORDER BY start_seq",
        )
        assert done, "the session compacted"
        # every summary that landed kept the code name: the model's, or the reduction
        assert all(CODE_NAME in row["summary"] for row in done), done
        assert {row["method"] for row in done} <= {"model", "reduction"}
        # turn 1's message itself is no longer sent: a checkpoint stands for it
        view = surface(k)
        assert not any(n["text"] == FIRST for n in view), "turn 1 was compacted"
        checkpoints = [n for n in view if n["plugin"] == "dsh/compaction"]
        assert checkpoints and CODE_NAME in checkpoints[0]["text"], view
        # and the last request — the question after the last compaction — was built from it
        [last] = sql(
            k,
            "SELECT first_seq FROM requests WHERE purpose = 'agent' ORDER BY request DESC LIMIT 1",
        )
        assert checkpoints[0]["seq"] < last["first_seq"], (checkpoints[0], last)
        sent = [n for n in view if n["seq"] < last["first_seq"]]
        assert any(CODE_NAME in n["text"] for n in sent)
        assert any(n["text"].startswith("What is my project's code name?") for n in sent)
