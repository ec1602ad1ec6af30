-- Migration m0009_failed_attempts: what a failed attempt cost (issue 28). Shipped: never edit, add a
-- migration instead.
--   * t_attempts.streamed_chars: the characters its text, reasoning and tool-call deltas streamed
--     (ingest sums them; the rows ingested before are backfilled from t_events below);
--   * requests: an attempt that streamed something and then failed (a server error mid-answer, an
--     idle timeout, a dropped connection) without reporting usage is estimated like an answered one
--     (estimated = true): input the history and header sent, output its message's estimate or, with no
--     message, what streamed: ceil(streamed_chars / 4) + 4 (dsh_kernel.session.usage.streamed_tokens),
--     so usage, turns, sessions and the budgets' own reading agree. An attempt that streamed nothing
--     and reported no usage (a 429, a 500 before the answer began) still has no counts.

ALTER TABLE t_attempts ADD COLUMN streamed_chars BIGINT;
COMMENT ON COLUMN t_attempts.streamed_chars IS 'Characters its deltas streamed: text and reasoning text, tool-call names and argument fragments (the estimate of a failed attempt''s output).';

UPDATE t_attempts SET streamed_chars = coalesce(x.chars, 0)
FROM (
    SELECT a.session_id, a.turn, a.step, a.attempt,
           sum(length(coalesce(e.data ->> '$.chunk.text', ''))
               + length(coalesce(e.data ->> '$.chunk.name', ''))
               + length(coalesce(e.data ->> '$.chunk.argumentsDelta', ''))) AS chars
    FROM t_attempts a
    LEFT JOIN t_events e
        ON e.session_id = a.session_id AND e.type = 'assistant/chunk'
       AND e.seq BETWEEN a.first_seq AND a.last_seq
       AND e.data ->> '$.chunk.type' IN ('text-delta', 'reasoning-delta', 'tool-call-delta')
    GROUP BY ALL
) x
WHERE t_attempts.session_id = x.session_id AND t_attempts.turn = x.turn AND t_attempts.step = x.step
  AND t_attempts.attempt = x.attempt;

