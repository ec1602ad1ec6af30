-- Migration m0003_precision: the views say exactly what happened. Shipped: never edit, add a migration
-- instead. Adds the token-estimate columns ingest fills, and replaces every public view:
--   * seeded on every view with rows a fork copied from its parent (events, messages, tool_calls,
--     approvals, code_runs, errors; requests, usage and turns had it);
--   * code_runs lists the names a run added, changed and removed (names_added, names_changed,
--     names_removed: VARCHAR[]), so "which run created x?" is a list_contains away;
--   * tool_calls/code_runs status 'waiting' for a call waiting for an approval click, 'interrupted' for a
--     call crash repair closed; approvals outcome 'interrupted' for a question the crash left unanswered;
--   * requests keeps a row for a model call cancelled or crashed before its first chunk, and requests and
--     usage mark estimated counts (the server sent no usage) with estimated = true: their cost is unknown
--     (NULL) unless the model's prices are all zero, so sessions.cost_complete turns false.
-- The t_ tables get the estimate columns and a seeded flag (so no view joins t_sessions for it); ingest
-- fills them, and inserts the attempt row of a call that got no chunk. 0003_backfill.sql, run right
-- after, does the same for the rows ingested before this migration.

ALTER TABLE t_messages ADD COLUMN est_tokens INTEGER;
COMMENT ON COLUMN t_messages.est_tokens IS 'The token meter''s estimate of the message (SPINE §7.6: chars / 4 + 4 per block, + 4).';
ALTER TABLE t_attempts ADD COLUMN est_input_tokens BIGINT;
COMMENT ON COLUMN t_attempts.est_input_tokens IS 'Estimated tokens of the history sent (the messages counted by message_count), header excluded.';
ALTER TABLE t_attempts ADD COLUMN est_output_tokens BIGINT;
COMMENT ON COLUMN t_attempts.est_output_tokens IS 'Estimated tokens of the message the attempt produced (its answer, or the kept visible prefix).';
ALTER TABLE _ingest_state ADD COLUMN message_tokens BIGINT;
ALTER TABLE t_events ADD COLUMN seeded BOOLEAN DEFAULT false;
COMMENT ON COLUMN t_events.seeded IS 'seq < the session''s seed_length: a fork''s copy of its parent''s event.';
ALTER TABLE t_messages ADD COLUMN seeded BOOLEAN DEFAULT false;
COMMENT ON COLUMN t_messages.seeded IS 'A fork''s copy of its parent''s message.';
ALTER TABLE t_tool_calls ADD COLUMN seeded BOOLEAN DEFAULT false;
COMMENT ON COLUMN t_tool_calls.seeded IS 'A fork''s copy of its parent''s call.';
COMMENT ON COLUMN _ingest_state.message_tokens IS 'Sum of t_messages.est_tokens of the appended messages with content ingested so far.';

CREATE OR REPLACE VIEW events AS
SELECT session_id, seq, type, epoch_ms(time_ms) AS time, time_ms, turn, step, data, ignorable,
       surface_op, source_event_seqs, seeded
FROM t_events;
COMMENT ON VIEW events IS 'Every event of every session, raw (data as JSON).';
COMMENT ON COLUMN events.session_id IS 'The session (sessions.session_id).';
COMMENT ON COLUMN events.seq IS '0-based position in the session log.';
COMMENT ON COLUMN events.type IS 'Event type: turn/start, step/start, user/message, assistant/chunk, assistant/message, tool/call, tool/result, request/header, approval/asked, llm/retry, session/title, ...';
COMMENT ON COLUMN events.time IS 'When the event was logged (UTC).';
COMMENT ON COLUMN events.time_ms IS 'The same, epoch milliseconds.';
COMMENT ON COLUMN events.turn IS 'The turn open at this event; NULL between turns.';
COMMENT ON COLUMN events.step IS 'The step open at this event; NULL outside steps.';
COMMENT ON COLUMN events.data IS 'The event data (JSON): query it with ->, ->> or json_extract.';
COMMENT ON COLUMN events.ignorable IS 'An informational record a reader may skip when it does not know its type.';
COMMENT ON COLUMN events.surface_op IS 'Message events only: "append", or {"op":"replace","start","end"} for a compaction copy.';
COMMENT ON COLUMN events.source_event_seqs IS 'Message events only: the seqs this event was built from (an answer''s chunks, a result''s call).';
COMMENT ON COLUMN events.seeded IS 'Copied from the parent session by a fork (the same event is in the parent): filter with NOT seeded to count each event once.';

