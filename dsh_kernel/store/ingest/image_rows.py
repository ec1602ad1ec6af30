"""How ingest stores images: run after ``statements``' derive steps, for a batch that
``IMAGES_NEEDED`` says has image bytes or messages that may hold image blocks.

An ``image`` block in a message names its bytes by ``sha256``; the bytes are the session's
``image/data`` event (base64), written once per session and hash before the first message that refers
to them. In the database:

* ``t_events.data`` of an ``image/data`` row keeps ``sha256`` and ``mediaType`` but not the base64
  (``STRIPPED_DATA``): the events view, the Parquet export of events and every scan of ``t_events``
  stay light however many images a session holds;
* ``t_image_data`` holds the decoded bytes once per hash, store-wide (``store_image_data``, after
  the SQL steps): a fork's seeded copy, or the same plot in two sessions, adds nothing. Bytes whose
  sha256 is not the one their event names (a hand-edited journal), or that are not base64, are not
  stored — the image's ``stored`` is false then, and the journal still holds whatever it held;
* ``t_images`` has one row per image block of an appended ``user/message`` or ``tool/result``
  (``IMAGES``), with the call id of the tool result that holds it (``NULL`` for an image attached to a
  user message) and its 1-based position among the message's images. Only messages whose text names
  an ``"image"`` are parsed, so a batch without images pays one substring test per message.

Re-ingesting a journal from scratch deletes its ``t_images`` rows (``statements.RESET_SESSIONS``) and
inserts them again; ``t_image_data`` rows are content-addressed and never deleted.
"""

from __future__ import annotations

import hashlib

import duckdb

_IMAGE_FIELDS = (
    '"sha256": "VARCHAR", "mediaType": "VARCHAR", "width": "INTEGER", "height": "INTEGER", '
    '"bytes": "BIGINT", "description": "VARCHAR", "reduction": "VARCHAR"'
)

# One shape for both kinds of message: a user message's image blocks are top-level, a tool result's
# are inside its tool-result block.
_SHAPE = (
    '{"source": {"kind": "VARCHAR", "callId": "VARCHAR"}, "content": [{"type": "VARCHAR", '
    '"toolCallId": "VARCHAR", '
    + _IMAGE_FIELDS
    + ', "content": [{"type": "VARCHAR", '
    + _IMAGE_FIELDS
    + "}]}]}"
)


def _image(alias: str, call: str) -> str:
    """The struct literal of one found image (the same type for both kinds of block)."""
    return (
        f"{{'call': {call}, 'sha256': lower({alias}.sha256), 'media_type': {alias}.mediaType, "
        f"'width': {alias}.width, 'height': {alias}.height, 'bytes': {alias}.bytes, "
        f"'description': {alias}.description, 'reduction': {alias}.reduction}}"
    )


STRIPPED_DATA = "CASE WHEN {p}type = 'image/data' THEN json_merge_patch({p}data, '{{\"data\": null}}') ELSE {p}data END"
"""The ``data`` kept in ``t_events``; format with ``p`` the column prefix (``""`` or ``"r."``)."""

IMAGES = (
    """
INSERT INTO t_images
WITH src AS MATERIALIZED (
    SELECT session_id, seq, turn, step, time_ms, seeded,
           CASE WHEN type = 'user/message' THEN json_transform(data, '"""
    + _SHAPE
    + """')
                ELSE json_transform(data, '{"message": """
    + _SHAPE
    + """}').message END AS m
    FROM _ev
    WHERE type IN ('user/message', 'tool/result') AND surface_op ->> '$' = 'append'
      AND contains(CAST(data AS VARCHAR), '"image"')
),
found AS (
    SELECT session_id, seq, turn, step, time_ms, seeded, m.source.kind AS source,
           flatten([CASE
               WHEN b.type = 'image' THEN ["""
    + _image("b", "NULL::VARCHAR")
    + """]
               WHEN b.type = 'tool-result' THEN ["""
    + _image("c", "coalesce(b.toolCallId, m.source.callId)")
    + """ FOR c IN coalesce(b.content, []) IF c.type = 'image']
               ELSE [] END FOR b IN coalesce(m.content, [])]) AS l
    FROM src
),
flat AS (
    SELECT *, unnest(l) AS x, generate_subscripts(l, 1) AS position FROM found
)
SELECT session_id, seq, turn, step, time_ms, source, x.call, position::INTEGER, x.sha256,
       x.media_type, x.width, x.height, x.bytes, x.description, x.reduction, seeded
FROM flat
"""
)

# Whether the batch has image bytes, and messages that may carry image blocks: a batch with neither
# skips both steps (a block whose bytes came in an earlier batch still gets its row).
IMAGES_NEEDED = """
SELECT (SELECT count(*) FROM _raw WHERE type = 'image/data'),
       (SELECT count(*) FROM _m WHERE event_type IN ('user/message', 'tool/result') AND image_text)
"""

# The bytes of this batch's image/data events, decoded (one parse of each event's large data for its
# three fields; NULL when not base64). Neither sorted nor joined here: either would move the bytes.
_CANDIDATES = """
CREATE OR REPLACE TEMP TABLE _img AS
SELECT session_id, seq, lower(v[1]) AS sha256, v[2] AS media_type, try(from_base64(v[3])) AS bytes
FROM (SELECT session_id, seq,
             json_extract_string(data, ['$.sha256', '$.mediaType', '$.data']) AS v
      FROM _raw WHERE type = 'image/data')
"""

_KNOWN = "SELECT DISTINCT sha256 FROM _img SEMI JOIN t_image_data USING (sha256)"

_KEEP = """
INSERT INTO t_image_data
SELECT i.sha256, i.media_type, i.bytes
FROM _img i JOIN (SELECT unnest($1::VARCHAR[]) AS session_id, unnest($2::INTEGER[]) AS seq) k
  USING (session_id, seq)
"""


def store_image_data(con: duckdb.DuckDBPyConnection) -> int:
    """Add the bytes of the batch's images new to the store to ``t_image_data``, each under its
    hash when it is the hash of the bytes (of several copies of a hash, the first in log order that
    is); returns how many were added.

    The hash is checked here, not in SQL: DuckDB's ``sha256`` ran at about 70 MB/s where
    ``hashlib``'s runs at over 1 GB/s (5 MB of images: 70 ms against 3 ms), and only images new to
    the store are checked, each once. A producer whose block names the wrong hash (a bug: the hash
    is the bytes') shows as ``images.stored`` false."""
    con.execute(_CANDIDATES)
    known = {str(r[0]) for r in con.execute(_KNOWN).fetchall()}
    rows = con.execute("SELECT session_id, seq, sha256, bytes FROM _img").fetchall()
    keep: dict[str, tuple[str, int]] = {}
    for sid, seq, sha256, data in sorted(rows, key=lambda r: (str(r[0]), int(r[1]))):
        if sha256 in known or sha256 in keep or data is None:
            continue
        if hashlib.sha256(data).hexdigest() == sha256:
            keep[str(sha256)] = (str(sid), int(seq))
    if keep:
        con.execute(_KEEP, [[k[0] for k in keep.values()], [k[1] for k in keep.values()]])
    return len(keep)
