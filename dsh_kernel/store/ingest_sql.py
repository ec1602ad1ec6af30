"""The SQL of one ingest batch (driven by ``dsh_kernel.store.ingest``), in execution order.

Temp tables live for one connection: ``_files`` (one row per planned journal, with the context carried
over from ``_ingest_state``), ``_raw`` (the new lines as rows), and the helpers below. ``_raw.x`` holds
``[data.turn, data.step, data.chunk.type]`` extracted in the same pass that reads the line, so the bulk
of the rows (stream chunks) is parsed once.

Turn and step of events that do not name them (``user/message``, ``request/header``, approvals, …) come
from the latest ``turn/*``/``step/*`` marker before them (an ASOF join), or from the context carried over
when the marker is in an earlier batch. Attempts: a ``finish`` chunk ends an attempt; chunks are numbered
``1 + finishes before them in the step`` (plus the finishes of the same step in earlier batches), and
aggregated into ``t_attempts`` with an upsert so a stream split across batches merges.
"""

from __future__ import annotations

EVENT_COLUMNS = (
    "{'type': 'VARCHAR', 'seq': 'BIGINT', 'time': 'BIGINT', 'data': 'JSON', 'ignorable': 'BOOLEAN', "
    "'surfaceOp': 'JSON', 'sourceEventSeqs': 'BIGINT[]'}"
)

LOAD_STATES = """
SELECT journal, session_id, byte_offset, next_seq, header, open_turn, open_step, chunk_turn,
       chunk_step, chunk_finishes, error, checked_size
FROM _ingest_state
"""

CREATE_FILES = """
CREATE OR REPLACE TEMP TABLE _files AS
SELECT unnest($1::VARCHAR[]) AS fname, unnest($2::VARCHAR[]) AS journal,
       unnest($3::VARCHAR[]) AS session_id, unnest($4::BIGINT[]) AS next_seq,
       unnest($5::BIGINT[]) AS lines, unnest($6::BIGINT[]) AS new_offset,
       unnest($7::BIGINT[]) AS size, unnest($8::VARCHAR[]) AS header_text,
       unnest($9::BOOLEAN[]) AS reset, unnest($10::INTEGER[]) AS open_turn,
       unnest($11::INTEGER[]) AS open_step, unnest($12::INTEGER[]) AS chunk_turn,
       unnest($13::INTEGER[]) AS chunk_step, unnest($14::INTEGER[]) AS chunk_finishes,
       unnest($15::BOOLEAN[]) AS is_new, unnest($16::INTEGER[]) AS h_version,
       unnest($17::BIGINT[]) AS h_created, unnest($18::VARCHAR[]) AS h_cwd,
       unnest($19::VARCHAR[]) AS h_notebook, unnest($20::VARCHAR[]) AS h_parent,
       unnest($21::INTEGER[]) AS h_seed
"""

DUPLICATE_SESSIONS = """
SELECT f.session_id, s.journal FROM _files f JOIN t_sessions s ON s.id = f.session_id
WHERE s.journal <> f.journal
"""

LOAD_RAW = (
    """
CREATE OR REPLACE TEMP TABLE _raw AS
SELECT f.session_id, TRY_CAST(r.seq AS INTEGER) AS seq, r.type, r.time AS time_ms, r.data,
       coalesce(r.ignorable, false) AS ignorable, r.surfaceOp AS surface_op,
       TRY_CAST(r.sourceEventSeqs AS INTEGER[]) AS source_event_seqs,
       json_extract_string(r.data, ['$.turn', '$.step', '$.chunk.type']) AS x
FROM read_json({files}, format = 'newline_delimited', columns = """
    + EVENT_COLUMNS
    + """,
               filename = true, ignore_errors = true, maximum_object_size = 536870912) r
JOIN _files f ON f.fname = r.filename
"""
)