CREATE OR REPLACE VIEW messages AS
SELECT session_id, seq, turn, step, epoch_ms(time_ms) AS time, event_type AS type, role, source,
       message_id, call_id, text, reasoning, tool_calls, has_content, is_error, interrupted, surface_op,
       seeded
FROM t_messages;
COMMENT ON VIEW messages IS 'The conversation: user prompts and context, assistant answers, tool results.';
COMMENT ON COLUMN messages.seq IS 'seq of the message event (join events on session_id, seq for the raw data).';
COMMENT ON COLUMN messages.type IS 'user/message, assistant/message or tool/result.';
COMMENT ON COLUMN messages.role IS 'user or assistant (tool results are user-role messages with source tool).';
COMMENT ON COLUMN messages.source IS 'user (typed by a person), plugin (injected context), model, or tool.';
COMMENT ON COLUMN messages.message_id IS 'The message id.';
COMMENT ON COLUMN messages.call_id IS 'Tool results: the tool call answered.';
COMMENT ON COLUMN messages.text IS 'The message text (tool results: the result text).';
COMMENT ON COLUMN messages.reasoning IS 'The model''s reasoning text, if any.';
COMMENT ON COLUMN messages.tool_calls IS 'How many tools the assistant called in this message.';
COMMENT ON COLUMN messages.has_content IS 'False for content-less assistant messages, which are never sent back to the model.';
COMMENT ON COLUMN messages.is_error IS 'Tool results: the call failed.';
COMMENT ON COLUMN messages.interrupted IS 'The visible part of an answer whose stream was cut: by a cancel, or by a crash (kept by crash repair).';
COMMENT ON COLUMN messages.surface_op IS 'append, or replace (a compaction or pruning copy that stands in for earlier messages).';
COMMENT ON COLUMN messages.seeded IS 'Copied from the parent session by a fork: filter with NOT seeded to count each message once.';

CREATE OR REPLACE VIEW tool_calls AS
WITH waiting AS (  -- approval questions with no answer yet, by the call they ask about
    SELECT session_id, any_value(turn) AS turn, any_value(step) AS step,
           any_value(data ->> '$.callId') FILTER (WHERE type = 'approval/asked') AS call_id
    FROM t_events WHERE type IN ('approval/asked', 'approval/decided')
    GROUP BY session_id, data ->> '$.id'
    HAVING count(*) FILTER (WHERE type = 'approval/decided') = 0
)
SELECT c.session_id, c.turn, c.step, c.call_id, c.name, c.arguments,
       epoch_ms(c.time_ms) AS started_at, epoch_ms(r.time_ms) AS ended_at,
       coalesce(r.duration_ms, r.time_ms - c.time_ms) AS duration_ms,
       CASE
           WHEN r.seq IS NULL AND w.call_id IS NOT NULL THEN 'waiting'
           WHEN r.seq IS NULL THEN 'running'
           WHEN NOT coalesce(r.is_error, false) THEN 'done'
           WHEN r.error_code = 'DENIED' THEN 'denied'
           WHEN r.error_code IN ('ABORTED', 'ABORTED_BEFORE_DISPATCH') THEN 'aborted'
           WHEN r.error_code IN ('TOOL_OUTCOME_UNKNOWN', 'TOOL_NOT_STARTED') THEN 'interrupted'
           ELSE 'failed'
       END AS status,
       coalesce(r.is_error, false) AS is_error, r.error_code, r.error_name, m.text AS result, r.meta,
       c.synthetic, c.seq AS call_seq, r.seq AS result_seq, c.seeded
FROM t_tool_calls c
LEFT JOIN t_tool_results r
    ON r.session_id = c.session_id AND r.call_id = c.call_id AND r.turn = c.turn AND r.step = c.step
   AND r.surface_op = 'append'
