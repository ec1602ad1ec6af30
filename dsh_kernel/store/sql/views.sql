-- The public views of sessions.duckdb, every one of them, in the order they can be created.
-- Re-applied at every read-write open (CREATE OR REPLACE); a change here goes with a bump of
-- PROJECTION_VERSION (dsh_kernel/store/projection.py) — never a migration.

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
COMMENT ON COLUMN events.data IS 'The event data (JSON): query it with ->, ->> or json_extract. An image/data event keeps sha256 and mediaType; its bytes are in image_data.';

CREATE OR REPLACE VIEW messages AS
SELECT session_id, seq, turn, step, epoch_ms(time_ms) AS time, event_type AS type, role, source,
       cell_id, message_id, call_id, text, reasoning, tool_calls, has_content, is_error, interrupted, surface_op,
       seeded, replaced_by, surface_key
FROM t_messages;
COMMENT ON VIEW messages IS 'The conversation: user prompts and context, assistant answers, tool results — every one ever logged, including those a compaction later took off the model''s view (replaced_by).';
COMMENT ON COLUMN messages.seq IS 'seq of the message event (join events on session_id, seq for the raw data).';
COMMENT ON COLUMN messages.type IS 'user/message, assistant/message or tool/result.';
COMMENT ON COLUMN messages.role IS 'user or assistant (tool results are user-role messages with source tool).';
COMMENT ON COLUMN messages.source IS 'user (typed by a person), plugin (injected context, a compaction summary), model, or tool.';
COMMENT ON COLUMN messages.cell_id IS 'A message typed by a person in a notebook: the id of the cell that asked it (the source''s cellId); NULL otherwise.';
COMMENT ON COLUMN messages.message_id IS 'The message id.';
COMMENT ON COLUMN messages.call_id IS 'Tool results: the tool call answered.';
COMMENT ON COLUMN messages.text IS 'The message text (tool results: the result text).';
COMMENT ON COLUMN messages.reasoning IS 'The model''s reasoning text, if any.';
COMMENT ON COLUMN messages.tool_calls IS 'How many tools the assistant called in this message.';
COMMENT ON COLUMN messages.has_content IS 'False for content-less assistant messages, which are never sent back to the model.';
COMMENT ON COLUMN messages.is_error IS 'Tool results: the call failed.';
COMMENT ON COLUMN messages.interrupted IS 'The visible part of an answer whose stream was cut: by a cancel, or by a crash (kept by crash repair).';
COMMENT ON COLUMN messages.surface_op IS 'append, or replace: a copy that stands in for earlier messages on the model''s view (a compaction summary, a pruned tool result, the note for an overflowed turn).';
COMMENT ON COLUMN messages.seeded IS 'Copied from the parent session by a fork: filter with NOT seeded to count each message once.';
COMMENT ON COLUMN messages.replaced_by IS 'seq of the replacement (a compaction summary, a pruned copy) that took this message off the model''s view; NULL while the model still sees it. The history sent just before event X: seq < X AND (replaced_by IS NULL OR replaced_by > X) AND has_content, ORDER BY surface_key.';
COMMENT ON COLUMN messages.surface_key IS 'Order of the model''s view: the messages it sees at any point, sorted by surface_key, are its history in order (a replacement takes the place, and the key, of the first message it replaced).';

CREATE OR REPLACE VIEW tool_calls AS
WITH waiting AS (  -- approval questions with no answer yet, by the call they ask about
    SELECT session_id, any_value(turn) AS turn, any_value(step) AS step,
           any_value(data ->> '$.callId') FILTER (WHERE type = 'approval/asked') AS call_id
    FROM t_events WHERE type IN ('approval/asked', 'approval/decided')
    GROUP BY session_id, data ->> '$.id'
    HAVING count(*) FILTER (WHERE type = 'approval/decided') = 0
)
SELECT c.session_id, c.turn, c.step, c.call_id, c.name,
       -- origin: on the tool/call (so a call waiting, running or interrupted names its server too),
       -- else in its result's meta (every result of such a call, crash repair's too; older logs)
       coalesce(c.server, r.meta ->> '$.origin.mcp') AS server,
       c.arguments,
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
COMMENT ON COLUMN tool_calls.server IS 'The MCP server whose tool it is (the tool/call''s origin.mcp, else its result''s meta.origin.mcp; mcp_calls has the rest), whatever the status (waiting and running calls too); NULL for the kernel''s own tools.';
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

CREATE OR REPLACE VIEW mcp_calls AS
SELECT t.session_id, t.turn, t.step, t.call_id, t.name, t.server,
       coalesce(c.tool, t.meta ->> '$.origin.tool') AS tool, t.arguments,
       t.started_at, t.ended_at, t.duration_ms, t.status, t.is_error, t.error_code, t.error_name, t.result,
       t.meta -> '$.structuredContent' AS structured_content,
       TRY_CAST(t.meta -> '$.resources' AS VARCHAR[]) AS resources, t.call_seq, t.result_seq, t.seeded