# Journals whose rows do not add up: wrong count, a gap, a repeat, or a line that did not parse.
VALIDATE = """
WITH agg AS (
    SELECT f.session_id, f.next_seq, f.lines, count(r.session_id) AS n, min(r.seq) AS lo,
           max(r.seq) AS hi, count(DISTINCT r.seq) AS distinct_seqs,
           count(r.session_id) FILTER (
               WHERE r.type IS NULL OR r.seq IS NULL OR r.time_ms IS NULL OR r.data IS NULL
                  OR NOT starts_with(CAST(r.data AS VARCHAR), '{')
                  OR (r.surface_op IS NOT NULL AND json_type(r.surface_op) NOT IN ('VARCHAR', 'OBJECT'))
           ) AS broken
    FROM _files f LEFT JOIN _raw r ON r.session_id = f.session_id
    GROUP BY ALL
)
SELECT session_id FROM agg
WHERE n <> lines OR broken > 0
   OR (lines > 0 AND (lo <> next_seq OR hi <> next_seq + lines - 1 OR distinct_seqs <> lines))
"""

RESET_SESSIONS = """
CREATE OR REPLACE TEMP TABLE _reset AS
SELECT s.id FROM t_sessions s JOIN _files f ON f.journal = s.journal WHERE f.reset;
DELETE FROM t_events WHERE session_id IN (SELECT id FROM _reset);
DELETE FROM t_messages WHERE session_id IN (SELECT id FROM _reset);
DELETE FROM t_tool_calls WHERE session_id IN (SELECT id FROM _reset);
DELETE FROM t_tool_results WHERE session_id IN (SELECT id FROM _reset);
DELETE FROM t_attempts WHERE session_id IN (SELECT id FROM _reset);
DELETE FROM t_sessions WHERE id IN (SELECT id FROM _reset);
"""

INSERT_SESSIONS = """
INSERT INTO t_sessions
SELECT session_id, h_version, h_created, h_cwd, h_notebook, h_parent, h_seed, journal
FROM _files WHERE is_new
"""

_CONTEXT = """
CREATE OR REPLACE TEMP TABLE _tmarks AS
SELECT session_id, seq, CASE WHEN type = 'turn/start' THEN TRY_CAST(x[1] AS INTEGER) ELSE -1 END AS mark
FROM _raw WHERE type IN ('turn/start', 'turn/end');
CREATE OR REPLACE TEMP TABLE _smarks AS
SELECT session_id, seq, CASE WHEN type = 'step/start' THEN TRY_CAST(x[2] AS INTEGER) ELSE -1 END AS mark
FROM _raw WHERE type IN ('step/start', 'step/end', 'turn/start', 'turn/end');
CREATE OR REPLACE TEMP TABLE _ctx AS
SELECT r.session_id, r.seq,
       CASE WHEN tm.seq IS NULL THEN f.open_turn WHEN tm.mark >= 0 THEN tm.mark END AS turn,
       CASE WHEN sm.seq IS NULL THEN f.open_step WHEN sm.mark >= 0 THEN sm.mark END AS step
FROM (SELECT session_id, seq FROM _raw
      WHERE x[1] IS NULL OR (x[2] IS NULL AND type NOT IN ('turn/start', 'turn/end'))) r
JOIN _files f ON f.session_id = r.session_id
ASOF LEFT JOIN _tmarks tm ON tm.session_id = r.session_id AND tm.seq <= r.seq
ASOF LEFT JOIN _smarks sm ON sm.session_id = r.session_id AND sm.seq <= r.seq;
CREATE OR REPLACE TEMP VIEW _ev AS
SELECT r.session_id, r.seq, r.type, r.time_ms,
       coalesce(TRY_CAST(r.x[1] AS INTEGER), c.turn) AS turn,
       CASE WHEN r.type IN ('turn/start', 'turn/end') THEN NULL
            ELSE coalesce(TRY_CAST(r.x[2] AS INTEGER), c.step) END AS step,
       r.data, r.ignorable, r.surface_op, r.source_event_seqs
FROM _raw r LEFT JOIN _ctx c ON c.session_id = r.session_id AND c.seq = r.seq;
"""

# Most rows name their turn and step; only the few that do not go through the context join.
_EVENTS = """
INSERT INTO t_events
SELECT session_id, seq, type, time_ms, TRY_CAST(x[1] AS INTEGER),
       CASE WHEN type IN ('turn/start', 'turn/end') THEN NULL ELSE TRY_CAST(x[2] AS INTEGER) END,
       data, ignorable, surface_op, source_event_seqs
FROM _raw WHERE NOT (x[1] IS NULL OR (x[2] IS NULL AND type NOT IN ('turn/start', 'turn/end')))
UNION ALL
SELECT r.session_id, r.seq, r.type, r.time_ms, coalesce(TRY_CAST(r.x[1] AS INTEGER), c.turn),
       CASE WHEN r.type IN ('turn/start', 'turn/end') THEN NULL ELSE coalesce(TRY_CAST(r.x[2] AS INTEGER), c.step) END,
       r.data, r.ignorable, r.surface_op, r.source_event_seqs
FROM _raw r JOIN _ctx c ON c.session_id = r.session_id AND c.seq = r.seq
"""