LEFT JOIN t_messages m ON m.session_id = r.session_id AND m.seq = r.seq
LEFT JOIN (SELECT DISTINCT * FROM waiting WHERE call_id IS NOT NULL) w
    ON w.session_id = c.session_id AND w.turn = c.turn AND w.step = c.step AND w.call_id = c.call_id;
COMMENT ON VIEW tool_calls IS 'One row per tool call that started: arguments, status, duration, result and error code.';
COMMENT ON COLUMN tool_calls.call_id IS 'The call id the model chose.';
COMMENT ON COLUMN tool_calls.name IS 'Tool name.';
COMMENT ON COLUMN tool_calls.arguments IS 'The model''s raw argument JSON text.';
COMMENT ON COLUMN tool_calls.started_at IS 'When the tool body was about to run (before any approval question).';
COMMENT ON COLUMN tool_calls.ended_at IS 'When the result was logged.';
COMMENT ON COLUMN tool_calls.duration_ms IS 'The tool''s own duration when logged, else result time minus call time.';
COMMENT ON COLUMN tool_calls.status IS 'waiting (for an approval click), running (no result yet), done, failed, denied, aborted, or interrupted (the kernel stopped before a result: crash repair closed it; error_code says whether it ran).';
COMMENT ON COLUMN tool_calls.is_error IS 'The call failed (any error status).';
COMMENT ON COLUMN tool_calls.error_code IS 'Stable error code of a failed call (INVALID_ARGS, TIMEOUT, DENIED; TOOL_NOT_STARTED: it never ran; TOOL_OUTCOME_UNKNOWN: it may have run, ...).';
COMMENT ON COLUMN tool_calls.result IS 'The result text the model saw.';
COMMENT ON COLUMN tool_calls.meta IS 'The tool''s presentation payload (JSON).';
COMMENT ON COLUMN tool_calls.synthetic IS 'Written by the harness, not asked for by the model.';
COMMENT ON COLUMN tool_calls.call_seq IS 'seq of the tool/call event.';
COMMENT ON COLUMN tool_calls.result_seq IS 'seq of the tool/result event.';
COMMENT ON COLUMN tool_calls.seeded IS 'Copied from the parent session by a fork: filter with NOT seeded to count each call once.';

CREATE OR REPLACE VIEW requests AS
WITH hdr AS (
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
                OR (finish IS NULL AND first_delta_ms IS NOT NULL)) AS estimated
    FROM t_attempts
)
SELECT a.session_id,
       row_number() OVER (PARTITION BY a.session_id ORDER BY a.first_seq)::INTEGER AS request,
       a.turn, a.step, a.attempt,
       epoch_ms(coalesce(a.start_ms, a.first_ms)) AS started_at,
       a.first_delta_ms - coalesce(a.start_ms, a.first_ms) AS ttft_ms,
       a.last_ms - coalesce(a.start_ms, a.first_ms) AS duration_ms,
       h.provider, h.model, a.finish, a.error_code, a.error_message,
       coalesce(a.message_count, 0)::INTEGER AS message_count, h.system_hash, h.tool_count, h.config,
       h.seq AS header_seq, h.reason AS header_reason,
       CASE WHEN a.estimated THEN coalesce(a.est_input_tokens, 0) + coalesce(h.header_tokens, 0)
            ELSE a.input_tokens END AS input_tokens,
       CASE WHEN a.estimated THEN 0 ELSE a.cache_read_tokens END AS cache_read_tokens,
       CASE WHEN a.estimated THEN 0 ELSE a.cache_write_tokens END AS cache_write_tokens,
       CASE WHEN a.estimated THEN coalesce(a.est_output_tokens, 0) ELSE a.output_tokens END AS output_tokens,
       a.reasoning_tokens, a.chunks, a.first_seq, CASE WHEN a.chunks > 0 THEN a.last_seq END AS last_seq,
       a.first_seq < coalesce(ses.seed_length, 0) AS seeded, a.estimated
