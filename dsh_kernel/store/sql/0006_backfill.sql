-- Migration m0006_compaction, last part: run after ingest_surface.backfill has folded the surface of
-- the rows ingested before m0006 (surface_key and replaced_by of every message; _refolded names the
-- sessions that hold a replacement — an overflowed turn's note, written before compaction existed).
-- For those sessions, what ingest computes for every later row: each attempt's history sent (the
-- messages on the surface when it was made) and the surface carried over to the next batch; and for
-- every session, a t_compaction_calls row per summary call (ingest_calls, the same way).
-- Shipped: never edit, add a migration instead.

UPDATE t_attempts SET message_count = x.n, est_input_tokens = x.tokens
FROM (
    SELECT a.session_id, a.turn, a.step, a.attempt, count(m.seq)::INTEGER AS n,
           coalesce(sum(m.est_tokens), 0)::BIGINT AS tokens
    FROM t_attempts a
    LEFT JOIN t_messages m
        ON m.session_id = a.session_id AND m.seq < a.first_seq AND m.has_content
       AND (m.replaced_by IS NULL OR m.replaced_by > a.first_seq)
    WHERE a.session_id IN (SELECT session_id FROM _refolded)
    GROUP BY ALL
) x
WHERE t_attempts.session_id = x.session_id AND t_attempts.turn = x.turn AND t_attempts.step = x.step
  AND t_attempts.attempt = x.attempt;

UPDATE _ingest_state SET messages = x.n, message_tokens = x.tokens
FROM (
    SELECT session_id, count(*)::INTEGER AS n, sum(est_tokens)::BIGINT AS tokens
    FROM t_messages
    WHERE has_content AND replaced_by IS NULL AND session_id IN (SELECT session_id FROM _refolded)
    GROUP BY session_id
) x
WHERE _ingest_state.session_id = x.session_id AND _ingest_state.error IS NULL;

INSERT INTO t_compaction_calls
WITH s AS (
    SELECT session_id, seq, time_ms, turn, step, seeded, data, data ->> '$.compactionId' AS cid
    FROM t_events WHERE type = 'compaction/summary' AND (data ->> '$.provider') IS NOT NULL
),
started AS (
    SELECT e.session_id, e.data ->> '$.compactionId' AS cid, min(e.time_ms) AS start_ms
    FROM t_events e SEMI JOIN s ON s.session_id = e.session_id
    WHERE e.type = 'compaction/start'
    GROUP BY ALL
),
sent AS (
    SELECT x.session_id, x.seq, count(*) AS n
    FROM (SELECT session_id, seq, unnest(TRY_CAST(data -> '$.shadowedSeqs' AS INTEGER[])) AS node FROM s) x
    JOIN t_messages m ON m.session_id = x.session_id AND m.seq = x.node
    WHERE m.has_content
    GROUP BY ALL
),
hdr AS (
    SELECT s.session_id, s.seq, max(e.seq) AS header_seq
    FROM s JOIN t_events e ON e.session_id = s.session_id AND e.seq < s.seq
    WHERE e.type = 'request/header'
    GROUP BY ALL
)
SELECT s.session_id, s.seq, s.cid, s.turn, s.step, coalesce(st.start_ms, s.time_ms), s.time_ms,
       s.data ->> '$.provider', s.data ->> '$.model', TRY_CAST(s.data ->> '$.maxTokens' AS BIGINT),
       s.data ->> '$.failure.code', s.data ->> '$.failure.message',
       TRY_CAST(s.data ->> '$.usage.inputTokens' AS BIGINT),
       TRY_CAST(s.data ->> '$.usage.cacheReadTokens' AS BIGINT),
       TRY_CAST(s.data ->> '$.usage.cacheWriteTokens' AS BIGINT),
       TRY_CAST(s.data ->> '$.usage.outputTokens' AS BIGINT),
       TRY_CAST(s.data ->> '$.usage.reasoningTokens' AS BIGINT),
       (coalesce(n.n, 0) + 1)::INTEGER,
       TRY_CAST(s.data ->> '$.shadowedTokenCount' AS BIGINT),
       (ceil(length(coalesce(s.data ->> '$.summary', '')) / 4) + 8)::BIGINT,
       h.header_seq, coalesce(s.seeded, false)
FROM s
LEFT JOIN started st ON st.session_id = s.session_id AND st.cid = s.cid
LEFT JOIN sent n ON n.session_id = s.session_id AND n.seq = s.seq
LEFT JOIN hdr h ON h.session_id = s.session_id AND h.seq = s.seq;
