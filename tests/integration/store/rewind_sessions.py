"""Sessions whose chat cells were re-run (issue 33), for the store tests and docs/queries.md.

The journals are written event by event with ``Session.append`` through a real journal writer, in
the shapes the kernel logs: each user message of a chat cell names its cell in its source
(``UserSource(extra={"cellId", "context"?})``), a rewind is a ``fork(..., kind="rewind")`` whose first
user message carries ``context.branch``, and a turn taken out of the context gets a ``rewind``
plugin note replacing its surface nodes.

* parent P: turns 1-3 asked by cells c1, c2, c3;
* rewind R (cell c2 re-run): forked after P's turn 1, replaces P's turn 2, drops 2 and 3; its own
  turn 2 (c2), turn 3 (c4); then c4 re-run at the end: turn 3 left out (rerun) and turn 4 asked
  again by c4; cell c1 deleted: the copied turn 1 left out (below, then deleted — the newest wins);
* rewind G of R (c4 re-run): a grandchild of P, forked after R's turn 2;
* policy fork Y of P, and an old fork O of P whose header has no ``parentKind``;
* a fork X of a session the store no longer holds.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable, Sequence
from pathlib import Path

from dsh_kernel.ids import MessageId
from dsh_kernel.jsonvalue import JsonObject
from dsh_kernel.kernel.rewind import REWIND_PLUGIN
from dsh_kernel.llm.codec import message_to_json
from dsh_kernel.llm.types import Message, ModelSource, PluginSource, TextBlock, UserSource
from dsh_kernel.session.events import ReplaceOp, SessionHeader
from dsh_kernel.session.log import Session
from dsh_kernel.store.journal import JournalWriter, attach_journal
from dsh_kernel.store.layout import Store
from dsh_kernel.store.sessions import fork

P = "00000033-0000-4000-8000-000000000001"
R = "00000033-0000-4000-8000-000000000002"
G = "00000033-0000-4000-8000-000000000003"
Y = "00000033-0000-4000-8000-000000000004"
O = "00000033-0000-4000-8000-000000000005"  # noqa: E741
GONE = "00000033-0000-4000-8000-000000000006"
X = "00000033-0000-4000-8000-000000000007"
T0 = 1_767_225_600_000


def clock(start: int) -> Callable[[], int]:
    return itertools.count(start, 10).__next__


def turn(
    s: Session, n: int, cell: str | None, text: str, context: JsonObject | None = None
) -> None:
    """One whole turn asked by ``cell`` (``None``: not from a chat cell), answered in one step."""
    extra: JsonObject = {}
    if cell is not None:
        extra["cellId"] = cell
    if context is not None:
        extra["context"] = context
    s.append("turn/start", {"turn": n})
    user = Message(
        id=MessageId(f"u-{s.id[-1]}-{n}"),
        role="user",
        content=(TextBlock(text=text),),
        source=UserSource(extra=extra),
    )
    s.append("user/message", message_to_json(user), surface_op="append")
    s.append("step/start", {"turn": n, "step": 1})
    answer = Message(
        id=MessageId(f"a-{s.id[-1]}-{n}"),
        role="assistant",
        content=(TextBlock(text=f"answer {n}"),),
        source=ModelSource(provider="scripted", model="m1"),
    )
    data: JsonObject = {"turn": n, "step": 1, "message": message_to_json(answer)}
    s.append("assistant/message", data, surface_op="append")
    s.append("step/end", {"turn": n, "step": 1})
    s.append("turn/end", {"turn": n, "reason": {"kind": "completed"}})


def leave_out(
    s: Session, n: int, why: str, cell: str | None = None, nodes: Sequence[int] = ()
) -> int:
    """The rewind note taking turn ``n`` out of the model's context: it replaces the turn's nodes
    on the surface (or ``nodes``: the note that already stands for them). Returns its seq."""
    nodes = list(nodes) or [seq for seq in s.surface if s.turn_at(seq) == n]
    form: JsonObject = {"kind": "left-out", "turn": n, "why": why}
    if cell is not None:
        form["cellId"] = cell
    note = Message(
        id=MessageId(f"note-{s.id[-1]}-{n}-{why}"),
        role="user",
        content=(TextBlock(text=f"(turn {n} left out: {why})"),),
        source=PluginSource(plugin=REWIND_PLUGIN, form=form),
    )
    return s.append(
        "user/message",
        message_to_json(note),
        surface_op=ReplaceOp(start=nodes[0], end=nodes[-1]),
        source_event_seqs=nodes,
    ).seq


def branch_context(
    parent: str, at: int, replaces: int | None, dropped: Sequence[tuple[int, str, str]]
) -> JsonObject:
    branch: JsonObject = {
        "session": parent,
        "turn": at,
        "dropped": [{"turn": t, "cellId": c, "why": w} for t, c, w in dropped],
    }
    if replaces is not None:
        branch["replaces"] = replaces
    return {"order": "notebook", "branch": branch, "names": ["df", "model"]}


def record_rewind_sessions(store: Store) -> dict[str, JournalWriter]:
    writers: dict[str, JournalWriter] = {}

    def start(s: Session) -> Session:
        writers[s.id] = attach_journal(s, store)
        return s

    p = start(Session(header=SessionHeader(id=P, created_at=T0, cwd="/w"), clock=clock(T0)))
    for n, cell in ((1, "c1"), (2, "c2"), (3, "c3")):
        turn(p, n, cell, f"question {n}")

    # c2 re-run: a rewind forked after turn 1
    r = start(fork(p.header, list(p.events), 1, new_id=R, clock=clock(T0 + 10_000), kind="rewind"))
    ctx = branch_context(P, 1, 2, [(2, "c2", "rerun"), (3, "c3", "below")])
    turn(r, 2, "c2", "question 2, again", ctx)
    turn(r, 3, "c4", "question 4")
    # c4 re-run at the end: its turn leaves the context in place, and it is asked again
    leave_out(r, 3, "rerun", "c4")
    turn(
        r,
        4,
        "c4",
        "question 4, again",
        {"order": "notebook", "left": [{"turn": 3, "cellId": "c4", "why": "rerun"}]},
    )
    # the copied turn 1: left out below a re-run, then its cell deleted — the newest note says why
    first = leave_out(r, 1, "below", "c1")
    leave_out(r, 1, "deleted", "c1", nodes=[first])

    # a rewind of the rewind (c4 re-run again, after R's turn 2): P's grandchild
    g = start(fork(r.header, list(r.events), 2, new_id=G, clock=clock(T0 + 20_000), kind="rewind"))
    turn(
        g,
        3,
        "c4",
        "question 4, third time",
        branch_context(R, 2, 3, [(3, "c4", "rerun"), (4, "c4", "rerun")]),
    )

    y = start(fork(p.header, list(p.events), 3, new_id=Y, clock=clock(T0 + 30_000), kind="policy"))
    turn(y, 4, "c5", "question 5")
    o = start(fork(p.header, list(p.events), 2, new_id=O, clock=clock(T0 + 40_000)))
    turn(o, 3, None, "typed at the console")

    gone = start(Session(header=SessionHeader(id=GONE, created_at=T0, cwd="/w"), clock=clock(T0)))
    turn(gone, 1, "k1", "lost")
    x = start(fork(gone.header, list(gone.events), 1, new_id=X, clock=clock(T0 + 5_000)))
    turn(x, 2, "k2", "kept")
    for w in writers.values():
        w.close()
    _drop_parent_kind(writers[O].path)  # O: a journal written before parentKind was recorded
    writers[GONE].path.unlink()  # X's parent is no longer in the store
    return writers


def _drop_parent_kind(path: Path) -> None:
    header, rest = path.read_text(encoding="utf-8").split("\n", 1)
    obj = json.loads(header)
    assert obj.pop("parentKind") == "fork"
    path.write_text(json.dumps(obj) + "\n" + rest, encoding="utf-8")