FROM att a
LEFT JOIN t_sessions ses ON ses.id = a.session_id
ASOF LEFT JOIN hdr h ON h.session_id = a.session_id AND h.seq < a.first_seq;
COMMENT ON VIEW requests IS 'One row per model call attempt (retries included, and calls cut before their first chunk): what was sent, how it went.';
COMMENT ON COLUMN requests.request IS 'Request number within the session, 1-based, in log order.';
COMMENT ON COLUMN requests.attempt IS '1 for the first call of a step, 2.. for retries of it.';
COMMENT ON COLUMN requests.started_at IS 'Time of the last event logged before the first chunk (the request was sent then); for a call that got no chunk, its step/start or llm/retry-started.';
COMMENT ON COLUMN requests.ttft_ms IS 'Time to the first streamed delta.';
COMMENT ON COLUMN requests.duration_ms IS 'From the request being sent to the last chunk (no chunk: to the event that closed the call).';
COMMENT ON COLUMN requests.provider IS 'Provider id the request went to.';
COMMENT ON COLUMN requests.model IS 'Model id.';
COMMENT ON COLUMN requests.finish IS 'stop, tool-calls, max-tokens, error or aborted; NULL if the stream never finished (cancelled or crashed, or still running).';
COMMENT ON COLUMN requests.error_code IS 'Failure code of a failed attempt (RATE_LIMIT, SERVER, CONTEXT_WINDOW_EXCEEDED, ...).';
COMMENT ON COLUMN requests.message_count IS 'Messages in the history sent (appended surface messages with content; compaction replacements are not subtracted).';
COMMENT ON COLUMN requests.system_hash IS 'md5 of the system prompt in force (compare requests without reading the prompt).';
COMMENT ON COLUMN requests.tool_count IS 'Tools offered to the model.';
COMMENT ON COLUMN requests.config IS 'The call config (provider, model, reasoningEffort, temperature, maxTokens, stop) as JSON.';
COMMENT ON COLUMN requests.header_seq IS 'seq of the request/header event in force: its data.header is the full envelope.';
COMMENT ON COLUMN requests.header_reason IS 'Why that header was logged: initial, resume or change.';
COMMENT ON COLUMN requests.input_tokens IS 'Uncached input tokens, as the server reported them; when estimated, the token meter''s estimate of the history, system prompt and tools sent.';
COMMENT ON COLUMN requests.output_tokens IS 'Output tokens (reasoning included), as reported; when estimated, the meter''s estimate of the answer logged.';
COMMENT ON COLUMN requests.chunks IS 'Stream chunks received (0: the call was cut before its first chunk).';
COMMENT ON COLUMN requests.first_seq IS 'seq of the first chunk: the history sent is the messages before it (no chunk: the event that closed the call).';
COMMENT ON COLUMN requests.last_seq IS 'seq of the last chunk (NULL: none came).';
COMMENT ON COLUMN requests.seeded IS 'True when the request belongs to the seed copied from a parent session (a fork).';
COMMENT ON COLUMN requests.estimated IS 'The model answered but the server sent no usage (some local servers never do; a stream cut by a cancel or a crash cannot): the token counts are estimates and the cost is unknown. A failed attempt without usage has no counts.';

CREATE OR REPLACE VIEW usage AS
SELECT r.session_id, r.request, r.turn, r.step, r.attempt, r.started_at AS time, r.provider, r.model,
       coalesce(r.input_tokens, 0) AS input_tokens,
       coalesce(r.cache_read_tokens, 0) AS cached_input_tokens,
       coalesce(r.cache_write_tokens, 0) AS cache_write_tokens,
       coalesce(r.output_tokens, 0) AS output_tokens,
       coalesce(r.reasoning_tokens, 0) AS reasoning_tokens,
       (coalesce(r.input_tokens, 0) + coalesce(r.cache_read_tokens, 0) + coalesce(r.cache_write_tokens, 0)
           + coalesce(r.output_tokens, 0))::BIGINT AS total_tokens,
       CASE WHEN NOT r.estimated
                 OR (p.input_per_mtok = 0 AND p.output_per_mtok = 0
                     AND coalesce(p.cached_input_per_mtok, 0) = 0 AND coalesce(p.cache_write_per_mtok, 0) = 0)
            THEN (coalesce(r.input_tokens, 0) * p.input_per_mtok
                  + coalesce(r.cache_read_tokens, 0) * coalesce(p.cached_input_per_mtok, p.input_per_mtok)
                  + coalesce(r.cache_write_tokens, 0) * coalesce(p.cache_write_per_mtok, p.input_per_mtok)
                  + coalesce(r.output_tokens, 0) * p.output_per_mtok) / 1e6
       END AS cost,
       r.finish, r.seeded, r.estimated
