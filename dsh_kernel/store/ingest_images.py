"""How ingest stores images (a part of ``ingest_sql``'s derive steps; issue 15).

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

Re-ingesting a journal from scratch deletes its ``t_images`` rows (``ingest_sql.RESET_SESSIONS``) and
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

IMAGES_NEEDED = "SELECT count(*) FROM _raw WHERE type = 'image/data'"

# The bytes of this batch's image/data events whose hash the store does not hold yet, decoded (one
# parse of each event's large data for its three fields), one copy per hash; ``store_image_data``
# then takes back the few whose bytes are not what their hash says.
_INSERT = """
INSERT INTO t_image_data
SELECT DISTINCT ON (sha256) sha256, media_type, bytes
FROM (
    SELECT lower(v[1]) AS sha256, v[2] AS media_type, try(from_base64(v[3])) AS bytes
    FROM (SELECT json_extract_string(data, ['$.sha256', '$.mediaType', '$.data']) AS v
          FROM _raw WHERE type = 'image/data')
) x
WHERE bytes IS NOT NULL AND NOT EXISTS (SELECT 1 FROM t_image_data d WHERE d.sha256 = x.sha256)
RETURNING sha256, data
"""


def store_image_data(con: duckdb.DuckDBPyConnection) -> int:
    """Add the bytes of the batch's new images to ``t_image_data`` under their hash, and take back
    any whose bytes do not have that hash; returns how many were kept.

    The hash is checked here, not in SQL: DuckDB's ``sha256`` ran at about 70 MB/s where
    ``hashlib``'s runs at over 1 GB/s (5 MB of images: 70 ms against 3 ms), and only images new to
    the store reach this check, each once. A hash with both a forged and a true copy in one batch
    keeps neither until a later batch brings a true one (journals written by a ``Session`` never
    have a forged one)."""
    if con.execute(IMAGES_NEEDED).fetchone() == (0,):
        return 0
    added = con.execute(_INSERT).fetchall()
    bad = [str(h) for h, data in added if hashlib.sha256(data).hexdigest() != h]
    if bad:
        con.execute(
            "DELETE FROM t_image_data WHERE sha256 IN (SELECT unnest($1::VARCHAR[]))", [bad]
        )
    return len(added) - len(bad)
