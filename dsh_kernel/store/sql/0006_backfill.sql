-- Migration m0006_compaction, last part: run after ingest_surface.backfill has folded the surface of
-- the rows ingested before m0006 (surface_key and replaced_by of every message; _refolded names the
-- sessions that hold a replacement — an overflowed turn's note, written before compaction existed).
-- For those sessions, what ingest computes for every later row: each attempt's history sent (the
-- messages on the surface when it was made) and the surface carried over to the next batch.
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
