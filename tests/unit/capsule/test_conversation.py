"""A notebook's capsules joined into one conversation (``capsule.conversation``): the chain of
turns and branches, what is left out and why, and the budget a whole notebook is held to."""

from __future__ import annotations

import base64
import json
import zlib
from pathlib import Path
from typing import Any

import pytest

from dsh_kernel.capsule import CAPSULE_KEY
from dsh_kernel.capsule.conversation import imported_session, join, notebook_capsules
from dsh_kernel.capsule.format import CAPSULE_INVALID, CapsuleError, capsule_of, read_capsule
from dsh_kernel.session.codec import event_to_json
from dsh_kernel.store.sessions import fork
from dsh_kernel.testing import ScriptedProvider, text_response
from tests.unit.agent.helpers import agent_with


async def conversation(n: int) -> Any:
    agent = agent_with(ScriptedProvider([text_response(f"answer {i}") for i in range(n)]))
    for i in range(1, n + 1):
        agent.followup(f"question {i}")
        await agent.when_idle()
    return agent


def notebook(tmp: Path, capsules: list[Any]) -> Path:
    cells = [
        {
            "cell_type": "code",
            "id": f"c{i}",
            "metadata": {},
            "source": "x",
            "execution_count": i,
            "outputs": [
                {
                    "output_type": "display_data",
                    "data": {"text/plain": "x"},
                    "metadata": {CAPSULE_KEY: c},
                }
            ],
        }
        for i, c in enumerate(capsules, 1)
    ]
    path = tmp / "nb.ipynb"
    path.write_text(
        json.dumps({"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": cells})
    )
    return path


async def test_a_branch_re_run_after_an_import_still_joins(tmp_path: Path) -> None:
    # Machine A: two turns. Machine B imports them (a new session), then re-runs cell 2 there:
    # that branch's parent is B's import session, which no capsule names.
    a = await conversation(2)
    caps = [capsule_of(a.session, t) for t in (1, 2)]
    joined = join([(f"cell {i}", read_capsule(c, f"cell {i}")) for i, c in enumerate(caps, 1)])
    imported = imported_session(joined, notebook=None, user=None, ai_policy=None)
    assert imported is not None and imported.header.parent_kind == "import"
    branch = fork(imported.header, list(imported.events), 1, kind="rewind")
    b = agent_with(ScriptedProvider([text_response("answer 2b")]), session=branch)
    b.followup("question 2b")
    await b.when_idle()
    again = [caps[0], capsule_of(branch, 2)]
    joined = join([(f"cell {i}", read_capsule(c, f"cell {i}")) for i, c in enumerate(again, 1)])
    assert joined.left == [] and joined.header is not None and joined.header.id == branch.id
    assert [event_to_json(e) for e in joined.events] == [event_to_json(e) for e in branch.events]


async def test_what_does_not_continue_the_chain_is_left_out_and_said() -> None:
    a = await conversation(3)
    c1, c2, c3 = (read_capsule(capsule_of(a.session, t), f"cell {t}") for t in (1, 2, 3))
    joined = join([("cell 1", c1), ("cell 3", c3)])
    assert joined.left == ["cell 3: the output of a cell above it was cleared"]
    joined = join([("cell 2", c2), ("cell 3", c3)])
    assert joined.header is None and joined.left[0].startswith("cell 2: its turn continues")
    joined = join([("cell 1", c1), ("cell 2", c2), ("cell 2 again", c2)])
    assert joined.left == [
        "cell 2 again: it belongs to an earlier branch (a cell above was re-run)"
    ]


def bomb(capsule: Any, lines: list[Any] | str) -> Any:
    from dsh_kernel.capsule import format as f

    text = lines if isinstance(lines, str) else json.dumps(lines)
    out = dict(capsule)
    out["events"] = base64.b64encode(zlib.compress(text.encode())).decode()
    keys = ("version", "session", "turn", "header", "first", "events", "images")
    out["sha256"] = f._digest([out[k] for k in keys])
    return out


async def test_a_run_claiming_millions_of_chunks_is_refused_before_it_is_built(
    tmp_path: Path,
) -> None:
    a = await conversation(1)
    capsule = capsule_of(a.session, 1)
    run = {"run": {"turn": 1, "step": 1, "times": [0] * 2_000_000, "codes": [1] * 2_000_000,
                   "text": "", "ends": [0] * 2_000_000}}  # fmt: skip
    path = notebook(tmp_path, [bomb(capsule, [run])])
    assert path.stat().st_size < 100_000
    with pytest.raises(CapsuleError) as info:
        notebook_capsules(path)
    assert info.value.code == CAPSULE_INVALID and "stands for more than 200,000 events" in str(
        info.value
    )


async def test_the_capsules_of_one_notebook_share_one_budget(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from dsh_kernel.capsule import format as f

    a = await conversation(3)
    monkeypatch.setattr(f, "MAX_NOTEBOOK_EVENTS", 2 * len(capsule_events(a, 1)) + 5)
    path = notebook(tmp_path, [capsule_of(a.session, t) for t in (1, 2, 3)])
    with pytest.raises(CapsuleError) as info:
        notebook_capsules(path)
    assert info.value.message.startswith("cell 3")


def capsule_events(agent: Any, turn: int) -> list[Any]:
    return read_capsule(capsule_of(agent.session, turn), "x").events


async def test_events_nested_too_deep_are_refused_in_one_line() -> None:
    a = await conversation(1)
    deep = "[" * 100_000 + '"x"' + "]" * 100_000
    with pytest.raises(CapsuleError) as info:
        read_capsule(bomb(capsule_of(a.session, 1), f"[{deep}]"), "cell 1")
    assert info.value.code == CAPSULE_INVALID and "\n" not in info.value.message