_MESSAGE_SHAPE = (
    '{"id": "VARCHAR", "role": "VARCHAR", "source": {"kind": "VARCHAR", "callId": "VARCHAR"}, '
    '"content": [{"type": "VARCHAR", "text": "VARCHAR", "toolCallId": "VARCHAR", "isError": "BOOLEAN", '
    '"content": [{"type": "VARCHAR", "text": "VARCHAR"}]}]}'
)

_MESSAGES = (
    """
INSERT INTO t_messages
WITH src AS (
    SELECT session_id, seq, turn, step, time_ms, type, data, surface_op,
           CASE WHEN type = 'user/message' THEN json_transform(data, '"""
    + _MESSAGE_SHAPE
    + """')
                ELSE json_transform(data, '{"message": """
    + _MESSAGE_SHAPE
    + """}').message END AS m
    FROM _ev WHERE type IN ('user/message', 'assistant/message', 'tool/result')
)
SELECT session_id, seq, turn, step, time_ms, type, m.id, m.role, m.source.kind,
       CASE WHEN type = 'tool/result' THEN coalesce(m.source.callId, m.content[1].toolCallId) END,
       CASE WHEN type = 'tool/result'
            THEN array_to_string(flatten([[c.text FOR c IN coalesce(b.content, []) IF c.type = 'text']
                                          FOR b IN coalesce(m.content, []) IF b.type = 'tool-result']), '')
            ELSE array_to_string([b.text FOR b IN coalesce(m.content, []) IF b.type = 'text'], '') END,
       nullif(array_to_string([b.text FOR b IN coalesce(m.content, []) IF b.type = 'reasoning'], ''), ''),
       len([b FOR b IN coalesce(m.content, []) IF b.type = 'tool-call'])::INTEGER,
       coalesce(len(m.content), 0) > 0,
       type = 'tool/result' AND coalesce(list_bool_or([coalesce(b.isError, false) FOR b IN m.content]), false),
       coalesce(TRY_CAST(data ->> '$.interrupted' AS BOOLEAN), false),
       CASE WHEN surface_op ->> '$' = 'append' THEN 'append' ELSE 'replace' END
FROM src
"""
)

_TOOL_CALLS = """
INSERT INTO t_tool_calls
SELECT session_id, seq, turn, step, time_ms, data ->> '$.callId', data ->> '$.name', data ->> '$.arguments',
       coalesce(TRY_CAST(data ->> '$.synthetic' AS BOOLEAN), false)
FROM _ev WHERE type = 'tool/call'
"""

_TOOL_RESULTS = """
INSERT INTO t_tool_results
SELECT session_id, seq, turn, step, time_ms,
       coalesce(data ->> '$.message.source.callId', data ->> '$.message.content[0].toolCallId'),
       coalesce(TRY_CAST(data ->> '$.message.content[0].isError' AS BOOLEAN), false),
       data ->> '$.error.code', data ->> '$.error.name', TRY_CAST(data ->> '$.durationMs' AS BIGINT),
       data -> '$.meta',
       CASE WHEN surface_op ->> '$' = 'append' THEN 'append' ELSE 'replace' END
FROM _ev WHERE type = 'tool/result'
"""