FROM requests r
LEFT JOIN prices p ON p.provider = r.provider AND p.model = r.model
WHERE r.input_tokens IS NOT NULL OR r.output_tokens IS NOT NULL;
COMMENT ON VIEW usage IS 'Tokens by request (failed attempts that reported usage included; estimated where the server sent none), with cache hits and cost.';
COMMENT ON COLUMN usage.request IS 'requests.request of the same session.';
COMMENT ON COLUMN usage.time IS 'When the request was sent.';
COMMENT ON COLUMN usage.input_tokens IS 'Uncached input tokens.';
COMMENT ON COLUMN usage.cached_input_tokens IS 'Input tokens served from the provider''s cache.';
COMMENT ON COLUMN usage.cache_write_tokens IS 'Input tokens written to the provider''s cache.';
COMMENT ON COLUMN usage.output_tokens IS 'Output tokens (reasoning included).';
COMMENT ON COLUMN usage.reasoning_tokens IS 'Reasoning tokens (already inside output_tokens).';
COMMENT ON COLUMN usage.total_tokens IS 'input + cached input + cache write + output.';
COMMENT ON COLUMN usage.cost IS 'Cost from the prices table; NULL when the model has no price, or when the counts are estimated (unless every price of the model is zero).';
COMMENT ON COLUMN usage.finish IS 'How the request ended (error attempts that reported usage are billed too).';
COMMENT ON COLUMN usage.estimated IS 'The server sent no usage for this request: the counts are the token meter''s estimate (chars / 4) and the cost is unknown.';

CREATE OR REPLACE VIEW turns AS
WITH marks AS (
    SELECT session_id, turn,
           min(seq) FILTER (WHERE type = 'turn/start') AS start_seq,
           max(seq) FILTER (WHERE type = 'turn/end') AS end_seq,
           min(time_ms) FILTER (WHERE type = 'turn/start') AS start_ms,
           max(time_ms) FILTER (WHERE type = 'turn/end') AS end_ms,
           any_value(data) FILTER (WHERE type = 'turn/end') AS end_data,
           count(*) FILTER (WHERE type = 'step/start') AS steps
    FROM t_events
    WHERE type IN ('turn/start', 'turn/end', 'step/start') AND turn IS NOT NULL
    GROUP BY session_id, turn
),
u AS (
    SELECT session_id, turn, count(*) AS requests, sum(input_tokens)::BIGINT AS input_tokens,
           sum(cached_input_tokens)::BIGINT AS cached_input_tokens,
           sum(output_tokens)::BIGINT AS output_tokens, sum(cost) AS cost,
           bool_and(cost IS NOT NULL) AS cost_complete, bool_or(estimated) AS estimated
    FROM usage GROUP BY session_id, turn
),
tc AS (
    SELECT session_id, turn, count(*) AS tool_calls, count(*) FILTER (WHERE is_error) AS tool_errors
    FROM t_tool_results WHERE surface_op = 'append' GROUP BY session_id, turn
),
pr AS (
    SELECT session_id, turn, arg_min(text, seq) AS prompt
    FROM t_messages WHERE source = 'user' GROUP BY session_id, turn
)
SELECT m.session_id, m.turn, epoch_ms(m.start_ms) AS started_at, epoch_ms(m.end_ms) AS ended_at,
       m.end_ms - m.start_ms AS duration_ms,
       m.end_data ->> '$.reason.kind' AS end_reason,
       m.end_data ->> '$.reason.error.code' AS error_code,
       m.end_data ->> '$.reason.error.message' AS error_message,
       pr.prompt, m.steps::INTEGER AS steps, coalesce(u.requests, 0)::INTEGER AS requests,
       coalesce(tc.tool_calls, 0)::INTEGER AS tool_calls, coalesce(tc.tool_errors, 0)::INTEGER AS tool_errors,
       coalesce(u.input_tokens, 0) AS input_tokens, coalesce(u.cached_input_tokens, 0) AS cached_input_tokens,
       coalesce(u.output_tokens, 0) AS output_tokens, u.cost,
       m.start_seq, m.end_seq, m.start_seq < coalesce(s.seed_length, 0) AS seeded,
       coalesce(u.cost_complete, true) AS cost_complete, coalesce(u.estimated, false) AS estimated
