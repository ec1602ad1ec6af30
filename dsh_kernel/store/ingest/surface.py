"""The surface fold of ingest: which messages a replacement took off the model's view, and so what
each request was actually sent.

The surface (SPINE §1.11) is the ordered list of message events the model's history is derived
from; the rules are ``dsh_kernel.session.log``'s: an ``append`` pushes the event, a
``replace{start, end}`` splices out the nodes from ``start`` to ``end`` *by position* and puts the
replacement in their place (a compaction's ``<compacted-summary>``, a pruned tool result, the note
that stands for an overflowed turn). Ingest keeps the fold in two columns of ``t_messages``:

* ``replaced_by`` — the seq of the replacement that took the message off the surface (``NULL``: the
  model still sees it);
* ``surface_key`` — its order on the surface: an appended message's own seq, a replacement the key
  of the first node it replaced. The nodes on the surface at any moment, sorted by key, are the
  surface in order: an appended key is above every earlier key, and a replacement's key lies between
  its neighbours' because the node it takes it from leaves.

So the surface just before event ``X`` is the messages with ``seq < X`` and ``replaced_by`` ``NULL``
or above ``X``, in ``surface_key`` order; and the history a request sent (``message_count``, the
estimated input tokens) is a running sum of per-message deltas (``_m.dn``, ``_m.dt``): an append
adds itself, a replacement adds itself and takes off what it shadowed.

**Incremental.** A batch without a replacement needs nothing from here: every delta is the message
itself, set in SQL (``statements``). A batch with one (``fold_batch``) loads, for each session with
a replacement in the batch, only the nodes now on its surface (``replaced_by IS NULL``: a compacted
session's surface stays short however long its log grows), folds the batch's messages in log order,
and writes back the keys and deltas of the batch's replacements and ``replaced_by`` of the nodes
they shadowed.

A replacement whose range is not a range of surface nodes (a journal ``Session`` would have
refused) shadows nothing and is placed at the end, so one bad line never stops an ingest.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

import duckdb

__all__ = ["fold_batch"]

NEEDED = "SELECT count(*) FROM _m WHERE surface_op = 'replace'"


@dataclass(slots=True)
class _Surface:
    """One session's surface: node seqs in order, and each node's key and (counted, tokens)."""

    seqs: list[int] = field(default_factory=list[int])
    key: dict[int, int] = field(default_factory=dict[int, int])
    weight: dict[int, tuple[int, int]] = field(default_factory=dict[int, tuple[int, int]])


@dataclass(slots=True)
class _Fold:
    """What a fold changed: per replacement ``(session, seq, key, dn, dt)``, per shadowed node
    ``(session, seq, replaced_by)``."""

    placed: list[tuple[str, int, int, int, int]] = field(
        default_factory=list[tuple[str, int, int, int, int]]
    )
    shadowed: list[tuple[str, int, int]] = field(default_factory=list[tuple[str, int, int]])


def _fold(
    sid: str,
    surface: _Surface,
    rows: Iterable[tuple[int, str, bool, int, int | None, int | None]],
    out: _Fold,
) -> None:
    """Fold ``rows`` — ``(seq, surface_op, has_content, est_tokens, start, end)`` in log order —
    onto ``surface``, recording every replacement and what it shadowed in ``out``."""
    for seq, op, has_content, est, start, end in rows:
        weight = (1, est) if has_content else (0, 0)
        surface.weight[seq] = weight
        if op != "replace":
            surface.seqs.append(seq)
            surface.key[seq] = seq
            continue
        seqs = surface.seqs
        try:
            i = seqs.index(start) if start is not None else -1
            j = seqs.index(end) if end is not None else -1
        except ValueError:
            i = j = -1
        if i < 0 or j < i:  # not a range of surface nodes: shadows nothing
            seqs.append(seq)
            surface.key[seq] = seq
            out.placed.append((sid, seq, seq, weight[0], weight[1]))
            continue
        gone = seqs[i : j + 1]
        key = surface.key[gone[0]]
        seqs[i : j + 1] = [seq]
        surface.key[seq] = key
        dn, dt = weight
        for s in gone:
            n, t = surface.weight[s]
            dn, dt = dn - n, dt - t
            out.shadowed.append((sid, s, seq))
        out.placed.append((sid, seq, key, dn, dt))


def _batch_rows(
    con: duckdb.DuckDBPyConnection, sql: str, sids: list[str]
) -> dict[str, list[tuple[int, str, bool, int, int | None, int | None]]]:
    by_sid: dict[str, list[tuple[int, str, bool, int, int | None, int | None]]] = {}
    for sid, seq, op, has_content, est, start, end in con.execute(sql, [sids]).fetchall():
        by_sid.setdefault(str(sid), []).append(
            (int(seq), str(op), bool(has_content), int(est or 0), start, end)
        )
    return by_sid


_BATCH_MESSAGES = """
SELECT m.session_id, m.seq, m.surface_op, m.has_content, m.est_tokens,
       TRY_CAST(r.surface_op ->> '$.start' AS INTEGER), TRY_CAST(r.surface_op ->> '$.end' AS INTEGER)