_ATTEMPTS = """
CREATE OR REPLACE TEMP TABLE _chunks AS
SELECT r.session_id, r.seq, TRY_CAST(r.x[1] AS INTEGER) AS turn, TRY_CAST(r.x[2] AS INTEGER) AS step,
       r.time_ms, r.x[3] AS ctype,
       CASE WHEN TRY_CAST(r.x[1] AS INTEGER) = f.chunk_turn AND TRY_CAST(r.x[2] AS INTEGER) = f.chunk_step
            THEN f.chunk_finishes ELSE 0 END AS base
FROM _raw r JOIN _files f ON f.session_id = r.session_id
WHERE r.type = 'assistant/chunk' AND r.x[1] IS NOT NULL AND r.x[2] IS NOT NULL;
-- A step whose batch chunks hold no finish, or one finish as their last chunk, is one attempt. Only
-- steps with retries inside the batch need the (sorting) window.
CREATE OR REPLACE TEMP TABLE _steps AS
SELECT session_id, turn, step, any_value(base) AS base, max(seq) AS last_seq,
       count(*) FILTER (WHERE ctype = 'finish') AS finishes,
       max(seq) FILTER (WHERE ctype = 'finish') AS last_finish
FROM _chunks GROUP BY session_id, turn, step;
CREATE OR REPLACE TEMP TABLE _labeled AS
SELECT c.session_id, c.seq, c.turn, c.step, c.time_ms, c.ctype, (c.base + 1)::INTEGER AS attempt
FROM _chunks c JOIN _steps s ON s.session_id = c.session_id AND s.turn = c.turn AND s.step = c.step
WHERE s.finishes = 0 OR (s.finishes = 1 AND s.last_finish = s.last_seq)
UNION ALL
SELECT c.session_id, c.seq, c.turn, c.step, c.time_ms, c.ctype,
       (1 + c.base + coalesce(sum(CASE WHEN c.ctype = 'finish' THEN 1 ELSE 0 END) OVER (
            PARTITION BY c.session_id, c.turn, c.step ORDER BY c.seq
            ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING), 0))::INTEGER
FROM _chunks c JOIN _steps s ON s.session_id = c.session_id AND s.turn = c.turn AND s.step = c.step
WHERE NOT (s.finishes = 0 OR (s.finishes = 1 AND s.last_finish = s.last_seq));
INSERT INTO t_attempts
WITH agg AS (
    SELECT session_id, turn, step, attempt, min(seq) AS first_seq, max(seq) AS last_seq,
           min(time_ms) AS first_ms,
           min(time_ms) FILTER (WHERE ctype IN ('text-delta', 'reasoning-delta', 'tool-call-delta')) AS first_delta_ms,
           max(time_ms) AS last_ms, count(*)::INTEGER AS chunks,
           max(seq) FILTER (WHERE ctype = 'finish') AS finish_seq
    FROM _labeled GROUP BY session_id, turn, step, attempt
),
det AS (
    SELECT l.session_id, l.turn, l.step, l.attempt,
           any_value(r.data ->> '$.chunk.reason.kind') FILTER (WHERE l.ctype = 'finish') AS finish,
           any_value(r.data ->> '$.chunk.reason.failure.code') FILTER (WHERE l.ctype = 'finish') AS error_code,
           any_value(r.data ->> '$.chunk.reason.failure.message') FILTER (WHERE l.ctype = 'finish') AS error_message,
           max(TRY_CAST(r.data ->> '$.chunk.usage.inputTokens' AS BIGINT)) FILTER (WHERE l.ctype = 'usage') AS input_tokens,
           max(TRY_CAST(r.data ->> '$.chunk.usage.outputTokens' AS BIGINT)) FILTER (WHERE l.ctype = 'usage') AS output_tokens,
           max(TRY_CAST(r.data ->> '$.chunk.usage.cacheReadTokens' AS BIGINT)) FILTER (WHERE l.ctype = 'usage') AS cache_read_tokens,
           max(TRY_CAST(r.data ->> '$.chunk.usage.cacheWriteTokens' AS BIGINT)) FILTER (WHERE l.ctype = 'usage') AS cache_write_tokens,
           max(TRY_CAST(r.data ->> '$.chunk.usage.reasoningTokens' AS BIGINT)) FILTER (WHERE l.ctype = 'usage') AS reasoning_tokens
    FROM (SELECT * FROM _labeled WHERE ctype IN ('finish', 'usage')) l
    JOIN (SELECT session_id, seq, data FROM _raw WHERE x[3] IN ('finish', 'usage')) r
      ON r.session_id = l.session_id AND r.seq = l.seq
    GROUP BY l.session_id, l.turn, l.step, l.attempt
)
SELECT agg.session_id, agg.turn, agg.step, agg.attempt, first_seq, last_seq, first_ms, first_delta_ms,
       last_ms, chunks, finish_seq, finish, error_code, error_message, input_tokens, output_tokens,
       cache_read_tokens, cache_write_tokens, reasoning_tokens
FROM agg LEFT JOIN det USING (session_id, turn, step, attempt)
ON CONFLICT (session_id, turn, step, attempt) DO UPDATE SET
    first_seq = least(t_attempts.first_seq, excluded.first_seq),
    last_seq = greatest(t_attempts.last_seq, excluded.last_seq),
    first_ms = least(t_attempts.first_ms, excluded.first_ms),
    first_delta_ms = coalesce(t_attempts.first_delta_ms, excluded.first_delta_ms),
    last_ms = greatest(t_attempts.last_ms, excluded.last_ms),
    chunks = t_attempts.chunks + excluded.chunks,
    finish_seq = coalesce(excluded.finish_seq, t_attempts.finish_seq),
    finish = coalesce(excluded.finish, t_attempts.finish),
    error_code = coalesce(excluded.error_code, t_attempts.error_code),
    error_message = coalesce(excluded.error_message, t_attempts.error_message),
    input_tokens = coalesce(excluded.input_tokens, t_attempts.input_tokens),
    output_tokens = coalesce(excluded.output_tokens, t_attempts.output_tokens),
    cache_read_tokens = coalesce(excluded.cache_read_tokens, t_attempts.cache_read_tokens),
    cache_write_tokens = coalesce(excluded.cache_write_tokens, t_attempts.cache_write_tokens),
    reasoning_tokens = coalesce(excluded.reasoning_tokens, t_attempts.reasoning_tokens)
"""

