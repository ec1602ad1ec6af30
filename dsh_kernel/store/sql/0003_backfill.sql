-- Migration m0003_precision, second part: for the rows ingested before m0003, what ingest computes for
-- every later row, the same way: the seeded flags, the token estimates, and the attempt rows of calls
-- that got no chunk. Shipped: never edit, add a migration instead.
-- The estimate is the token meter's (SPINE §7.6): text and reasoning ceil(chars / 4) + 4, a tool call
-- (name + arguments) / 4 + 4, a tool result its nested blocks + 4, + 4 per message.

UPDATE t_events SET seeded = true
FROM t_sessions s WHERE s.id = t_events.session_id AND t_events.seq < s.seed_length;
UPDATE t_messages SET seeded = true
FROM t_sessions s WHERE s.id = t_messages.session_id AND t_messages.seq < s.seed_length;
UPDATE t_tool_calls SET seeded = true
FROM t_sessions s WHERE s.id = t_tool_calls.session_id AND t_tool_calls.seq < s.seed_length;

UPDATE t_messages SET est_tokens = x.est
FROM (
    SELECT session_id, seq,
           (4 + coalesce(list_sum([CASE
               WHEN b.type = 'tool-call'
                   THEN ceil((length(coalesce(b.name, '')) + length(coalesce(b.arguments, ''))) / 4) + 4
               WHEN b.type = 'tool-result'
                   THEN coalesce(list_sum([ceil(length(coalesce(c.text, '')) / 4) + 4
                                           FOR c IN coalesce(b.content, [])]), 0) + 4
               ELSE ceil(length(coalesce(b.text, '')) / 4) + 4 END FOR b IN coalesce(m.content, [])]), 0)
           )::INTEGER AS est
    FROM (
        SELECT session_id, seq,
               CASE WHEN type = 'user/message'
                    THEN json_transform(data, '{"content": [{"type": "VARCHAR", "text": "VARCHAR", "name": "VARCHAR", "arguments": "VARCHAR", "content": [{"type": "VARCHAR", "text": "VARCHAR"}]}]}')
                    ELSE json_transform(data, '{"message": {"content": [{"type": "VARCHAR", "text": "VARCHAR", "name": "VARCHAR", "arguments": "VARCHAR", "content": [{"type": "VARCHAR", "text": "VARCHAR"}]}]}}').message
               END AS m
        FROM t_events WHERE type IN ('user/message', 'assistant/message', 'tool/result')
    )
) x
WHERE t_messages.session_id = x.session_id AND t_messages.seq = x.seq;

UPDATE t_attempts SET est_input_tokens = x.tokens
FROM (
    WITH c AS (
        SELECT session_id, seq, sum(est_tokens) OVER (PARTITION BY session_id ORDER BY seq) AS tokens
        FROM t_messages WHERE has_content AND surface_op = 'append'
    )
    SELECT a.session_id, a.turn, a.step, a.attempt, coalesce(c.tokens, 0)::BIGINT AS tokens
    FROM t_attempts a
    ASOF LEFT JOIN c ON c.session_id = a.session_id AND c.seq < a.first_seq
) x
WHERE t_attempts.session_id = x.session_id AND t_attempts.turn = x.turn AND t_attempts.step = x.step
  AND t_attempts.attempt = x.attempt;

UPDATE t_attempts SET est_output_tokens = x.est_tokens
FROM (
    SELECT m.session_id, m.turn, m.step, m.est_tokens, e.source_event_seqs[1] AS first_chunk
    FROM t_messages m JOIN t_events e ON e.session_id = m.session_id AND e.seq = m.seq
    WHERE m.event_type = 'assistant/message' AND m.surface_op = 'append'
      AND len(coalesce(e.source_event_seqs, [])) > 0
) x
WHERE t_attempts.session_id = x.session_id AND t_attempts.turn = x.turn AND t_attempts.step = x.step
  AND x.first_chunk BETWEEN t_attempts.first_seq AND t_attempts.last_seq;

UPDATE _ingest_state SET message_tokens = x.tokens
FROM (
    SELECT session_id, sum(est_tokens)::BIGINT AS tokens
    FROM t_messages WHERE has_content AND surface_op = 'append' GROUP BY session_id
) x
WHERE _ingest_state.session_id = x.session_id AND _ingest_state.error IS NULL;

-- Calls that got no chunk: the last call of a turn that ended aborted or interrupted, when its step
-- has fewer attempts than calls (one per step/start and llm/retry-started).
INSERT INTO t_attempts
WITH cut AS (
    SELECT session_id, turn, seq AS end_seq, time_ms AS end_ms
    FROM t_events WHERE type = 'turn/end' AND data ->> '$.reason.kind' IN ('aborted', 'interrupted')
),
steps AS (
    SELECT e.session_id, e.turn, e.step,
           1 + count(*) FILTER (WHERE e.type = 'llm/retry-started') AS expected,
           arg_max(e.time_ms, e.seq) FILTER (WHERE e.type <> 'step/end') AS mark_ms,
           min(e.seq) FILTER (WHERE e.type = 'step/end') AS close_seq,
           min(e.time_ms) FILTER (WHERE e.type = 'step/end') AS close_ms
    FROM t_events e SEMI JOIN cut c ON c.session_id = e.session_id AND c.turn = e.turn
    WHERE e.type IN ('step/start', 'step/end', 'llm/retry-started') AND e.step IS NOT NULL
    GROUP BY e.session_id, e.turn, e.step
    QUALIFY e.step = max(e.step) OVER (PARTITION BY e.session_id, e.turn)
),
made AS (
    SELECT a.session_id, a.turn, a.step, count(*) AS n
    FROM t_attempts a SEMI JOIN cut c ON c.session_id = a.session_id AND c.turn = a.turn
    GROUP BY ALL
),
silent AS (
    SELECT s.session_id, s.turn, s.step, s.expected, s.mark_ms,
           coalesce(s.close_seq, c.end_seq) AS close_seq, coalesce(s.close_ms, c.end_ms) AS close_ms
    FROM steps s
    JOIN cut c USING (session_id, turn)
    LEFT JOIN made m USING (session_id, turn, step)
    WHERE coalesce(m.n, 0) < s.expected AND s.mark_ms IS NOT NULL
),
hist AS (
    SELECT s.session_id, s.turn, s.step, count(m.seq) AS n, sum(m.est_tokens) AS tokens
    FROM silent s
    LEFT JOIN t_messages m
        ON m.session_id = s.session_id AND m.seq < s.close_seq AND m.has_content
       AND m.surface_op = 'append'
    GROUP BY ALL
)
SELECT s.session_id, s.turn, s.step, s.expected::INTEGER, s.close_seq, s.close_seq, s.mark_ms, NULL,
       s.close_ms, 0, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, s.mark_ms,
       h.n::INTEGER, coalesce(h.tokens, 0)::BIGINT, NULL
FROM silent s JOIN hist h USING (session_id, turn, step)
ON CONFLICT DO NOTHING;
