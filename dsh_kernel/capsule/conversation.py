"""The conversation a notebook carries: its chat cells' capsules joined into one session's log.

``notebook_capsules(path)`` reads a saved notebook and returns, in the notebook's order, each code
cell output's capsule (``capsule.format``) with where it is ("cell 4 (id ab12…)"), checked:
``CapsuleError`` for the first that is malformed or altered. ``join(capsules)`` joins them into
the log of the conversation the cells present hold:

* the chain starts at a capsule whose ``first`` is 0 (a session's first turn) and goes on with each
  capsule that continues it seq for seq — the next turn of the same session, or the first turn of a
  branch (a rewind: issue 33) whose seed is as long as the log so far (its parent may be a session
  no capsule names: an import's, re-run on the machine that imported it);
* a capsule that does not continue the chain is left out, and said: the output of a cell whose
  turn a rewind superseded (it belongs to the earlier branch), or a turn after a cell whose output
  was cleared (the chain has a gap there).

The log is then a seed: ``imported_session`` makes a new session of it, ``parent_session`` the
session it continues and ``parent_kind = 'import'`` (never mistaken for a local session: what it
holds is self-reported), and a new turn continues it with its full context.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final, cast

from dsh_kernel.capsule import CAPSULE_KEY
from dsh_kernel.capsule.format import CAPSULE_INVALID, Budget, Capsule, CapsuleError, read_capsule
from dsh_kernel.errors import DshError
from dsh_kernel.ids import new_session_id
from dsh_kernel.jsonvalue import JsonObject, JsonValue
from dsh_kernel.session.events import SessionEvent, SessionHeader
from dsh_kernel.session.log import Clock, Session, wall_clock_ms

MAX_NOTEBOOK_BYTES: Final = 512_000_000
"""A saved notebook larger than this is not read for capsules."""


def _where(index: int, cell: JsonObject) -> str:
    cid = cell.get("id")
    return f"cell {index + 1}" + (f" (id {cid})" if isinstance(cid, str) and cid else "")


def capsules_of(notebook: JsonValue) -> list[tuple[str, JsonValue]]:
    """Each code cell output's capsule of a notebook's JSON, in order, with where it is."""
    cells = notebook.get("cells") if isinstance(notebook, dict) else None
    out: list[tuple[str, JsonValue]] = []
    for i, cell in enumerate(cells if isinstance(cells, list) else []):
        if not isinstance(cell, dict) or cell.get("cell_type") != "code":
            continue
        outputs = cell.get("outputs")
        for output in outputs if isinstance(outputs, list) else []:
            meta = output.get("metadata") if isinstance(output, dict) else None
            if isinstance(meta, dict) and CAPSULE_KEY in meta:
                out.append((_where(i, cast("JsonObject", cell)), meta[CAPSULE_KEY]))
    return out


def notebook_capsules(path: str | os.PathLike[str]) -> list[tuple[str, Capsule]]:
    """The checked capsules of the notebook saved at ``path``, in order (module docstring)."""
    p = Path(path)
    try:
        if p.stat().st_size > MAX_NOTEBOOK_BYTES:
            raise CapsuleError(
                f"{p}: the notebook is larger than {MAX_NOTEBOOK_BYTES:,} bytes; its capsules are "
                "not read",
                code=CAPSULE_INVALID,
            )
        notebook = json.loads(p.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise CapsuleError(
            f"{p}: the notebook cannot be read for its capsules ({exc})", code=CAPSULE_INVALID
        ) from exc
    budget = Budget()  # what all of them may unpack to, together
    return [(where, read_capsule(raw, where, budget)) for where, raw in capsules_of(notebook)]


@dataclass(slots=True)
class Joined:
    """The log the capsules of a notebook's cells hold (``join``)."""

    header: SessionHeader | None = None
    """The header of the session the log is (the last capsule taken)."""
    events: list[SessionEvent] = field(default_factory=list[SessionEvent])
    turns: list[str] = field(default_factory=list[str])
    """Where each capsule taken is."""
    left: list[str] = field(default_factory=list[str])
    """Each capsule left out: where, and why."""


def join(capsules: list[tuple[str, Capsule]]) -> Joined:
    """Join ``capsules`` (in the notebook's order) into one log (module docstring)."""
    out = Joined()
    for where, c in capsules:
        header = out.header
        if header is None:
            if c.first != 0:
                out.left.append(
                    f"{where}: its turn continues a conversation whose start is not here"
                )
                continue
        elif c.first != len(out.events):
            why = (
                "the output of a cell above it was cleared"
                if c.first > len(out.events)
                else ("it belongs to an earlier branch (a cell above was re-run)")
            )
            out.left.append(f"{where}: {why}")
            continue
        elif c.session != header.id and c.header.seed_length != c.first:
            out.left.append(f"{where}: its turn belongs to another conversation")
            continue
        out.header = c.header
        out.events.extend(c.events)
        out.turns.append(where)
    return out


def imported_session(
    joined: Joined,
    *,
    notebook: str | None,
    user: str | None,
    ai_policy: str | None,
    clock: Clock | None = None,
) -> Session | None:
    """A new session seeded with ``joined``'s log, linked to the session it continues
    (``parent_kind = 'import'``); ``None`` when nothing was joined."""
    source = joined.header
    if source is None or not joined.events:
        return None
    header = SessionHeader(
        id=new_session_id(),
        created_at=(clock or wall_clock_ms)(),
        cwd=os.getcwd(),
        notebook=notebook if notebook is not None else source.notebook,
        parent_session=source.id,
        parent_kind="import",
        seed_length=len(joined.events),
        user=user,
        ai_policy=ai_policy,
    )
    try:
        return Session(header=header, seed=joined.events, clock=clock)
    except (DshError, RecursionError) as exc:
        why = exc.message if isinstance(exc, DshError) else "events nested too deep"
        cells = ", ".join(joined.turns[:3]) + (" …" if len(joined.turns) > 3 else "")
        raise CapsuleError(
            f"the session capsules of {cells} hold a log the kernel refuses ({why}); nothing of "
            "them is used — clear those cells' outputs or strip the capsules (`dsh-kernel strip`) "
            "to go on without them",
            code=CAPSULE_INVALID,
        ) from exc
