"""The SQL by which ingest stores images (a part of ``ingest_sql``'s derive steps; issue 15).

An ``image`` block in a message names its bytes by ``sha256``; the bytes are the session's
``image/data`` event (base64), written once per session and hash before the first message that refers
to them. In the database:

* ``t_events.data`` of an ``image/data`` row keeps ``sha256`` and ``mediaType`` but not the base64
  (``STRIPPED_DATA``): the events view, the Parquet export of events and every scan of ``t_events``
  stay light however many images a session holds;
* ``t_image_data`` holds the decoded bytes once per hash, store-wide (``IMAGE_DATA``): a fork's seeded
  copy, or the same plot in two sessions, adds nothing. Bytes whose sha256 is not the one their event
  names (a hand-edited journal), or that are not base64, are not stored — the image's ``stored`` is
  false then, and the journal still holds whatever it held;
* ``t_images`` has one row per image block of an appended ``user/message`` or ``tool/result``
  (``IMAGES``), with the call id of the tool result that holds it (``NULL`` for an image attached to a
  user message) and its 1-based position among the message's images. Only messages whose text names
  an ``"image"`` are parsed, so a batch without images pays one substring test per message.

Re-ingesting a journal from scratch deletes its ``t_images`` rows (``ingest_sql.RESET_SESSIONS``) and
inserts them again; ``t_image_data`` rows are content-addressed and never deleted.
"""

from __future__ import annotations

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

IMAGE_DATA = """
INSERT INTO t_image_data
SELECT sha256, any_value(media_type), any_value(bytes)
FROM (
    SELECT lower(data ->> '$.sha256') AS sha256, data ->> '$.mediaType' AS media_type,
           try(from_base64(data ->> '$.data')) AS bytes
    FROM _raw WHERE type = 'image/data'
)
WHERE bytes IS NOT NULL AND sha256(bytes) = sha256
GROUP BY sha256
ON CONFLICT DO NOTHING
"""