FROM _m m JOIN _raw r ON r.session_id = m.session_id AND r.seq = m.seq
WHERE m.session_id IN (SELECT unnest($1::VARCHAR[]))
ORDER BY m.session_id, m.seq
"""

_LIVE = """
SELECT session_id, seq, surface_key, has_content, est_tokens FROM t_messages
WHERE session_id IN (SELECT unnest($1::VARCHAR[])) AND replaced_by IS NULL
ORDER BY session_id, surface_key
"""


def fold_batch(con: duckdb.DuckDBPyConnection) -> int:
    """Fold the batch's messages (``_m``, not yet in ``t_messages``) onto the surfaces they
    continue, where the batch holds a replacement (module docstring). Returns the replacements
    folded."""
    row = con.execute(NEEDED).fetchone()
    if not row or not row[0]:
        return 0
    sids = [
        str(r[0])
        for r in con.execute(
            "SELECT DISTINCT session_id FROM _m WHERE surface_op = 'replace'"
        ).fetchall()
    ]
    surfaces: dict[str, _Surface] = {sid: _Surface() for sid in sids}
    for sid, seq, key, has_content, est in con.execute(_LIVE, [sids]).fetchall():
        surface = surfaces[str(sid)]
        surface.seqs.append(int(seq))
        surface.key[int(seq)] = int(key if key is not None else seq)
        surface.weight[int(seq)] = (1, int(est or 0)) if has_content else (0, 0)
    out = _Fold()
    for sid, rows in _batch_rows(con, _BATCH_MESSAGES, sids).items():
        _fold(sid, surfaces[sid], rows, out)
    _write(con, out)
    return len(out.placed)


def _write(con: duckdb.DuckDBPyConnection, out: _Fold) -> None:
    """Write the fold back: onto ``_m`` (the batch's keys, deltas and its own shadowed rows) and
    ``t_messages`` (the rows of earlier batches it shadowed)."""
    if out.placed:
        con.execute(
            "CREATE OR REPLACE TEMP TABLE _placed AS SELECT unnest($1::VARCHAR[]) AS session_id, "
            "unnest($2::INTEGER[]) AS seq, unnest($3::INTEGER[]) AS surface_key, "
            "unnest($4::INTEGER[]) AS dn, unnest($5::BIGINT[]) AS dt",
            [list(c) for c in zip(*out.placed, strict=True)],
        )
        con.execute(
            "UPDATE _m SET surface_key = p.surface_key, dn = p.dn, dt = p.dt FROM _placed p "
            "WHERE _m.session_id = p.session_id AND _m.seq = p.seq"
        )
    if out.shadowed:
        con.execute(
            "CREATE OR REPLACE TEMP TABLE _shadowed AS SELECT unnest($1::VARCHAR[]) AS session_id, "
            "unnest($2::INTEGER[]) AS seq, unnest($3::INTEGER[]) AS replaced_by",
            [list(c) for c in zip(*out.shadowed, strict=True)],
        )
        for t in ("_m", "t_messages"):
            con.execute(
                f"UPDATE {t} SET replaced_by = s.replaced_by FROM _shadowed s "
                f"WHERE {t}.session_id = s.session_id AND {t}.seq = s.seq"
            )