FROM tool_calls t
JOIN t_tool_calls c ON c.session_id = t.session_id AND c.seq = t.call_seq  -- the call's origin.tool
WHERE t.server IS NOT NULL;
COMMENT ON VIEW mcp_calls IS 'One row per call to an MCP server''s tool, whatever its status (waiting, running, done, failed, denied, aborted, interrupted): the server, its own name for the tool, the arguments, how it ended and its structured content. Each is the row of tool_calls whose server is set.';
COMMENT ON COLUMN mcp_calls.call_id IS 'The call id the model chose (tool_calls.call_id).';
COMMENT ON COLUMN mcp_calls.name IS 'The name the model called the tool by: <server>__<tool>, made fit for the providers'' name rules (characters outside A-Z, a-z, 0-9, _ and - become _; a long one is cut and ends in a short hash).';
COMMENT ON COLUMN mcp_calls.server IS 'The MCP server, as mcp.json names it.';
COMMENT ON COLUMN mcp_calls.tool IS 'The tool''s own name on that server (as its tools/list gave it).';
COMMENT ON COLUMN mcp_calls.arguments IS 'The model''s raw argument JSON text.';
COMMENT ON COLUMN mcp_calls.started_at IS 'When the call was about to run (before any approval question).';
COMMENT ON COLUMN mcp_calls.ended_at IS 'When the result was logged; NULL while there is none (waiting, running).';
COMMENT ON COLUMN mcp_calls.duration_ms IS 'The call''s own duration when logged, else result time minus call time.';
COMMENT ON COLUMN mcp_calls.status IS 'As tool_calls.status: waiting (for an approval click), running (no result yet), done, failed, denied, aborted, or interrupted (the kernel stopped before a result: crash repair closed it; error_code TOOL_NOT_STARTED says it never ran, TOOL_OUTCOME_UNKNOWN that it may have).';
COMMENT ON COLUMN mcp_calls.is_error IS 'The call failed (any error status).';
COMMENT ON COLUMN mcp_calls.error_code IS 'Stable error code of a failed call: MCP_TOOL_ERROR (the server flagged its result an error), MCP_TIMEOUT (silent past the idle timeout, or over the deadline), MCP_SERVER_CRASHED (the server went away during the call), MCP_SERVER_UNAVAILABLE, MCP_ERROR, INVALID_ARGS (the arguments failed the server''s input schema, before approval), DENIED, ABORTED, ... (docs/mcp.md says what to do about each).';
COMMENT ON COLUMN mcp_calls.result IS 'The result text the model saw (the server''s text; an embedded resource as its URI; structured content as JSON when the server sent no text).';
COMMENT ON COLUMN mcp_calls.structured_content IS 'The server''s structuredContent (JSON), as it sent it; NULL when it sent none, or more than the kernel keeps (meta.structuredContentOmitted then says how much).';
COMMENT ON COLUMN mcp_calls.resources IS 'URIs of the resources and resource links the result held; NULL when none.';
COMMENT ON COLUMN mcp_calls.call_seq IS 'seq of the tool/call event.';
COMMENT ON COLUMN mcp_calls.result_seq IS 'seq of the tool/result event.';
COMMENT ON COLUMN mcp_calls.seeded IS 'Copied from the parent session by a fork: filter with NOT seeded to count each call once.';

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
ctx AS NOT MATERIALIZED (  -- the calibration of the token estimate in force (llm.calibration)
    SELECT session_id, seq,
           CASE WHEN data ->> '$.tokenCalibration' IN ('usage', 'tokenizer')
                     AND TRY_CAST(data ->> '$.tokenRatio' AS DOUBLE) > 0
                     AND json_type(data -> '$.tokenAllowance') IN ('BIGINT', 'UBIGINT')
                THEN TRY_CAST(data ->> '$.tokenRatio' AS DOUBLE) ELSE 1.0 END AS token_ratio,
           CASE WHEN data ->> '$.tokenCalibration' IN ('usage', 'tokenizer')
                     AND TRY_CAST(data ->> '$.tokenRatio' AS DOUBLE) > 0
                     AND json_type(data -> '$.tokenAllowance') IN ('BIGINT', 'UBIGINT')
                THEN CAST(data ->> '$.tokenAllowance' AS BIGINT) ELSE 0 END AS token_allowance
    FROM t_events WHERE type = 'request/context'
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
           CASE WHEN a.estimated
                THEN greatest(0, ceil((coalesce(a.est_input_tokens, 0) + coalesce(h.header_tokens, 0))
                                      * coalesce(x.token_ratio, 1.0))
                                 + coalesce(x.token_allowance, 0))::BIGINT
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
    ASOF LEFT JOIN ctx x ON x.session_id = a.session_id AND x.seq < a.first_seq
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
COMMENT ON COLUMN requests.input_tokens IS 'Uncached input tokens, as the server reported them; when estimated, the token meter''s estimate of the history (a summary call: the range it summarised), system prompt and tools sent — for an agent call calibrated to the route''s server as its request/context records it (ceil(estimate × tokenRatio) + tokenAllowance), the figure the meter measured the request with.';
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
COMMENT ON COLUMN requests.config IS 'The call config (provider, model, reasoningEffort, temperature, seed, maxTokens, stop) as JSON; a summary call: what its compaction/summary records (provider, model, maxTokens).';
COMMENT ON COLUMN requests.header_seq IS 'seq of the request/header event in force: its data.header is the full envelope.';
COMMENT ON COLUMN requests.header_reason IS 'Why that header was logged: initial, resume or change.';
COMMENT ON COLUMN requests.chunks IS 'Stream chunks received (0: the call was cut before its first chunk; NULL for a summary call, which is not logged as chunks).';
COMMENT ON COLUMN requests.first_seq IS 'seq of the first chunk: the history sent is the surface before it (no chunk: the event that closed the call; a summary call: its compaction/summary).';
COMMENT ON COLUMN requests.last_seq IS 'seq of the last chunk (NULL: none came).';
COMMENT ON COLUMN requests.seeded IS 'True when the request belongs to the seed copied from a parent session (a fork).';
COMMENT ON COLUMN requests.purpose IS 'agent (the loop''s own call) or compaction (a summary call: compactions has the rest, by compaction_id).';
COMMENT ON COLUMN requests.compaction_id IS 'A summary call''s compaction (compactions.compaction_id); NULL for the agent''s calls.';

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

CREATE OR REPLACE VIEW price_book AS
SELECT provider, model, input_per_mtok, cached_input_per_mtok, cache_write_per_mtok, output_per_mtok,
       'user' AS source
FROM prices
UNION ALL
SELECT l.provider, l.model, l.input_per_mtok, l.cached_input_per_mtok, l.cache_write_per_mtok,
       l.output_per_mtok, 'catalogue' AS source
FROM list_prices l
WHERE NOT EXISTS (SELECT 1 FROM prices p WHERE p.provider = l.provider AND p.model = l.model);
COMMENT ON VIEW price_book IS 'The price in force per model: the user''s (prices) if set, else the catalogue''s list price.';
COMMENT ON COLUMN price_book.source IS 'user (set_price) or catalogue (list_prices).';

CREATE OR REPLACE VIEW image_data AS
SELECT sha256 AS hash, media_type, octet_length(data)::BIGINT AS bytes, data
FROM t_image_data;
COMMENT ON VIEW image_data IS 'The bytes of every image in the store, one row per hash: join images on hash. The events view keeps only sha256 and mediaType of an image/data event; the base64 stays in the journal.';
COMMENT ON COLUMN image_data.hash IS 'Hex sha256 of data (images.hash).';
COMMENT ON COLUMN image_data.media_type IS 'image/png, image/jpeg, ...';
COMMENT ON COLUMN image_data.bytes IS 'Size of data.';
COMMENT ON COLUMN image_data.data IS 'The image bytes (e.g. IPython.display.Image(data=...) in a %%sql result).';

CREATE OR REPLACE VIEW images AS
SELECT i.session_id, i.seq, i.turn, i.step, epoch_ms(i.time_ms) AS time, i.source, i.call_id,
       i.position, i.sha256 AS hash, i.media_type, i.width, i.height, i.bytes, i.description,
       i.reduction,
       CASE WHEN r.first_seq IS NULL OR r.config IS NULL THEN NULL
            ELSE coalesce(TRY_CAST(r.config ->> '$.images' AS BOOLEAN), false) END AS sent_to_model,
       r.request, d.sha256 IS NOT NULL AS stored, i.seeded
FROM t_images i
ASOF LEFT JOIN (SELECT * FROM requests WHERE purpose = 'agent') r
    ON r.session_id = i.session_id AND r.first_seq > i.seq
LEFT JOIN t_image_data d ON d.sha256 = i.sha256;
COMMENT ON VIEW images IS 'One row per image a message carried: a tool result''s (call set) or one attached to a user message (call NULL); whether the model was sent it; the bytes are in image_data.';
COMMENT ON COLUMN images.seq IS 'seq of the user/message or tool/result event holding the image.';
COMMENT ON COLUMN images.time IS 'When the message holding the image was logged (UTC).';
COMMENT ON COLUMN images.source IS 'tool (a tool result''s image), user (attached to a person''s message) or plugin (injected context).';
COMMENT ON COLUMN images.call_id IS 'The tool call whose result holds the image; NULL for an image attached to a user message.';
COMMENT ON COLUMN images.position IS '1-based order of the image among the images of its message.';
COMMENT ON COLUMN images.hash IS 'Hex sha256 of the image bytes: join image_data on hash for them.';
COMMENT ON COLUMN images.media_type IS 'image/png, image/jpeg, ...';
COMMENT ON COLUMN images.width IS 'Width in pixels, as stored (after any reduction).';
COMMENT ON COLUMN images.height IS 'Height in pixels, as stored.';
COMMENT ON COLUMN images.bytes IS 'Size of the stored (reduced) image.';
COMMENT ON COLUMN images.description IS 'The text stand-in a model that takes no images is sent instead (built when the image was captured).';
COMMENT ON COLUMN images.reduction IS 'How the original was reduced (e.g. 2000x1500 PNG 412 kB → 1024x768 PNG 88 kB); NULL when sent as captured.';
COMMENT ON COLUMN images.sent_to_model IS 'The first agent request after the image went to a route that takes images (its config has images: true), so it was sent as an image; false: as its description; NULL: no request followed yet. A compaction''s summary call always gets the descriptions.';
COMMENT ON COLUMN images.request IS 'That first agent request after the image (requests.request of the same session); NULL when none followed.';
COMMENT ON COLUMN images.stored IS 'The store holds the bytes (image_data has the hash); false for a journal whose image/data is missing or does not match its hash.';
COMMENT ON COLUMN images.seeded IS 'Copied from the parent session by a fork: filter with NOT seeded to count each image once.';

CREATE OR REPLACE VIEW compactions AS
WITH ev AS (
    SELECT session_id, seq, type, time_ms, turn, step, data, seeded,
           data ->> '$.compactionId' AS compaction_id
    FROM t_events  -- starts_with is pushed into the scan (an IN list alone reads every row's data)
    WHERE starts_with(type, 'compaction/')
      AND type IN ('compaction/start', 'compaction/prune', 'compaction/summary', 'compaction/end')
),
b AS (
    SELECT session_id, compaction_id,
           min(seq) FILTER (WHERE type = 'compaction/start') AS start_seq,
           min(time_ms) FILTER (WHERE type = 'compaction/start') AS start_ms,
           any_value(data) FILTER (WHERE type = 'compaction/start') AS start_data,
           any_value(turn) FILTER (WHERE type = 'compaction/start') AS turn,
           any_value(step) FILTER (WHERE type = 'compaction/start') AS step,
           bool_or(seeded) AS seeded,
           count(*) FILTER (WHERE type = 'compaction/prune') AS pruned,
           min(seq) FILTER (WHERE type = 'compaction/summary') AS summary_seq,
           any_value(data) FILTER (WHERE type = 'compaction/summary') AS s,
           min(seq) FILTER (WHERE type = 'compaction/end') AS end_seq,
           min(time_ms) FILTER (WHERE type = 'compaction/end') AS end_ms,
           any_value(data) FILTER (WHERE type = 'compaction/end') AS end_data
    FROM ev GROUP BY session_id, compaction_id
),
msg AS (  -- the user/message that replaced the range: it names its compaction in its source form
    SELECT session_id, data ->> '$.source.form.compactionId' AS compaction_id, min(seq) AS message_seq
    FROM t_events
    WHERE type = 'user/message' AND json_type(surface_op) = 'OBJECT'
    GROUP BY ALL
),
live AS (
    SELECT session_id, max(seq) AS end_seed FROM t_events WHERE type = 'session/end-seed' GROUP BY ALL
)
SELECT b.session_id, b.compaction_id, b.turn, b.step, b.start_data ->> '$.trigger' AS trigger,
       CASE WHEN b.end_seq IS NOT NULL AND coalesce(json_type(b.end_data -> '$.error'), 'NULL') = 'NULL'
                THEN 'done'
            WHEN b.end_seq IS NOT NULL THEN 'failed'
            WHEN l.end_seed > b.start_seq THEN 'stale'
            ELSE 'orphaned' END AS status,
       b.s ->> '$.method' AS method,
       b.s ->> '$.failure.code' AS failure_code, b.s ->> '$.failure.message' AS failure_message,
       epoch_ms(b.start_ms) AS started_at, b.end_ms - b.start_ms AS duration_ms,
       b.start_seq, b.summary_seq, m.message_seq, b.end_seq,
       TRY_CAST(b.s -> '$.turns' AS INTEGER[]) AS turns,
       TRY_CAST(b.s -> '$.shadowedSeqs' AS INTEGER[]) AS shadowed_seqs,
       TRY_CAST(b.s ->> '$.shadowedTokenCount' AS BIGINT) AS tokens_before,
       TRY_CAST(b.s ->> '$.summaryTokenCount' AS BIGINT) AS tokens_after,
       TRY_CAST(b.start_data ->> '$.tokens' AS BIGINT) AS context_tokens,
       TRY_CAST(b.start_data ->> '$.contextWindow' AS BIGINT) AS context_window,
       b.pruned::INTEGER AS pruned,
       b.s ->> '$.provider' AS provider, b.s ->> '$.model' AS model,
       TRY_CAST(b.s ->> '$.maxTokens' AS BIGINT) AS max_tokens,
       TRY_CAST(b.s ->> '$.usage.inputTokens' AS BIGINT) AS input_tokens,
       TRY_CAST(b.s ->> '$.usage.cacheReadTokens' AS BIGINT) AS cache_read_tokens,
       TRY_CAST(b.s ->> '$.usage.cacheWriteTokens' AS BIGINT) AS cache_write_tokens,
       TRY_CAST(b.s ->> '$.usage.outputTokens' AS BIGINT) AS output_tokens,
       TRY_CAST(b.s ->> '$.usage.reasoningTokens' AS BIGINT) AS reasoning_tokens,
       b.end_data ->> '$.error.code' AS error_code, b.end_data ->> '$.error.message' AS error_message,
       b.s ->> '$.summary' AS summary, coalesce(b.seeded, false) AS seeded
FROM b
LEFT JOIN msg m USING (session_id, compaction_id)
LEFT JOIN live l USING (session_id);
COMMENT ON VIEW compactions IS 'One row per compaction attempt (automatic on pressure or overflow, or %agent compact): what it replaced, how, what it cost and how it ended. The replaced messages stay in messages, with replaced_by set.';
COMMENT ON COLUMN compactions.compaction_id IS 'The compaction id (compactionId of its compaction/* events; requests.compaction_id of its summary call).';
COMMENT ON COLUMN compactions.turn IS 'The turn it ran in; NULL for a manual compaction between turns (%agent compact).';
COMMENT ON COLUMN compactions.step IS 'The step it ran in (before that step''s request); NULL between turns.';
COMMENT ON COLUMN compactions.trigger IS 'pressure (the next request would pass the threshold of the window), overflow (the request did not fit), or manual.';
COMMENT ON COLUMN compactions.status IS 'done (its end was written without error: the summary landed, or pruning alone made room), failed (its end carries an error: nothing replaced), orphaned (no end in the live log: the kernel stopped mid-compaction; the surface it found, or left if its summary had landed, is in force), stale (an orphan from before a later session/end-seed: a dead lifecycle, ignored).';
COMMENT ON COLUMN compactions.method IS 'How the summary was written: model (a summary call) or reduction (deterministic: old tool outputs to their first lines, old turns to their first and last messages); NULL when no summary landed.';
COMMENT ON COLUMN compactions.failure_code IS 'Why a summary call''s answer was not used (the reduction stood in): RATE_LIMIT, CONTEXT_WINDOW_EXCEEDED, NO_SHRINK, SUMMARY_UNFIT (the answer failed the substance check: failure_message says which), MAX_TOKENS, EMPTY_SUMMARY, ...';
COMMENT ON COLUMN compactions.failure_message IS 'The same, in words.';
COMMENT ON COLUMN compactions.started_at IS 'When the compaction began (compaction/start).';
COMMENT ON COLUMN compactions.duration_ms IS 'From compaction/start to compaction/end; NULL without an end.';
COMMENT ON COLUMN compactions.start_seq IS 'seq of compaction/start.';
COMMENT ON COLUMN compactions.summary_seq IS 'seq of compaction/summary; NULL when no summary landed.';
COMMENT ON COLUMN compactions.message_seq IS 'seq of the <compacted-summary> user/message that replaced the range on the model''s view (messages.replaced_by of what it replaced).';
COMMENT ON COLUMN compactions.end_seq IS 'seq of compaction/end; NULL for an orphan.';
COMMENT ON COLUMN compactions.turns IS 'The turns whose messages the summary stands for, whole or in part.';
COMMENT ON COLUMN compactions.shadowed_seqs IS 'seqs of every message the summary replaced, in the model''s order.';
COMMENT ON COLUMN compactions.tokens_before IS 'The replaced messages'' size (token meter estimate).';
COMMENT ON COLUMN compactions.tokens_after IS 'The summary message''s size (token meter estimate).';
COMMENT ON COLUMN compactions.context_tokens IS 'The size of the whole history when the compaction began (the meter''s reading).';
COMMENT ON COLUMN compactions.context_window IS 'The context window it compacted for, when known.';
COMMENT ON COLUMN compactions.pruned IS 'Huge tool results cut to their head and tail first (compaction/prune events).';
COMMENT ON COLUMN compactions.provider IS 'Provider of the summary call; NULL when none was made (a reduction from the start).';
COMMENT ON COLUMN compactions.model IS 'Model of the summary call.';
COMMENT ON COLUMN compactions.max_tokens IS 'The summary call''s output cap.';
COMMENT ON COLUMN compactions.input_tokens IS 'The summary call''s uncached input tokens, as the server reported them (NULL: no usage reported).';
COMMENT ON COLUMN compactions.output_tokens IS 'The summary call''s output tokens, as reported.';
COMMENT ON COLUMN compactions.error_code IS 'Why a failed compaction replaced nothing (its compaction/end error): ABORTED (cancelled), or the code of what went wrong.';
COMMENT ON COLUMN compactions.error_message IS 'The same, in words.';
COMMENT ON COLUMN compactions.summary IS 'The summary text (without the framing the replacing message adds).';
COMMENT ON COLUMN compactions.seeded IS 'Copied from the parent session by a fork: filter with NOT seeded to count each compaction once.';

CREATE OR REPLACE VIEW notebook_edits AS
WITH ev AS (
    SELECT session_id, seq, turn, step, time_ms, seeded, data,
           CAST(data -> '$.cells' AS JSON[]) AS cells,
           CAST(data -> '$.inserted' AS VARCHAR[]) AS inserted
    FROM t_events
    WHERE type = 'notebook/insert'
)
SELECT ev.session_id, ev.seq, ev.turn, ev.step, epoch_ms(ev.time_ms) AS time,
       ev.data ->> '$.callId' AS call_id,
       ev.data ->> '$.notebook' AS notebook,
       ev.data ->> '$.after' AS after_cell,
       r.i::INTEGER AS position,
       ev.cells[r.i + 1] ->> '$.cell_type' AS cell_type,
       ev.cells[r.i + 1] ->> '$.source' AS source,
       ev.cells[r.i + 1] ->> '$.sha256' AS sha256,
       CASE
           WHEN ev.data ->> '$.applied' = 'set_next_input' AND r.i > 0 THEN 'card'
           ELSE ev.data ->> '$.applied'
       END AS applied,
       ev.inserted[r.i + 1] AS cell_id,
       ev.seeded
FROM ev, range(len(ev.cells)) AS r(i);
COMMENT ON VIEW notebook_edits IS 'One row per cell the agent added to a notebook with notebook_insert, in order; read from the notebook/insert events.';
COMMENT ON COLUMN notebook_edits.session_id IS 'The session (sessions.session_id).';
COMMENT ON COLUMN notebook_edits.seq IS 'seq of the notebook/insert event (one per call).';
COMMENT ON COLUMN notebook_edits.turn IS 'The turn of the call.';
COMMENT ON COLUMN notebook_edits.step IS 'The step of the call.';
COMMENT ON COLUMN notebook_edits.time IS 'When the insertion was applied (UTC).';
COMMENT ON COLUMN notebook_edits.call_id IS 'The notebook_insert call (tool_calls.call_id).';
COMMENT ON COLUMN notebook_edits.notebook IS 'The notebook''s path as the frontend named it (else the saved file''s); NULL when unknown.';
COMMENT ON COLUMN notebook_edits.after_cell IS 'The id of the cell the new cells went below (set_next_input: the anchor asked for).';
COMMENT ON COLUMN notebook_edits.position IS '0-based position of this cell among the cells of its call.';
COMMENT ON COLUMN notebook_edits.cell_type IS 'code or markdown.';
COMMENT ON COLUMN notebook_edits.source IS 'The cell''s source as inserted (a code cell on the dsh kernel starts with %%python).';
COMMENT ON COLUMN notebook_edits.sha256 IS 'sha256 (hex) of source.';
COMMENT ON COLUMN notebook_edits.applied IS 'extension (inserted by the frontend extension), set_next_input (offered in the execute reply; the frontend may ignore it) or card (only shown to copy).';
COMMENT ON COLUMN notebook_edits.cell_id IS 'The new cell''s id (extension only); NULL otherwise.';
COMMENT ON COLUMN notebook_edits.seeded IS 'The row is a fork''s copy of its parent''s event.';

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
       r.finish, r.seeded, r.estimated, p.source AS price_source, r.purpose
FROM requests r
LEFT JOIN price_book p ON p.provider = r.provider AND p.model = r.model
WHERE r.input_tokens IS NOT NULL OR r.output_tokens IS NOT NULL;
COMMENT ON VIEW usage IS 'Tokens by request (failed attempts that reported usage included; estimated where the server sent none; compaction summary calls included, by purpose), with cache hits and cost.';
COMMENT ON COLUMN usage.request IS 'requests.request of the same session.';
COMMENT ON COLUMN usage.time IS 'When the request was sent.';
COMMENT ON COLUMN usage.input_tokens IS 'Uncached input tokens.';
COMMENT ON COLUMN usage.cached_input_tokens IS 'Input tokens served from the provider''s cache.';
COMMENT ON COLUMN usage.cache_write_tokens IS 'Input tokens written to the provider''s cache.';
COMMENT ON COLUMN usage.output_tokens IS 'Output tokens (reasoning included).';
COMMENT ON COLUMN usage.reasoning_tokens IS 'Reasoning tokens (already inside output_tokens).';
COMMENT ON COLUMN usage.total_tokens IS 'input + cached input + cache write + output.';
COMMENT ON COLUMN usage.cost IS 'Cost at the user''s price (prices, set_price) if any, else the catalogue''s list price (list_prices); NULL when the model has neither, or when the counts are estimated (unless every price of the model is zero).';
COMMENT ON COLUMN usage.finish IS 'How the request ended (error attempts that reported usage are billed too).';
COMMENT ON COLUMN usage.estimated IS 'The server sent no usage for this request: the counts are the token meter''s estimate (chars / 4; the input calibrated to the server, as its request/context records) and the cost is unknown.';
COMMENT ON COLUMN usage.price_source IS 'Where the price came from: user (set_price), catalogue (list price), or NULL (unknown).';
COMMENT ON COLUMN usage.purpose IS 'agent or compaction (a summary call): a session''s and a turn''s cost include their compactions.';

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
           sum(output_tokens)::BIGINT AS output_tokens, fsum(cost) AS cost,
           bool_and(cost IS NOT NULL) AS cost_complete, bool_or(estimated) AS estimated
    FROM usage GROUP BY session_id, turn
),
tc AS (
    SELECT session_id, turn, count(*) AS tool_calls, count(*) FILTER (WHERE is_error) AS tool_errors
    FROM t_tool_results WHERE surface_op = 'append' GROUP BY session_id, turn
),
pr AS (
    SELECT session_id, turn, arg_min(text, seq) AS prompt, arg_min_null(cell_id, seq) AS cell_id
    FROM t_messages WHERE source = 'user' GROUP BY session_id, turn
),
lo AS (  -- the newest rewind note about each turn (t_messages.left_turn: only those notes have one)
    SELECT session_id, left_turn AS turn, arg_max(coalesce(left_why, 'unknown'), seq) AS left_out
    FROM t_messages WHERE left_turn IS NOT NULL GROUP BY session_id, left_turn
)
SELECT m.session_id, m.turn, epoch_ms(m.start_ms) AS started_at, epoch_ms(m.end_ms) AS ended_at,
       m.end_ms - m.start_ms AS duration_ms,
       m.end_data ->> '$.reason.kind' AS end_reason,
       m.end_data ->> '$.reason.error.code' AS error_code,
       m.end_data ->> '$.reason.error.message' AS error_message,
       pr.prompt, pr.cell_id, lo.left_out, m.steps::INTEGER AS steps, coalesce(u.requests, 0)::INTEGER AS requests,
       coalesce(tc.tool_calls, 0)::INTEGER AS tool_calls, coalesce(tc.tool_errors, 0)::INTEGER AS tool_errors,
       coalesce(u.input_tokens, 0) AS input_tokens, coalesce(u.cached_input_tokens, 0) AS cached_input_tokens,
       coalesce(u.output_tokens, 0) AS output_tokens, u.cost,
       m.start_seq, m.end_seq, m.start_seq < coalesce(s.seed_length, 0) AS seeded,
       coalesce(u.cost_complete, true) AS cost_complete, coalesce(u.estimated, false) AS estimated,
       m.end_data ->> '$.reason.note' AS end_note
FROM marks m
LEFT JOIN u USING (session_id, turn)
LEFT JOIN tc USING (session_id, turn)
LEFT JOIN pr USING (session_id, turn)
LEFT JOIN lo USING (session_id, turn)
LEFT JOIN t_sessions s ON s.id = m.session_id;
COMMENT ON VIEW turns IS 'One row per turn: when, how it ended, the prompt, steps, requests, tools, tokens and cost.';
COMMENT ON COLUMN turns.turn IS 'Turn number, from 1.';
COMMENT ON COLUMN turns.ended_at IS 'NULL while the turn is still open.';
COMMENT ON COLUMN turns.duration_ms IS 'turn/end minus turn/start.';
COMMENT ON COLUMN turns.end_reason IS 'completed (end_note says when without a reply), aborted, blocked, error, max-steps, max-tokens, or interrupted (the kernel stopped: crash repair closed it).';
COMMENT ON COLUMN turns.error_code IS 'For end_reason error: the failure code.';
COMMENT ON COLUMN turns.end_note IS 'For end_reason completed without the model''s reply: no-reply (after a tool step the model ended its turn with nothing; the tool results stand) or repeated-call (it kept repeating a tool call that was no longer run); NULL otherwise.';
COMMENT ON COLUMN turns.prompt IS 'The first message typed by the user in the turn.';
COMMENT ON COLUMN turns.cell_id IS 'The notebook cell that asked the turn (its first user message''s cellId); NULL when not asked from a chat cell.';
COMMENT ON COLUMN turns.left_out IS 'Why the turn is out of the model''s context, as the newest rewind note about it in this session says: rerun (its cell was run again), below (a cell above it was re-run), deleted (its cell was deleted), after (it came after the point the context was rewound to); unknown (a note that gave no reason). NULL while the turn is in the model''s context.';
COMMENT ON COLUMN turns.steps IS 'Steps (model call plus its tools) in the turn.';
COMMENT ON COLUMN turns.requests IS 'Model requests with token counts (reported or estimated).';
COMMENT ON COLUMN turns.tool_calls IS 'Tool results in the turn.';
COMMENT ON COLUMN turns.tool_errors IS 'Failed tool results in the turn.';
COMMENT ON COLUMN turns.cost IS 'Cost of the turn''s requests, where priced (see cost_complete).';
COMMENT ON COLUMN turns.seeded IS 'The turn was copied from a parent session (a fork).';
COMMENT ON COLUMN turns.cost_complete IS 'False when some request of the turn has no cost (no price, or estimated counts): cost is then a lower bound.';
COMMENT ON COLUMN turns.estimated IS 'Some token counts of the turn are estimates (the server sent no usage).';
COMMENT ON COLUMN turns.requests IS 'Model requests with token counts (reported or estimated), the summary calls of its compactions included.';
COMMENT ON COLUMN turns.cost IS 'Cost of the turn''s requests (its compactions'' summary calls included), where priced (see cost_complete).';

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
pr AS (  -- what the person typed (a cell's raw text), not its expansion of $`x` references
    SELECT m.session_id, arg_min(coalesce(e.data ->> '$.source.cell.raw', m.text), m.seq) AS prompt
    FROM t_messages m LEFT JOIN t_events e ON e.session_id = m.session_id AND e.seq = m.seq
    WHERE m.source = 'user' GROUP BY m.session_id
),
us AS (
    SELECT session_id, sum(input_tokens)::BIGINT AS input_tokens,
           sum(cached_input_tokens)::BIGINT AS cached_input_tokens,
           sum(output_tokens)::BIGINT AS output_tokens, sum(total_tokens)::BIGINT AS total_tokens,
           fsum(cost) AS cost,
           bool_and(cost IS NOT NULL) AS cost_complete, bool_or(estimated) AS estimated
    FROM usage WHERE NOT seeded GROUP BY session_id
)
SELECT s.id AS session_id,
       coalesce(ti.title, left(trim(regexp_replace(pr.prompt, '\s+', ' ', 'g')), 80)) AS title,
       epoch_ms(s.created_ms) AS created, epoch_ms(ev.last_ms) AS last_active, s.notebook, s.cwd,
       s."user", s.ai_policy,
       s.parent_session,
       CASE WHEN s.parent_session IS NOT NULL THEN coalesce(s.parent_kind, 'fork') END AS parent_kind,
       s.seed_length, coalesce(tu.turns, 0)::INTEGER AS turns,
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
COMMENT ON COLUMN sessions.title IS 'The latest session/title, else the start of the first prompt as the user typed it (references such as $`x` unexpanded).';
COMMENT ON COLUMN sessions.created IS 'When the session was created (UTC).';
COMMENT ON COLUMN sessions.last_active IS 'Time of its latest event.';
COMMENT ON COLUMN sessions.notebook IS 'The notebook it was started from, when known.';
COMMENT ON COLUMN sessions.cwd IS 'Working directory of the kernel.';
COMMENT ON COLUMN sessions."user" IS 'Who the session is for (JUPYTERHUB_USER, else USER, else the account name); NULL for sessions written before dsh-kernel recorded it.';
COMMENT ON COLUMN sessions.ai_policy IS 'The AI policy in force when the session was created: full, explain or off; NULL before dsh-kernel recorded it.';
COMMENT ON COLUMN sessions.parent_session IS 'For a fork: the session it was forked from.';
COMMENT ON COLUMN sessions.parent_kind IS 'How the session came from parent_session: fork (%agent fork; also a session written before the kind was recorded), rewind (a chat cell re-run above the end of the conversation), policy (the course''s AI policy changed); NULL without a parent. branches has the lineage.';
COMMENT ON COLUMN sessions.seed_length IS 'For a fork: how many events were copied from the parent.';
COMMENT ON COLUMN sessions.turns IS 'Turns in the log (a fork''s copied turns included).';
COMMENT ON COLUMN sessions.events IS 'Events in the log.';
COMMENT ON COLUMN sessions.total_tokens IS 'Tokens of this session''s own requests (a fork''s copied prefix excluded).';
COMMENT ON COLUMN sessions.cost IS 'Sum of priced requests; NULL if none is priced.';
COMMENT ON COLUMN sessions.cost_complete IS 'False when some requests have no cost (no price, or estimated counts): cost is then a lower bound.';
COMMENT ON COLUMN sessions.journal IS 'The journal file, relative to the store directory.';
COMMENT ON COLUMN sessions.estimated IS 'Some token counts are estimates (the server sent no usage for some requests).';

CREATE OR REPLACE VIEW branches AS
WITH RECURSIVE up(session_id, node, depth, path) AS (  -- each child's ancestors, nearest first
    SELECT id, parent_session, 1, [id, parent_session] FROM t_sessions WHERE parent_session IS NOT NULL
    UNION ALL
    SELECT u.session_id, p.parent_session, u.depth + 1, list_append(u.path, p.parent_session)
    FROM up u JOIN t_sessions p ON p.id = u.node
    WHERE p.parent_session IS NOT NULL AND NOT list_contains(u.path, p.parent_session)  -- no cycle
),
lineage AS (
    SELECT session_id, arg_max(node, depth) AS root_session, max(depth)::INTEGER AS depth
    FROM up GROUP BY session_id
),
tt AS (  -- the turns each child copied, and its first own turn
    SELECT e.session_id, max(e.turn) FILTER (WHERE e.seeded) AS last_seeded,
           min(e.turn) FILTER (WHERE NOT e.seeded) AS first_live
    FROM t_events e JOIN t_sessions s ON s.id = e.session_id
    WHERE e.type = 'turn/start' AND s.parent_session IS NOT NULL
    GROUP BY e.session_id
),
ctx AS (  -- the first own user message carrying the rewind's branch context
    SELECT e.session_id, arg_min(e.data -> '$.source.context', e.seq) AS context
    FROM t_events e JOIN t_sessions s ON s.id = e.session_id
    WHERE e.type = 'user/message' AND NOT e.seeded AND s.parent_session IS NOT NULL
      AND (e.data -> '$.source.context.branch') IS NOT NULL
    GROUP BY e.session_id
),
cells AS (
    SELECT session_id, turn, arg_min_null(cell_id, seq) AS cell_id
    FROM t_messages WHERE source = 'user' AND NOT seeded
      AND session_id IN (SELECT id FROM t_sessions WHERE parent_session IS NOT NULL)
    GROUP BY session_id, turn
)
SELECT s.id AS session_id, s.parent_session, coalesce(s.parent_kind, 'fork') AS parent_kind,
       l.root_session, l.depth, epoch_ms(s.created_ms) AS created_at,
       coalesce(TRY_CAST(c.context ->> '$.branch.turn' AS INTEGER), q.last_seeded, 0) AS forked_after_turn,
       q.first_live AS turn, ce.cell_id,
       TRY_CAST(c.context ->> '$.branch.replaces' AS INTEGER) AS replaces_turn,
       list_transform(TRY_CAST(c.context -> '$.branch.dropped' AS JSON[]),
                      lambda d: TRY_CAST(d ->> '$.turn' AS INTEGER)) AS dropped_turns,
       TRY_CAST(c.context -> '$.names' AS VARCHAR[]) AS names
FROM t_sessions s
JOIN lineage l ON l.session_id = s.id
LEFT JOIN tt q ON q.session_id = s.id
LEFT JOIN ctx c ON c.session_id = s.id
LEFT JOIN cells ce ON ce.session_id = s.id AND ce.turn = q.first_live
WHERE s.parent_session IS NOT NULL;
COMMENT ON VIEW branches IS 'One row per session that came from another (a fork, a rewind when a chat cell is re-run above the end of the conversation, a policy change): its parent, the root of its lineage, where it branched off and what it left behind. The branches of a session: WHERE root_session = ?.';
COMMENT ON COLUMN branches.session_id IS 'The branch (sessions.session_id).';
COMMENT ON COLUMN branches.parent_session IS 'The session it came from (its header''s parentSession).';
COMMENT ON COLUMN branches.parent_kind IS 'fork (%agent fork; also a session written before the kind was recorded), rewind (a re-run chat cell) or policy (the course''s AI policy changed): sessions.parent_kind.';
COMMENT ON COLUMN branches.root_session IS 'The first session of its lineage: parent_session followed up to a session without a parent (a parent not in the store, e.g. deleted, ends the chain and is the root).';
COMMENT ON COLUMN branches.depth IS 'Steps up to root_session: 1 for a direct child of the root, 2 for a grandchild, ...';
COMMENT ON COLUMN branches.created_at IS 'When the branch was created (UTC).';
COMMENT ON COLUMN branches.forked_after_turn IS 'The parent''s last turn the branch carries: the rewind''s branch.turn, else the last turn copied from the parent; 0 when none was.';
COMMENT ON COLUMN branches.turn IS 'The first turn of the branch''s own (not copied); NULL until it has one.';
COMMENT ON COLUMN branches.cell_id IS 'The notebook cell that asked that turn; NULL when not asked from a chat cell.';
COMMENT ON COLUMN branches.replaces_turn IS 'A rewind: the parent''s turn the same cell had asked (the turn the re-run replaces); NULL otherwise.';
COMMENT ON COLUMN branches.dropped_turns IS 'A rewind: the parent''s turns after the fork point this branch does not carry; NULL for a fork or a policy fork.';
COMMENT ON COLUMN branches.names IS 'A rewind: the notebook names listed in the context of its first turn (context.names); NULL otherwise.';