DERIVE = (_CONTEXT, _EVENTS, _MESSAGES, _TOOL_CALLS, _TOOL_RESULTS, _ATTEMPTS)

# The context to carry into the next batch: the open turn and step after the last event, and the
# attempt state of the last chunk's step.
UPDATE_STATE = """
INSERT INTO _ingest_state
WITH last_ev AS (
    SELECT e.session_id, e.type, e.turn, e.step
    FROM _ev e JOIN (SELECT session_id, max(seq) AS seq FROM _raw GROUP BY session_id) m
      ON m.session_id = e.session_id AND m.seq = e.seq
),
last_chunk AS (
    SELECT session_id, arg_max(turn, seq) AS turn, arg_max(step, seq) AS step,
           arg_max(attempt - 1 + CASE WHEN ctype = 'finish' THEN 1 ELSE 0 END, seq) AS finishes
    FROM _labeled GROUP BY session_id
)
SELECT f.journal, f.session_id, f.new_offset, f.next_seq + f.lines, f.header_text,
       CASE WHEN l.session_id IS NULL THEN f.open_turn WHEN l.type = 'turn/end' THEN NULL ELSE l.turn END,
       CASE WHEN l.session_id IS NULL THEN f.open_step
            WHEN l.type IN ('step/end', 'turn/end') THEN NULL ELSE l.step END,
       coalesce(c.turn, f.chunk_turn), coalesce(c.step, f.chunk_step),
       CASE WHEN c.session_id IS NULL THEN f.chunk_finishes ELSE c.finishes END,
       NULL, f.size, now()::TIMESTAMP
FROM _files f
LEFT JOIN last_ev l ON l.session_id = f.session_id
LEFT JOIN last_chunk c ON c.session_id = f.session_id
ON CONFLICT (journal) DO UPDATE SET
    session_id = excluded.session_id, byte_offset = excluded.byte_offset, next_seq = excluded.next_seq,
    header = excluded.header, open_turn = excluded.open_turn, open_step = excluded.open_step,
    chunk_turn = excluded.chunk_turn, chunk_step = excluded.chunk_step,
    chunk_finishes = excluded.chunk_finishes, error = NULL, checked_size = excluded.checked_size,
    updated_at = excluded.updated_at
"""

RECORD_ERRORS = """
INSERT INTO _ingest_state (journal, session_id, byte_offset, next_seq, header, error, checked_size, updated_at)
SELECT unnest($1::VARCHAR[]), unnest($2::VARCHAR[]), 0, 0, '', unnest($3::VARCHAR[]),
       unnest($4::BIGINT[]), now()::TIMESTAMP
ON CONFLICT (journal) DO UPDATE SET
    error = excluded.error, checked_size = excluded.checked_size, updated_at = excluded.updated_at
"""
