-- Migration m0006_compaction: compaction in the store (issue 16). Shipped: never edit, add a migration
-- instead.
--   * t_messages gets the surface fold ingest keeps (dsh_kernel.store.ingest.surface): replaced_by,
--     the replacement that took a message off the model's view, and surface_key, its order there;
--     so requests.message_count (and the estimated input tokens) count what was actually sent;
--   * compactions: one row per compaction attempt, read from the compaction/* events;
--   * requests and usage get purpose (agent | compaction): a compaction's summary call is a request
--     like any other (ingest keeps one t_compaction_calls row per call, dsh_kernel.store.ingest.calls),
--     numbered in log order with the agent's, and priced from price_book;
--   * messages shows replaced_by and surface_key; images takes its sent_to_model from the agent's
--     requests only.
-- The backfill (ingest_surface.backfill, then 0006_backfill.sql) does the same for the rows ingested
-- before.

ALTER TABLE t_messages ADD COLUMN surface_key INTEGER;
COMMENT ON COLUMN t_messages.surface_key IS 'Order on the surface: an appended message''s own seq, a replacement the key of the first message it replaced (ingest_surface).';
ALTER TABLE t_messages ADD COLUMN replaced_by INTEGER;
COMMENT ON COLUMN t_messages.replaced_by IS 'seq of the replacement that took this message off the surface; NULL while the model still sees it.';
COMMENT ON COLUMN t_messages.surface_op IS 'append, or replace (a compaction summary, a pruned tool result, the note for an overflowed turn).';
COMMENT ON COLUMN t_attempts.message_count IS 'Messages with content on the surface when the call was made (replacements folded in): the history sent.';
COMMENT ON COLUMN t_attempts.est_input_tokens IS 'Estimated tokens of the history sent (the surface counted by message_count), header excluded.';
COMMENT ON COLUMN _ingest_state.messages IS 'Messages with content on the surface after the last ingested event.';
COMMENT ON COLUMN _ingest_state.message_tokens IS 'Sum of t_messages.est_tokens of those messages.';

CREATE TABLE t_compaction_calls (
    session_id VARCHAR NOT NULL,
    seq INTEGER NOT NULL,
    compaction_id VARCHAR,
    turn INTEGER,
    step INTEGER,
    start_ms BIGINT NOT NULL,
    end_ms BIGINT NOT NULL,
    provider VARCHAR,
    model VARCHAR,
    max_tokens BIGINT,
    error_code VARCHAR,
    error_message VARCHAR,
    input_tokens BIGINT,
    cache_read_tokens BIGINT,
    cache_write_tokens BIGINT,
    output_tokens BIGINT,
    reasoning_tokens BIGINT,
    message_count INTEGER NOT NULL,
    est_input_tokens BIGINT,
    est_output_tokens BIGINT,
    header_seq INTEGER,
    seeded BOOLEAN NOT NULL
);
COMMENT ON TABLE t_compaction_calls IS 'One row per compaction/summary that records a model call (provider set): the summary call, as the requests view shows it (ingest_calls).';
COMMENT ON COLUMN t_compaction_calls.seq IS 'seq of the compaction/summary event.';
COMMENT ON COLUMN t_compaction_calls.start_ms IS 'Time of its compaction/start (the call followed it and its prunes).';
COMMENT ON COLUMN t_compaction_calls.end_ms IS 'Time of the compaction/summary (the call had answered, or failed).';
COMMENT ON COLUMN t_compaction_calls.error_code IS 'The summary''s failure code: why the answer was not used.';
COMMENT ON COLUMN t_compaction_calls.message_count IS 'The replaced range''s messages with content, plus the instruction: the history the call sent.';
COMMENT ON COLUMN t_compaction_calls.est_input_tokens IS 'The range''s size (shadowedTokenCount), header excluded.';
COMMENT ON COLUMN t_compaction_calls.est_output_tokens IS 'The token meter''s estimate of the summary text.';
COMMENT ON COLUMN t_compaction_calls.header_seq IS 'The request/header in force (the call reused its system prompt).';

CREATE OR REPLACE VIEW messages AS
SELECT session_id, seq, turn, step, epoch_ms(time_ms) AS time, event_type AS type, role, source,
       message_id, call_id, text, reasoning, tool_calls, has_content, is_error, interrupted, surface_op,
       seeded, replaced_by, surface_key
FROM t_messages;
COMMENT ON VIEW messages IS 'The conversation: user prompts and context, assistant answers, tool results — every one ever logged, including those a compaction later took off the model''s view (replaced_by).';
COMMENT ON COLUMN messages.seq IS 'seq of the message event (join events on session_id, seq for the raw data).';
COMMENT ON COLUMN messages.type IS 'user/message, assistant/message or tool/result.';
COMMENT ON COLUMN messages.role IS 'user or assistant (tool results are user-role messages with source tool).';
COMMENT ON COLUMN messages.source IS 'user (typed by a person), plugin (injected context, a compaction summary), model, or tool.';
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
COMMENT ON COLUMN compactions.failure_code IS 'Why a summary call''s answer was not used (the reduction stood in): RATE_LIMIT, CONTEXT_WINDOW_EXCEEDED, NO_SHRINK, MAX_TOKENS, EMPTY_SUMMARY, ...';
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
                OR (finish IS NULL AND first_delta_ms IS NOT NULL)) AS estimated,
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
           CASE WHEN a.estimated THEN coalesce(a.est_output_tokens, 0) ELSE a.output_tokens END AS output_tokens,
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
COMMENT ON COLUMN requests.input_tokens IS 'Uncached input tokens, as the server reported them; when estimated, the token meter''s estimate of the history (a summary call: the range it summarised), system prompt and tools sent.';
COMMENT ON COLUMN requests.output_tokens IS 'Output tokens (reasoning included), as reported; when estimated, the meter''s estimate of the answer logged (a summary call: its summary).';
COMMENT ON COLUMN requests.chunks IS 'Stream chunks received (0: the call was cut before its first chunk; NULL for a summary call, which is not logged as chunks).';
COMMENT ON COLUMN requests.first_seq IS 'seq of the first chunk: the history sent is the surface before it (no chunk: the event that closed the call; a summary call: its compaction/summary).';
COMMENT ON COLUMN requests.last_seq IS 'seq of the last chunk (NULL: none came).';
COMMENT ON COLUMN requests.seeded IS 'True when the request belongs to the seed copied from a parent session (a fork).';
COMMENT ON COLUMN requests.estimated IS 'The model answered but the server sent no usage (some local servers never do; a stream cut by a cancel or a crash cannot): the token counts are estimates and the cost is unknown. A failed attempt without usage has no counts.';
COMMENT ON COLUMN requests.purpose IS 'agent (the loop''s own call) or compaction (a summary call: compactions has the rest, by compaction_id).';
COMMENT ON COLUMN requests.compaction_id IS 'A summary call''s compaction (compactions.compaction_id); NULL for the agent''s calls.';

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
COMMENT ON COLUMN usage.estimated IS 'The server sent no usage for this request: the counts are the token meter''s estimate (chars / 4) and the cost is unknown.';
COMMENT ON COLUMN usage.price_source IS 'Where the price came from: user (set_price), catalogue (list price), or NULL (unknown).';
COMMENT ON COLUMN usage.purpose IS 'agent or compaction (a summary call): a session''s and a turn''s cost include their compactions.';

COMMENT ON COLUMN turns.requests IS 'Model requests with token counts (reported or estimated), the summary calls of its compactions included.';
COMMENT ON COLUMN turns.cost IS 'Cost of the turn''s requests (its compactions'' summary calls included), where priced (see cost_complete).';

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