FROM marks m
LEFT JOIN u USING (session_id, turn)
LEFT JOIN tc USING (session_id, turn)
LEFT JOIN pr USING (session_id, turn)
LEFT JOIN t_sessions s ON s.id = m.session_id;
COMMENT ON VIEW turns IS 'One row per turn: when, how it ended, the prompt, steps, requests, tools, tokens and cost.';
COMMENT ON COLUMN turns.turn IS 'Turn number, from 1.';
COMMENT ON COLUMN turns.ended_at IS 'NULL while the turn is still open.';
COMMENT ON COLUMN turns.duration_ms IS 'turn/end minus turn/start.';
COMMENT ON COLUMN turns.end_reason IS 'completed, aborted, blocked, error, max-tokens, or interrupted (the kernel stopped: crash repair closed it).';
COMMENT ON COLUMN turns.error_code IS 'For end_reason error: the failure code.';
COMMENT ON COLUMN turns.prompt IS 'The first message typed by the user in the turn.';
COMMENT ON COLUMN turns.steps IS 'Steps (model call plus its tools) in the turn.';
COMMENT ON COLUMN turns.requests IS 'Model requests with token counts (reported or estimated).';
COMMENT ON COLUMN turns.tool_calls IS 'Tool results in the turn.';
COMMENT ON COLUMN turns.tool_errors IS 'Failed tool results in the turn.';
COMMENT ON COLUMN turns.cost IS 'Cost of the turn''s requests, where priced (see cost_complete).';
COMMENT ON COLUMN turns.seeded IS 'The turn was copied from a parent session (a fork).';
COMMENT ON COLUMN turns.cost_complete IS 'False when some request of the turn has no cost (no price, or estimated counts): cost is then a lower bound.';
COMMENT ON COLUMN turns.estimated IS 'Some token counts of the turn are estimates (the server sent no usage).';

CREATE OR REPLACE VIEW approvals AS
WITH asked AS (
    SELECT session_id, seq, turn, step, time_ms, data ->> '$.id' AS approval_id,
           data ->> '$.toolName' AS tool_name, data ->> '$.callId' AS call_id, data ->> '$.reason' AS reason,
           seeded
    FROM t_events WHERE type = 'approval/asked'
),
decided AS (
    SELECT session_id, seq, time_ms, data ->> '$.id' AS approval_id, data ->> '$.outcome' AS outcome
    FROM t_events WHERE type = 'approval/decided'
),
ended AS (
    SELECT session_id, turn FROM t_events WHERE type = 'turn/end' GROUP BY ALL
)
SELECT a.session_id, a.approval_id, a.turn, a.step, a.call_id, a.tool_name, a.reason,
       epoch_ms(a.time_ms) AS asked_at, epoch_ms(d.time_ms) AS decided_at, d.time_ms - a.time_ms AS wait_ms,
       coalesce(d.outcome, CASE WHEN e.turn IS NOT NULL THEN 'interrupted' ELSE 'pending' END) AS outcome,
       a.seq AS asked_seq, d.seq AS decided_seq, a.seeded
FROM asked a
LEFT JOIN decided d ON d.session_id = a.session_id AND d.approval_id = a.approval_id
LEFT JOIN ended e ON e.session_id = a.session_id AND e.turn = a.turn;
COMMENT ON VIEW approvals IS 'Tool calls that asked for approval, and the answer.';
COMMENT ON COLUMN approvals.wait_ms IS 'How long the question waited for an answer.';
COMMENT ON COLUMN approvals.outcome IS 'allowed-once, allowed-always, rejected, cancelled, unavailable, timeout; pending (still waiting), or interrupted (the kernel stopped while it waited: the call never ran).';
COMMENT ON COLUMN approvals.seeded IS 'Copied from the parent session by a fork: filter with NOT seeded to count each question once.';

