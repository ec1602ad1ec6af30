-- Migration m0005_images, second part: for the rows ingested before m0005, what ingest does for every
-- later row, the same way: the bytes of each image/data event into t_image_data (only where they decode
-- and match their sha256), the base64 taken out of t_events.data, and one t_images row per image block
-- of an appended user/message or tool/result. Shipped: never edit, add a migration instead.

INSERT INTO t_image_data
SELECT sha256, any_value(media_type), any_value(bytes)
FROM (
    SELECT lower(data ->> '$.sha256') AS sha256, data ->> '$.mediaType' AS media_type,
           try(from_base64(data ->> '$.data')) AS bytes
    FROM t_events WHERE type = 'image/data'
)
WHERE bytes IS NOT NULL AND sha256(bytes) = sha256
GROUP BY sha256
ON CONFLICT DO NOTHING;

UPDATE t_events SET data = json_merge_patch(data, '{"data": null}') WHERE type = 'image/data';

INSERT INTO t_images
WITH src AS MATERIALIZED (
    SELECT session_id, seq, turn, step, time_ms, seeded,
           CASE WHEN type = 'user/message' THEN json_transform(data, '{"source": {"kind": "VARCHAR", "callId": "VARCHAR"}, "content": [{"type": "VARCHAR", "toolCallId": "VARCHAR", "sha256": "VARCHAR", "mediaType": "VARCHAR", "width": "INTEGER", "height": "INTEGER", "bytes": "BIGINT", "description": "VARCHAR", "reduction": "VARCHAR", "content": [{"type": "VARCHAR", "sha256": "VARCHAR", "mediaType": "VARCHAR", "width": "INTEGER", "height": "INTEGER", "bytes": "BIGINT", "description": "VARCHAR", "reduction": "VARCHAR"}]}]}')
                ELSE json_transform(data, '{"message": {"source": {"kind": "VARCHAR", "callId": "VARCHAR"}, "content": [{"type": "VARCHAR", "toolCallId": "VARCHAR", "sha256": "VARCHAR", "mediaType": "VARCHAR", "width": "INTEGER", "height": "INTEGER", "bytes": "BIGINT", "description": "VARCHAR", "reduction": "VARCHAR", "content": [{"type": "VARCHAR", "sha256": "VARCHAR", "mediaType": "VARCHAR", "width": "INTEGER", "height": "INTEGER", "bytes": "BIGINT", "description": "VARCHAR", "reduction": "VARCHAR"}]}]}}').message END AS m
    FROM t_events
    WHERE type IN ('user/message', 'tool/result') AND surface_op ->> '$' = 'append'
      AND contains(CAST(data AS VARCHAR), '"image"')
),
found AS (
    SELECT session_id, seq, turn, step, time_ms, seeded, m.source.kind AS source,
           flatten([CASE
               WHEN b.type = 'image' THEN [{'call': NULL::VARCHAR, 'sha256': lower(b.sha256), 'media_type': b.mediaType, 'width': b.width, 'height': b.height, 'bytes': b.bytes, 'description': b.description, 'reduction': b.reduction}]
               WHEN b.type = 'tool-result' THEN [{'call': coalesce(b.toolCallId, m.source.callId), 'sha256': lower(c.sha256), 'media_type': c.mediaType, 'width': c.width, 'height': c.height, 'bytes': c.bytes, 'description': c.description, 'reduction': c.reduction} FOR c IN coalesce(b.content, []) IF c.type = 'image']
               ELSE [] END FOR b IN coalesce(m.content, [])]) AS l
    FROM src
),
flat AS (
    SELECT *, unnest(l) AS x, generate_subscripts(l, 1) AS position FROM found
)
SELECT session_id, seq, turn, step, time_ms, source, x.call, position::INTEGER, x.sha256,
       x.media_type, x.width, x.height, x.bytes, x.description, x.reduction, coalesce(seeded, false)
FROM flat;