CREATE OR REPLACE VIEW requests AS
WITH hdr AS NOT MATERIALIZED (  -- read by both branches: not materialized, so each keeps its pushdown
    SELECT session_id, seq, data ->> '$.reason' AS reason,
           data ->> '$.header.config.provider' AS provider,
           data ->> '$.header.config.model' AS model,
           data -> '$.header.config' AS config,
           md5(coalesce(data ->> '$.header.system', '')) AS system_hash,
           coalesce(json_array_length(data -> '$.header.tools'), 0) AS tool_count,
           (CASE WHEN coalesce(data ->> '$.header.system', '') <> ''
                 THEN ceil(length(data ->> '$.header.system') / 4) + 4 ELSE 0 END
            + CASE WHEN coalesce(json_array_length(data -> '$.header.tools'), 0) > 0
                   THEN ceil(length(CAST(data -> '$.header.tools' AS VARCHAR)) / 4) + 4 ELSE 0 END
           )::BIGINT AS header_tokens
    FROM t_events WHERE type = 'request/header'
),
att AS (
    SELECT *,
           coalesce(input_tokens, output_tokens, cache_read_tokens, cache_write_tokens,
                    reasoning_tokens) IS NULL
           AND (coalesce(finish, '') IN ('stop', 'tool-calls', 'max-tokens')
                OR first_delta_ms IS NOT NULL) AS estimated,
           row_number() OVER (PARTITION BY session_id ORDER BY first_seq) AS n
    FROM t_attempts
),
calls AS (
    SELECT a.session_id,
           (a.n + coalesce(len(list_filter(sn.seqs, lambda x: x < a.first_seq)), 0))::INTEGER AS request,
           a.turn, a.step, a.attempt, coalesce(a.start_ms, a.first_ms) AS start_ms,
           a.first_delta_ms - coalesce(a.start_ms, a.first_ms) AS ttft_ms,
           a.last_ms - coalesce(a.start_ms, a.first_ms) AS duration_ms,
           h.provider, h.model, a.finish, a.error_code, a.error_message,
           coalesce(a.message_count, 0)::INTEGER AS message_count, h.system_hash,
           h.tool_count::BIGINT AS tool_count, h.config, h.seq AS header_seq, h.reason AS header_reason,
           CASE WHEN a.estimated THEN coalesce(a.est_input_tokens, 0) + coalesce(h.header_tokens, 0)
                ELSE a.input_tokens END AS input_tokens,
           CASE WHEN a.estimated THEN 0 ELSE a.cache_read_tokens END AS cache_read_tokens,
           CASE WHEN a.estimated THEN 0 ELSE a.cache_write_tokens END AS cache_write_tokens,
           CASE WHEN a.estimated
                THEN coalesce(a.est_output_tokens,
                              CASE WHEN a.first_delta_ms IS NOT NULL
                                   THEN ceil(coalesce(a.streamed_chars, 0) / 4) + 4 ELSE 0 END)::BIGINT
                ELSE a.output_tokens END AS output_tokens,
           a.reasoning_tokens, a.chunks, a.first_seq, CASE WHEN a.chunks > 0 THEN a.last_seq END AS last_seq,
           a.first_seq < coalesce(ses.seed_length, 0) AS seeded, a.estimated,
           'agent' AS purpose, NULL::VARCHAR AS compaction_id
    FROM att a
    LEFT JOIN t_sessions ses ON ses.id = a.session_id
    ASOF LEFT JOIN hdr h ON h.session_id = a.session_id AND h.seq < a.first_seq
    LEFT JOIN (SELECT session_id, list(seq) AS seqs FROM t_compaction_calls GROUP BY ALL) sn
        ON sn.session_id = a.session_id
),
summaries AS (
    SELECT c.session_id,
           (row_number() OVER (PARTITION BY c.session_id ORDER BY c.seq) + coalesce(an.n, 0))::INTEGER
               AS request,
           c.turn, c.step, NULL::INTEGER AS attempt, c.start_ms, NULL::BIGINT AS ttft_ms,
           c.end_ms - c.start_ms AS duration_ms, c.provider, c.model,
           CASE WHEN c.error_code IS NULL THEN 'stop' ELSE 'error' END AS finish,
           c.error_code, c.error_message, c.message_count, h.system_hash, NULL::BIGINT AS tool_count,
           json_object('provider', c.provider, 'model', c.model, 'maxTokens', c.max_tokens) AS config,
           c.header_seq, h.reason AS header_reason,
           CASE WHEN c.estimated THEN coalesce(c.est_input_tokens, 0) + coalesce(h.header_tokens, 0)
                ELSE c.input_tokens END AS input_tokens,
           CASE WHEN c.estimated THEN 0 ELSE c.cache_read_tokens END AS cache_read_tokens,
           CASE WHEN c.estimated THEN 0 ELSE c.cache_write_tokens END AS cache_write_tokens,
           CASE WHEN c.estimated THEN c.est_output_tokens ELSE c.output_tokens END AS output_tokens,
           c.reasoning_tokens, NULL::INTEGER AS chunks, c.seq AS first_seq, NULL::INTEGER AS last_seq,
           c.seeded, c.estimated, 'compaction' AS purpose, c.compaction_id
    FROM (
        SELECT *, coalesce(input_tokens, output_tokens, cache_read_tokens, cache_write_tokens,
                           reasoning_tokens) IS NULL AND error_code IS NULL AS estimated
        FROM t_compaction_calls
    ) c
    LEFT JOIN hdr h ON h.session_id = c.session_id AND h.seq = c.header_seq
    LEFT JOIN (  -- the agent's calls before each summary call
        SELECT c.session_id, c.seq, count(a.first_seq) AS n
        FROM t_compaction_calls c
        JOIN t_attempts a ON a.session_id = c.session_id AND a.first_seq < c.seq
        GROUP BY ALL
    ) an ON an.session_id = c.session_id AND an.seq = c.seq
)
-- Numbered in log order across both purposes: each row's rank among its own purpose plus the calls
-- of the other before it (no window over the union, so a query that does not read `request` never
-- pays for it).
SELECT session_id, request, turn, step, attempt, epoch_ms(start_ms) AS started_at, ttft_ms,
       duration_ms, provider, model, finish, error_code, error_message, message_count, system_hash,
       tool_count, config, header_seq, header_reason, input_tokens, cache_read_tokens,
       cache_write_tokens, output_tokens, reasoning_tokens, chunks, first_seq, last_seq, seeded,
       estimated, purpose, compaction_id
