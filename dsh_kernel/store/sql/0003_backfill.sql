-- Migration m0003_precision, second part: the token estimates of rows ingested before m0003 (ingest
-- computes them for every later row, the same way). Shipped: never edit, add a migration instead.
-- The estimate is the token meter's (SPINE §7.6): text and reasoning ceil(chars / 4) + 4, a tool call
-- (name + arguments) / 4 + 4, a tool result its nested blocks + 4, + 4 per message.

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