CREATE OR REPLACE VIEW code_runs AS
SELECT session_id, turn, step, call_id, started_at, duration_ms, status, error_code,
       coalesce(meta ->> '$.code',
                CASE WHEN json_valid(arguments) THEN json_extract_string(arguments, '$.code') END) AS code,
       meta ->> '$.stdout' AS stdout, meta ->> '$.stderr' AS stderr,
       TRY_CAST(meta -> '$.namesAdded' AS VARCHAR[]) AS names_added,
       TRY_CAST(meta -> '$.namesChanged' AS VARCHAR[]) AS names_changed,
       TRY_CAST(meta -> '$.namesRemoved' AS VARCHAR[]) AS names_removed,
       CASE WHEN json_type(meta -> '$.outputs') = 'ARRAY' THEN json_array_length(meta -> '$.outputs') END AS outputs,
       left(result, 500) AS result_summary, meta, call_seq, seeded
FROM tool_calls
WHERE name = 'python';
COMMENT ON VIEW code_runs IS 'Runs of the python tool: the code, its output and the namespace names it added, changed and removed.';
COMMENT ON COLUMN code_runs.status IS 'As tool_calls.status: waiting (for an approval click), running, done, failed, denied, aborted or interrupted.';
COMMENT ON COLUMN code_runs.code IS 'The code that ran.';
COMMENT ON COLUMN code_runs.stdout IS 'Captured standard output, as the tool reported it.';
COMMENT ON COLUMN code_runs.stderr IS 'Captured standard error, as the tool reported it.';
COMMENT ON COLUMN code_runs.names_added IS 'Names the run bound that did not exist before (which run created x: list_contains(names_added, ''x'')); NULL when the tool did not report them.';
COMMENT ON COLUMN code_runs.names_changed IS 'Existing names the run rebound or changed in place; NULL when not reported.';
COMMENT ON COLUMN code_runs.names_removed IS 'Names the run deleted from the namespace; NULL when not reported.';
COMMENT ON COLUMN code_runs.outputs IS 'Number of rich outputs (displays), when the tool reported them.';
COMMENT ON COLUMN code_runs.result_summary IS 'The first 500 characters of the result the model saw.';
COMMENT ON COLUMN code_runs.seeded IS 'Copied from the parent session by a fork: filter with NOT seeded to count each run once.';

CREATE OR REPLACE VIEW errors AS
SELECT session_id, end_seq AS seq, turn, NULL::INTEGER AS step, ended_at AS time,
       CASE WHEN end_reason = 'interrupted' THEN 'crash' ELSE 'turn' END AS source,
       coalesce(error_code, upper(end_reason)) AS code,
       coalesce(error_message, 'the kernel stopped during this turn; crash repair closed it') AS message,
       NULL::VARCHAR AS tool_name, seeded
FROM turns WHERE end_reason IN ('error', 'interrupted')
UNION ALL
SELECT session_id, first_seq AS seq, turn, step, started_at AS time, 'request' AS source,
       error_code AS code, error_message AS message, NULL::VARCHAR AS tool_name, seeded
FROM requests WHERE finish IN ('error', 'aborted')
UNION ALL
SELECT session_id, result_seq AS seq, turn, step, ended_at AS time, 'tool' AS source,
       coalesce(error_code, 'TOOL_FAILED') AS code, result AS message, name AS tool_name, seeded
FROM tool_calls WHERE is_error;
COMMENT ON VIEW errors IS 'Everything that went wrong: failed turns, crashed turns, failed model calls, failed tool calls.';
COMMENT ON COLUMN errors.seq IS 'seq of the event that records the failure.';
COMMENT ON COLUMN errors.source IS 'turn, crash, request or tool.';
COMMENT ON COLUMN errors.code IS 'Stable error code.';
COMMENT ON COLUMN errors.message IS 'What went wrong, as recorded.';
COMMENT ON COLUMN errors.tool_name IS 'For tool errors: the tool.';
COMMENT ON COLUMN errors.seeded IS 'Copied from the parent session by a fork: filter with NOT seeded to count each failure once.';