FROM (SELECT * FROM calls UNION ALL BY NAME SELECT * FROM summaries);
COMMENT ON VIEW requests IS 'One row per model call: the agent''s attempts (retries included, and calls cut before their first chunk) and the summary calls of compactions (purpose): what was sent, how it went.';
COMMENT ON COLUMN requests.input_tokens IS 'Uncached input tokens, as the server reported them; when estimated, the token meter''s estimate of the history (a summary call: the range it summarised), system prompt and tools sent.';
COMMENT ON COLUMN requests.output_tokens IS 'Output tokens (reasoning included), as reported; when estimated, the meter''s estimate of the answer logged (a summary call: its summary), or, for an attempt that logged none (it failed or was cut mid-answer), of what streamed: ceil(characters / 4) + 4.';
COMMENT ON COLUMN requests.estimated IS 'The server read the request (the model answered, or streamed something before it failed or was cut) but sent no usage (some local servers never do; a failed or cut stream cannot): the token counts are estimates and the cost is unknown. A failed attempt that streamed nothing and reported no usage has no counts.';
COMMENT ON COLUMN requests.request IS 'Request number within the session, 1-based, in log order across both purposes (an agent call by its first chunk, a summary call by its compaction/summary).';
COMMENT ON COLUMN requests.step IS 'The step the call belongs to (a summary call: the step it made room for; NULL between turns).';
COMMENT ON COLUMN requests.attempt IS '1 for the first call of a step, 2.. for retries of it; NULL for a summary call.';
COMMENT ON COLUMN requests.started_at IS 'Time of the last event logged before the first chunk (the request was sent then); for a call that got no chunk, its step/start or llm/retry-started; for a summary call, its compaction/start.';
COMMENT ON COLUMN requests.ttft_ms IS 'Time to the first streamed delta (NULL for a summary call, which is not logged as chunks).';
COMMENT ON COLUMN requests.duration_ms IS 'From the request being sent to the last chunk (no chunk: to the event that closed the call; a summary call: to its compaction/summary).';
COMMENT ON COLUMN requests.provider IS 'Provider id the request went to.';
COMMENT ON COLUMN requests.model IS 'Model id.';
COMMENT ON COLUMN requests.finish IS 'stop, tool-calls, max-tokens, error or aborted; NULL if the stream never finished (cancelled or crashed, or still running). A summary call: stop, or error when its answer was not used (error_code says why).';
COMMENT ON COLUMN requests.error_code IS 'Failure code of a failed attempt (RATE_LIMIT, SERVER, CONTEXT_WINDOW_EXCEEDED, ...; a summary call: compactions.failure_code).';
COMMENT ON COLUMN requests.message_count IS 'Messages in the history sent: those with content on the surface when the call was made, compaction replacements folded in (a compaction makes it smaller). A summary call: the messages it summarised, plus its instruction.';
COMMENT ON COLUMN requests.system_hash IS 'md5 of the system prompt in force (compare requests without reading the prompt).';
COMMENT ON COLUMN requests.tool_count IS 'Tools offered to the model (NULL for a summary call: it may leave them out when they would not fit).';
COMMENT ON COLUMN requests.config IS 'The call config (provider, model, reasoningEffort, temperature, maxTokens, stop) as JSON; a summary call: what its compaction/summary records (provider, model, maxTokens).';
COMMENT ON COLUMN requests.header_seq IS 'seq of the request/header event in force: its data.header is the full envelope.';
COMMENT ON COLUMN requests.header_reason IS 'Why that header was logged: initial, resume or change.';
COMMENT ON COLUMN requests.chunks IS 'Stream chunks received (0: the call was cut before its first chunk; NULL for a summary call, which is not logged as chunks).';
COMMENT ON COLUMN requests.first_seq IS 'seq of the first chunk: the history sent is the surface before it (no chunk: the event that closed the call; a summary call: its compaction/summary).';
COMMENT ON COLUMN requests.last_seq IS 'seq of the last chunk (NULL: none came).';
COMMENT ON COLUMN requests.seeded IS 'True when the request belongs to the seed copied from a parent session (a fork).';
COMMENT ON COLUMN requests.purpose IS 'agent (the loop''s own call) or compaction (a summary call: compactions has the rest, by compaction_id).';
COMMENT ON COLUMN requests.compaction_id IS 'A summary call''s compaction (compactions.compaction_id); NULL for the agent''s calls.';