CREATE OR REPLACE VIEW sessions AS
WITH ev AS (
    SELECT session_id, count(*) AS events, max(time_ms) AS last_ms FROM t_events GROUP BY session_id
),
tu AS (
    SELECT session_id, count(*) AS turns FROM t_events WHERE type = 'turn/start' GROUP BY session_id
),
ti AS (
    SELECT session_id, arg_max(data ->> '$.title', seq) AS title
    FROM t_events WHERE type = 'session/title' GROUP BY session_id
),
pr AS (
    SELECT session_id, arg_min(text, seq) AS prompt FROM t_messages WHERE source = 'user' GROUP BY session_id
),
us AS (
    SELECT session_id, sum(input_tokens)::BIGINT AS input_tokens,
           sum(cached_input_tokens)::BIGINT AS cached_input_tokens,
           sum(output_tokens)::BIGINT AS output_tokens, sum(total_tokens)::BIGINT AS total_tokens,
           sum(cost) AS cost,
           bool_and(cost IS NOT NULL) AS cost_complete, bool_or(estimated) AS estimated
    FROM usage WHERE NOT seeded GROUP BY session_id
)
SELECT s.id AS session_id,
       coalesce(ti.title, left(trim(regexp_replace(pr.prompt, '\s+', ' ', 'g')), 80)) AS title,
       epoch_ms(s.created_ms) AS created, epoch_ms(ev.last_ms) AS last_active, s.notebook, s.cwd,
       s.parent_session, s.seed_length, coalesce(tu.turns, 0)::INTEGER AS turns,
       coalesce(ev.events, 0)::INTEGER AS events,
       coalesce(us.input_tokens, 0) AS input_tokens, coalesce(us.cached_input_tokens, 0) AS cached_input_tokens,
       coalesce(us.output_tokens, 0) AS output_tokens, coalesce(us.total_tokens, 0) AS total_tokens,
       us.cost, coalesce(us.cost_complete, true) AS cost_complete, s.journal,
       coalesce(us.estimated, false) AS estimated
FROM t_sessions s
LEFT JOIN ev ON ev.session_id = s.id
LEFT JOIN tu ON tu.session_id = s.id
LEFT JOIN ti ON ti.session_id = s.id
LEFT JOIN pr ON pr.session_id = s.id
LEFT JOIN us ON us.session_id = s.id;
COMMENT ON VIEW sessions IS 'One row per session: title, created, notebook, turns, tokens and cost.';
COMMENT ON COLUMN sessions.session_id IS 'Session id (a UUID).';
COMMENT ON COLUMN sessions.title IS 'The latest session/title, else the start of the first prompt.';
COMMENT ON COLUMN sessions.created IS 'When the session was created (UTC).';
COMMENT ON COLUMN sessions.last_active IS 'Time of its latest event.';
COMMENT ON COLUMN sessions.notebook IS 'The notebook it was started from, when known.';
COMMENT ON COLUMN sessions.cwd IS 'Working directory of the kernel.';
COMMENT ON COLUMN sessions.parent_session IS 'For a fork: the session it was forked from.';
COMMENT ON COLUMN sessions.seed_length IS 'For a fork: how many events were copied from the parent.';
COMMENT ON COLUMN sessions.turns IS 'Turns in the log (a fork''s copied turns included).';
COMMENT ON COLUMN sessions.events IS 'Events in the log.';
COMMENT ON COLUMN sessions.total_tokens IS 'Tokens of this session''s own requests (a fork''s copied prefix excluded).';
COMMENT ON COLUMN sessions.cost IS 'Sum of priced requests; NULL if none is priced.';
COMMENT ON COLUMN sessions.cost_complete IS 'False when some requests have no cost (no price, or estimated counts): cost is then a lower bound.';
COMMENT ON COLUMN sessions.journal IS 'The journal file, relative to the store directory.';
COMMENT ON COLUMN sessions.estimated IS 'Some token counts are estimates (the server sent no usage for some requests).';
