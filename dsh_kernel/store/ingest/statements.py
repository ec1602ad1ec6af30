"""The SQL of one ingest batch (driven by ``dsh_kernel.store.ingest.incremental``), in execution order.

Temp tables live for one connection: ``_files`` (one row per planned journal, with the context carried
over from ``_ingest_state``), ``_raw`` (the new lines as rows), and the helpers below. ``_raw.turn``
and ``_raw.step`` hold ``data.turn`` and ``data.step`` as integers (``step`` is ``NULL`` on a turn
marker), ``_raw.ctx`` whether the row names neither (it takes them from the markers before it),
``_raw.ctype`` the chunk type and ``_raw.chars`` the characters a delta chunk streamed
(``t_attempts.streamed_chars``: its text, or a tool call's name and argument fragment,
``session.usage``'s reading), all from one parse of the data in the statement that reads the lines
(no later step parses a chunk again but for the finish and usage chunks' fields), and
``_raw.seeded`` is ``seq < seed_length`` (a fork's copy of its parent; ``_files.seed`` comes from the
header, or from ``t_sessions`` for a continuation), carried into ``t_events``, ``t_messages`` and
``t_tool_calls`` so no view joins ``t_sessions`` for it.

``_raw`` keeps only rows whose seq lies in the planned range ``[next_seq, next_seq + lines)``: a journal
read from its start also yields its header line, possibly a torn last line, or lines appended since the
plan — all outside the range (or without a seq) and dropped. A damaged line inside the range shows as
a missing seq, which validation catches.

Turn and step of events that do not name them (``user/message``, ``request/header``, approvals, …) come
from the latest ``turn/*``/``step/*`` marker before them (an ASOF join), or from the context carried over
when the marker is in an earlier batch.

Attempts: a ``finish`` chunk ends an attempt. Chunks are aggregated per step first (a hash aggregate); a
step whose chunks in this batch hold no finish, or a single finish as their last chunk, is one attempt
(``base + 1``, where ``base`` counts the finishes of the same step in earlier batches). Only steps with a
retry inside the batch have their chunks numbered by a window. ``t_attempts`` is upserted, so a stream
split across batches merges; its ``start_ms`` (the event before the first chunk, when the request was
sent) and ``message_count`` (the messages with content on the surface before it) are set once, by the
batch that saw the attempt begin, as is ``est_input_tokens`` (the token meter's estimate of that
history). Both are running sums of per-message deltas over the batch (``_m.dn``, ``_m.dt``: a message
adds itself; a replacement, once ``surface.fold_batch`` has folded it, also takes off what it
shadowed) on top of the surface carried over as ``_ingest_state.messages`` and ``message_tokens``.
``est_output_tokens`` is the estimate of the message the attempt produced, set by the batch that holds
that message. The views use the estimates only where the server sent no usage. The row of a call that
got no chunk at all is ``silent``'s.

Images (``image_rows``): ``t_images`` gets a row per image block of an appended message,
``t_image_data`` the bytes of each ``image/data`` event once per hash, and ``t_events.data`` of an
``image/data`` event keeps its hash, not its base64.
"""

from __future__ import annotations

from dsh_kernel.store.ingest.image_rows import STRIPPED_DATA

EVENT_COLUMNS = (
    "{'type': 'VARCHAR', 'seq': 'INTEGER', 'time': 'BIGINT', 'data': 'JSON', 'ignorable': 'BOOLEAN', "
    "'surfaceOp': 'JSON', 'sourceEventSeqs': 'INTEGER[]'}"
)

LOAD_STATES = """
SELECT journal, session_id, byte_offset, next_seq, header, open_turn, open_step, chunk_turn,
       chunk_step, chunk_finishes, error, checked_size, last_ms, messages, message_tokens
FROM _ingest_state
"""

CREATE_FILES = """
CREATE OR REPLACE TEMP TABLE _files AS
SELECT x.*, coalesce(x.h_seed, s.seed_length, 0) AS seed
FROM (
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
       unnest($21::INTEGER[]) AS h_seed, unnest($22::BIGINT[]) AS last_ms,
       unnest($23::INTEGER[]) AS messages, unnest($24::BIGINT[]) AS message_tokens,
       unnest($25::VARCHAR[]) AS h_user, unnest($26::VARCHAR[]) AS h_policy,
       unnest($27::VARCHAR[]) AS h_parent_kind
) x
LEFT JOIN t_sessions s ON s.id = x.session_id AND NOT x.reset
"""

DUPLICATE_SESSIONS = """
SELECT f.session_id, s.journal FROM _files f JOIN t_sessions s ON s.id = f.session_id
WHERE s.journal <> f.journal
"""

_DELTAS = "('text-delta', 'reasoning-delta', 'tool-call-delta')"

# ``v``: the turn, step and chunk type, then what a delta streamed (its text, or a tool call's name
# and argument fragment), all from one parse of the line's data.
LOAD_RAW = (
    """
CREATE OR REPLACE TEMP TABLE _raw AS
SELECT session_id, seq, type, time_ms, data, ignorable, surface_op, source_event_seqs,
       TRY_CAST(v[1] AS INTEGER) AS turn,
       CASE WHEN type IN ('turn/start', 'turn/end') THEN NULL ELSE TRY_CAST(v[2] AS INTEGER) END AS step,
       v[3] AS ctype,
       CASE WHEN v[3] IN """
    + _DELTAS
    + """ THEN length(coalesce(v[4], '')) + length(coalesce(v[5], '')) + length(coalesce(v[6], ''))
       END AS chars,
       v[1] IS NULL OR (v[2] IS NULL AND type NOT IN ('turn/start', 'turn/end')) AS ctx,
       seeded
FROM (
    SELECT f.session_id, r.seq, r.type, r.time AS time_ms, r.data,
           coalesce(r.ignorable, false) AS ignorable, r.surfaceOp AS surface_op,
           r.sourceEventSeqs AS source_event_seqs,
           json_extract_string(r.data, ['$.turn', '$.step', '$.chunk.type', '$.chunk.text',
                                        '$.chunk.name', '$.chunk.argumentsDelta']) AS v,
           r.seq < f.seed AS seeded
    FROM read_json({files}, format = 'newline_delimited', columns = """
    + EVENT_COLUMNS
    + """,
                   filename = true, ignore_errors = true, maximum_object_size = {max_object}) r
    JOIN _files f ON f.fname = r.filename
    WHERE r.seq >= f.next_seq AND r.seq < f.next_seq + f.lines
)
"""
)

# Journals whose rows do not add up: a missing seq (a line that did not parse), a repeat, or a line
# without the envelope fields. The rows are already cut to the planned range, so the seqs are right
# exactly when, sorted, they are that range (a sort per journal: cheaper than counting distinct seqs).
VALIDATE = """
WITH agg AS (
    SELECT session_id, count(*) AS n, list_sort(list(seq)) AS seqs,
           count(*) FILTER (
               WHERE type IS NULL OR type = 'session' OR time_ms IS NULL OR data IS NULL
                  OR NOT starts_with(CAST(data AS VARCHAR), '{')
                  OR (surface_op IS NOT NULL AND json_type(surface_op) NOT IN ('VARCHAR', 'OBJECT'))
           ) AS broken
    FROM _raw GROUP BY session_id
)
SELECT f.session_id FROM _files f LEFT JOIN agg a ON a.session_id = f.session_id
WHERE coalesce(a.n, 0) <> f.lines OR a.seqs <> range(f.next_seq, f.next_seq + f.lines)::INTEGER[]
   OR coalesce(a.broken, 0) > 0
"""

RESET_SESSIONS = """
CREATE OR REPLACE TEMP TABLE _reset AS
SELECT s.id FROM t_sessions s JOIN _files f ON f.journal = s.journal WHERE f.reset;
DELETE FROM t_events WHERE session_id IN (SELECT id FROM _reset);
DELETE FROM t_messages WHERE session_id IN (SELECT id FROM _reset);
DELETE FROM t_tool_calls WHERE session_id IN (SELECT id FROM _reset);
DELETE FROM t_tool_results WHERE session_id IN (SELECT id FROM _reset);
DELETE FROM t_attempts WHERE session_id IN (SELECT id FROM _reset);
DELETE FROM t_images WHERE session_id IN (SELECT id FROM _reset);
DELETE FROM t_compaction_calls WHERE session_id IN (SELECT id FROM _reset);
DELETE FROM t_sessions WHERE id IN (SELECT id FROM _reset);
"""

INSERT_SESSIONS = """
INSERT INTO t_sessions
    (id, version, created_ms, cwd, notebook, parent_session, seed_length, journal, "user", ai_policy,
     parent_kind)
SELECT session_id, h_version, h_created, h_cwd, h_notebook, h_parent, h_seed, journal, h_user,
       h_policy, h_parent_kind
FROM _files WHERE is_new
"""

_CONTEXT = """
CREATE OR REPLACE TEMP TABLE _tmarks AS
SELECT session_id, seq, CASE WHEN type = 'turn/start' THEN turn ELSE -1 END AS mark
FROM _raw WHERE type IN ('turn/start', 'turn/end');
CREATE OR REPLACE TEMP TABLE _smarks AS
SELECT session_id, seq, CASE WHEN type = 'step/start' THEN step ELSE -1 END AS mark
FROM _raw WHERE type IN ('step/start', 'step/end', 'turn/start', 'turn/end');
CREATE OR REPLACE TEMP TABLE _ctx AS
SELECT r.session_id, r.seq,
       CASE WHEN tm.seq IS NULL THEN f.open_turn WHEN tm.mark >= 0 THEN tm.mark END AS turn,
       CASE WHEN sm.seq IS NULL THEN f.open_step WHEN sm.mark >= 0 THEN sm.mark END AS step
FROM (SELECT session_id, seq FROM _raw WHERE ctx) r
JOIN _files f ON f.session_id = r.session_id
ASOF LEFT JOIN _tmarks tm ON tm.session_id = r.session_id AND tm.seq <= r.seq
ASOF LEFT JOIN _smarks sm ON sm.session_id = r.session_id AND sm.seq <= r.seq;
CREATE OR REPLACE TEMP VIEW _ev AS
SELECT r.session_id, r.seq, r.type, r.time_ms,
       coalesce(r.turn, c.turn) AS turn,
       CASE WHEN r.type IN ('turn/start', 'turn/end') THEN NULL ELSE coalesce(r.step, c.step) END AS step,
       r.data, r.ignorable, r.surface_op, r.source_event_seqs, r.seeded
FROM _raw r LEFT JOIN _ctx c ON c.session_id = r.session_id AND c.seq = r.seq;
"""

# Most rows name their turn and step; only the few that do not go through the context join.
_EVENTS = f"""
INSERT INTO t_events
SELECT session_id, seq, type, time_ms, turn, step,
       {STRIPPED_DATA.format(p="")}, ignorable, surface_op, source_event_seqs, seeded
FROM _raw WHERE NOT ctx
UNION ALL
SELECT r.session_id, r.seq, r.type, r.time_ms, coalesce(r.turn, c.turn),
       CASE WHEN r.type IN ('turn/start', 'turn/end') THEN NULL ELSE coalesce(r.step, c.step) END,
       {STRIPPED_DATA.format(p="r.")}, r.ignorable, r.surface_op, r.source_event_seqs, r.seeded
FROM (SELECT * FROM _raw WHERE ctx) r
JOIN _ctx c ON c.session_id = r.session_id AND c.seq = r.seq
"""

_IMAGE_SIZE = '"width": "BIGINT", "height": "BIGINT", "description": "VARCHAR"'
# The source's fields: a tool result's callId; a notebook cell's cellId (a user message); a plugin's
# name and form (a rewind note's form: {"kind": "left-out", "turn", "why"}). ``json_transform`` is
# lenient: a field of another JSON kind reads as NULL.
MESSAGE_SHAPE = (  # the struct a message is parsed into (``m`` below)
    '{"id": "VARCHAR", "role": "VARCHAR", "source": {"kind": "VARCHAR", "callId": "VARCHAR", '
    '"cellId": "VARCHAR", "plugin": "VARCHAR", '
    '"form": {"kind": "VARCHAR", "turn": "INTEGER", "why": "VARCHAR"}}, '
    '"content": [{"type": "VARCHAR", "text": "VARCHAR", "toolCallId": "VARCHAR", "isError": "BOOLEAN", '
    f'"name": "VARCHAR", "arguments": "VARCHAR", {_IMAGE_SIZE}, '
    f'"content": [{{"type": "VARCHAR", "text": "VARCHAR", {_IMAGE_SIZE}}}]}}]}}'
)


def _leaf(b: str) -> str:
    """A text-like or image block's estimate: an image about one token per 750 pixels or its
    description's text, whichever is larger, + 4; anything else its text."""
    return (
        f"CASE WHEN {b}.type = 'image' THEN greatest(coalesce({b}.width * {b}.height, 0) // 750, "
        f"ceil(length(coalesce({b}.description, '')) / 4) + 4) + 4 "
        f"ELSE ceil(length(coalesce({b}.text, '')) / 4) + 4 END"
    )


# The one token estimate of a message (dsh_kernel.llm.estimate.message_tokens, SPINE §7.6), on the
# parsed struct: text and reasoning ceil(chars / 4) + 4, a tool call (name + arguments) / 4 + 4, an
# image max(pixels // 750, ceil(description / 4) + 4) + 4, a tool result its nested blocks (each an
# image or its text) + 4, + 4 per message. A test runs it on parsed messages and holds it equal
# to the Python.
EST_TOKENS = f"""(4 + coalesce(list_sum([CASE
    WHEN b.type = 'tool-call'
        THEN ceil((length(coalesce(b.name, '')) + length(coalesce(b.arguments, ''))) / 4) + 4
    WHEN b.type = 'tool-result'
        THEN coalesce(list_sum([{_leaf("c")} FOR c IN coalesce(b.content, [])]), 0) + 4
    ELSE {_leaf("b")} END FOR b IN coalesce(m.content, [])]), 0))::INTEGER"""

_MESSAGES = (
    """
CREATE OR REPLACE TEMP TABLE _msrc AS  -- parse each message once (every column of _m reads it)
SELECT session_id, seq, turn, step, time_ms, type, data ->> '$.interrupted' AS interrupted, surface_op, seeded,
       source_event_seqs[1] AS first_source, len(coalesce(source_event_seqs, [])) AS sources,
       contains(CAST(data AS VARCHAR), '"image"') AS image_text,
       CASE WHEN type = 'user/message' THEN json_transform(data, '"""
    + MESSAGE_SHAPE
    + """')
            ELSE json_transform(data, '{"message": """
    + MESSAGE_SHAPE
    + """}').message END AS m
FROM _ev WHERE type IN ('user/message', 'assistant/message', 'tool/result');
CREATE OR REPLACE TEMP TABLE _m AS
SELECT session_id, seq, turn, step, time_ms, type AS event_type, m.id AS message_id, m.role,
       m.source.kind AS source,
       CASE WHEN type = 'tool/result' THEN coalesce(m.source.callId, m.content[1].toolCallId) END AS call_id,
       CASE WHEN type = 'tool/result'
            THEN array_to_string(flatten([[c.text FOR c IN coalesce(b.content, []) IF c.type = 'text']
                                          FOR b IN coalesce(m.content, []) IF b.type = 'tool-result']), '')
            ELSE array_to_string([b.text FOR b IN coalesce(m.content, []) IF b.type = 'text'], '') END AS text,
       nullif(array_to_string([b.text FOR b IN coalesce(m.content, []) IF b.type = 'reasoning'], ''), '') AS reasoning,
       len([b FOR b IN coalesce(m.content, []) IF b.type = 'tool-call'])::INTEGER AS tool_calls,
       coalesce(len(m.content), 0) > 0 AS has_content,
       type = 'tool/result' AND coalesce(list_bool_or([coalesce(b.isError, false) FOR b IN m.content]), false) AS is_error,
       coalesce(TRY_CAST(interrupted AS BOOLEAN), false) AS interrupted,
       CASE WHEN surface_op ->> '$' = 'append' THEN 'append' ELSE 'replace' END AS surface_op,
       """
    + EST_TOKENS
    + """ AS est_tokens, seeded,
       seq AS surface_key, NULL::INTEGER AS replaced_by,
       CASE WHEN has_content THEN 1 ELSE 0 END AS dn,
       CASE WHEN has_content THEN est_tokens ELSE 0 END::BIGINT AS dt,
       first_source, sources, image_text,
       CASE WHEN m.source.kind = 'user' THEN m.source.cellId END AS cell_id,
       CASE WHEN type = 'user/message' AND m.source.kind = 'plugin' AND m.source.plugin = 'dsh/rewind'
             AND m.source.form.kind = 'left-out' THEN m.source.form.turn END AS left_turn,
       CASE WHEN type = 'user/message' AND m.source.kind = 'plugin' AND m.source.plugin = 'dsh/rewind'
             AND m.source.form.kind = 'left-out' THEN m.source.form.why END AS left_why
FROM _msrc
"""
)

# After the surface fold (``surface``) has set the keys of the batch's replacements and who
# replaced what: the batch's messages join the table.
_MESSAGES_INSERT = """
INSERT INTO t_messages
SELECT session_id, seq, turn, step, time_ms, event_type, message_id, role, source, call_id, text,
       reasoning, tool_calls, has_content, is_error, interrupted, surface_op, est_tokens, seeded,
       surface_key, replaced_by, cell_id, left_turn, left_why
FROM _m
"""

# Each reads the fields it needs from one parse of the event's data (a list of paths).
# The origin's two paths ride on the same one parse: a call to the kernel's own tool has neither.
_TOOL_CALLS = """
INSERT INTO t_tool_calls
SELECT session_id, seq, turn, step, time_ms, v[1], v[2], v[3], coalesce(TRY_CAST(v[4] AS BOOLEAN), false),
       v[5], v[6], seeded
FROM (SELECT *, json_extract_string(data, ['$.callId', '$.name', '$.arguments', '$.synthetic',
                                           '$.origin.mcp', '$.origin.tool']) AS v
      FROM _ev WHERE type = 'tool/call')
"""

_TOOL_RESULTS = """
INSERT INTO t_tool_results
SELECT session_id, seq, turn, step, time_ms, coalesce(v[1], v[2]), coalesce(TRY_CAST(v[3] AS BOOLEAN), false),
       v[4], v[5], TRY_CAST(v[6] AS BIGINT), data -> '$.meta',
       CASE WHEN surface_op ->> '$' = 'append' THEN 'append' ELSE 'replace' END
FROM (SELECT *, json_extract_string(data, ['$.message.source.callId', '$.message.content[0].toolCallId',
                                           '$.message.content[0].isError', '$.error.code', '$.error.name',
                                           '$.durationMs']) AS v
      FROM _ev WHERE type = 'tool/result')
"""

_END_FIELDS = (
    "['$.chunk.reason.kind', '$.chunk.reason.failure.code', '$.chunk.reason.failure.message', "
    "'$.chunk.usage.inputTokens', '$.chunk.usage.outputTokens', '$.chunk.usage.cacheReadTokens', "
    "'$.chunk.usage.cacheWriteTokens', '$.chunk.usage.reasoningTokens']"
)
"""What a finish chunk (its reason) and a usage chunk (its counts) add to ``t_attempts``, read in
one parse of the chunk."""

_ATTEMPTS = f"""
CREATE OR REPLACE TEMP TABLE _steps AS
WITH agg AS (
    SELECT session_id, turn, step,
           min(seq) AS first_seq, max(seq) AS last_seq, min(time_ms) AS first_ms, max(time_ms) AS last_ms,
           min(time_ms) FILTER (WHERE ctype IN {_DELTAS}) AS first_delta_ms, count(*)::INTEGER AS chunks,
           coalesce(sum(chars) FILTER (WHERE ctype IN {_DELTAS}), 0)::BIGINT
               AS streamed_chars,
           count(*) FILTER (WHERE ctype = 'finish') AS finishes,
           max(seq) FILTER (WHERE ctype = 'finish') AS last_finish
    FROM _raw WHERE type = 'assistant/chunk' AND NOT ctx
    GROUP BY ALL
)
SELECT agg.*,
       CASE WHEN agg.turn = f.chunk_turn AND agg.step = f.chunk_step THEN f.chunk_finishes ELSE 0 END AS base,
       agg.finishes = 0 OR (agg.finishes = 1 AND agg.last_finish = agg.last_seq) AS simple
FROM agg JOIN _files f ON f.session_id = agg.session_id;
CREATE OR REPLACE TEMP TABLE _att AS
SELECT session_id, turn, step, (base + 1)::INTEGER AS attempt, first_seq, last_seq, first_ms,
       first_delta_ms, last_ms, chunks, last_finish AS finish_seq, streamed_chars
FROM _steps WHERE simple
UNION ALL
SELECT session_id, turn, step, attempt, min(seq), max(seq), min(time_ms),
       min(time_ms) FILTER (WHERE ctype IN {_DELTAS}), max(time_ms), count(*)::INTEGER,
       max(seq) FILTER (WHERE ctype = 'finish'),
       coalesce(sum(chars) FILTER (WHERE ctype IN {_DELTAS}), 0)::BIGINT
FROM (
    SELECT r.session_id, r.seq, s.turn, s.step, r.time_ms, r.ctype,
           r.chars,
           (1 + s.base + coalesce(sum(CASE WHEN r.ctype = 'finish' THEN 1 ELSE 0 END) OVER (
                PARTITION BY r.session_id, s.turn, s.step ORDER BY r.seq
                ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING), 0))::INTEGER AS attempt
    FROM _raw r JOIN _steps s
      ON s.session_id = r.session_id AND s.turn = r.turn AND s.step = r.step AND NOT s.simple
    WHERE r.type = 'assistant/chunk'
)
GROUP BY session_id, turn, step, attempt;
CREATE OR REPLACE TEMP TABLE _counted AS
SELECT session_id, seq, sum(dn) OVER w AS n, sum(dt) OVER w AS tokens
FROM _m
WINDOW w AS (PARTITION BY session_id ORDER BY seq);
INSERT INTO t_attempts
WITH det AS (
    SELECT a.session_id, a.turn, a.step, a.attempt,
           any_value(r.fin[1]) FILTER (WHERE r.ctype = 'finish') AS finish,
           any_value(r.fin[2]) FILTER (WHERE r.ctype = 'finish') AS error_code,
           any_value(r.fin[3]) FILTER (WHERE r.ctype = 'finish') AS error_message,
           max(TRY_CAST(r.fin[4] AS BIGINT)) FILTER (WHERE r.ctype = 'usage') AS input_tokens,
           max(TRY_CAST(r.fin[5] AS BIGINT)) FILTER (WHERE r.ctype = 'usage') AS output_tokens,
           max(TRY_CAST(r.fin[6] AS BIGINT)) FILTER (WHERE r.ctype = 'usage') AS cache_read_tokens,
           max(TRY_CAST(r.fin[7] AS BIGINT)) FILTER (WHERE r.ctype = 'usage') AS cache_write_tokens,
           max(TRY_CAST(r.fin[8] AS BIGINT)) FILTER (WHERE r.ctype = 'usage') AS reasoning_tokens
    FROM (SELECT session_id, seq, turn, step, ctype, json_extract_string(data, {_END_FIELDS}) AS fin
          FROM _raw WHERE type = 'assistant/chunk' AND ctype IN ('finish', 'usage')) r
    JOIN _att a ON a.session_id = r.session_id AND a.turn = r.turn AND a.step = r.step
     AND r.seq BETWEEN a.first_seq AND a.last_seq
    GROUP BY ALL
),
starts AS (
    SELECT a.session_id, a.turn, a.step, a.attempt,
           CASE WHEN a.first_seq = f.next_seq THEN f.last_ms ELSE p.time_ms END AS start_ms,
           (coalesce(f.messages, 0) + coalesce(c.n, 0))::INTEGER AS message_count,
           (coalesce(f.message_tokens, 0) + coalesce(c.tokens, 0))::BIGINT AS est_input_tokens
    FROM _att a
    JOIN _files f ON f.session_id = a.session_id
    LEFT JOIN _raw p ON p.session_id = a.session_id AND p.seq = a.first_seq - 1
    ASOF LEFT JOIN _counted c ON c.session_id = a.session_id AND c.seq < a.first_seq
)
SELECT a.session_id, a.turn, a.step, a.attempt, first_seq, last_seq, first_ms, first_delta_ms, last_ms,
       chunks, finish_seq, finish, error_code, error_message, input_tokens, output_tokens,
       cache_read_tokens, cache_write_tokens, reasoning_tokens, s.start_ms, s.message_count,
       s.est_input_tokens, NULL::BIGINT AS est_output_tokens, a.streamed_chars
FROM _att a
LEFT JOIN det USING (session_id, turn, step, attempt)
LEFT JOIN starts s USING (session_id, turn, step, attempt)
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
    reasoning_tokens = coalesce(excluded.reasoning_tokens, t_attempts.reasoning_tokens),
    start_ms = coalesce(t_attempts.start_ms, excluded.start_ms),
    message_count = coalesce(t_attempts.message_count, excluded.message_count),
    est_input_tokens = coalesce(t_attempts.est_input_tokens, excluded.est_input_tokens),
    streamed_chars = coalesce(t_attempts.streamed_chars, 0) + excluded.streamed_chars;
"""

# The estimated output of an attempt: the meter's estimate of the message it produced (a finished
# answer, or the visible prefix a cancel or crash repair kept). The message may come in a later batch
# than its chunks, so this updates the attempt wherever it was inserted.
_ESTIMATES = """
UPDATE t_attempts SET est_output_tokens = am.est_tokens
FROM (
    SELECT m.session_id, m.turn, m.step, m.est_tokens, m.first_source AS first_chunk
    FROM _m m
    WHERE m.event_type = 'assistant/message' AND m.surface_op = 'append' AND m.sources > 0
) am
WHERE t_attempts.session_id = am.session_id AND t_attempts.turn = am.turn
  AND t_attempts.step = am.step AND am.first_chunk BETWEEN t_attempts.first_seq AND t_attempts.last_seq
"""

DERIVE_MESSAGES = (
    ("context", _CONTEXT),
    ("events", _EVENTS),
    ("messages", _MESSAGES),
)
"""The first steps of a batch; then the surface fold (``surface.fold_batch``), then ``DERIVE``."""

DERIVE = (
    ("insert messages", _MESSAGES_INSERT),
    ("tool calls", _TOOL_CALLS),
    ("tool results", _TOOL_RESULTS),
    ("attempts", _ATTEMPTS),
    ("estimates", _ESTIMATES),
)

# The context to carry into the next batch: the open turn and step after the last event (from the
# batch's last turn and step markers, as _ctx reads them — never from the last event's own turn: a
# pruned tool result's copy carries its original's turn), its time, the attempt state of the last
# chunk's step, and the messages on the surface.
UPDATE_STATE = """
INSERT INTO _ingest_state
WITH last_seq AS (
    SELECT session_id, max(seq) AS seq FROM _raw GROUP BY session_id
),
last_ev AS (
    SELECT e.session_id, e.time_ms
    FROM _raw e JOIN last_seq m ON m.session_id = e.session_id AND m.seq = e.seq
),
tm AS (SELECT session_id, arg_max(mark, seq) AS mark FROM _tmarks GROUP BY session_id),
sm AS (SELECT session_id, arg_max(mark, seq) AS mark FROM _smarks GROUP BY session_id),
last_step AS (
    SELECT session_id, arg_max(turn, last_seq) AS turn, arg_max(step, last_seq) AS step,
           arg_max(base + finishes, last_seq)::INTEGER AS finishes
    FROM _steps GROUP BY session_id
),
msgs AS (
    SELECT session_id, sum(dn) AS n, sum(dt) AS tokens FROM _m GROUP BY session_id
)
SELECT f.journal, f.session_id, f.new_offset, f.next_seq + f.lines, f.header_text,
       CASE WHEN tm.session_id IS NULL THEN f.open_turn WHEN tm.mark >= 0 THEN tm.mark END,
       CASE WHEN sm.session_id IS NULL THEN f.open_step WHEN sm.mark >= 0 THEN sm.mark END,
       coalesce(c.turn, f.chunk_turn), coalesce(c.step, f.chunk_step),
       CASE WHEN c.session_id IS NULL THEN f.chunk_finishes ELSE c.finishes END,
       NULL, f.size, now()::TIMESTAMP, coalesce(l.time_ms, f.last_ms),
       (coalesce(f.messages, 0) + coalesce(m.n, 0))::INTEGER,
       (coalesce(f.message_tokens, 0) + coalesce(m.tokens, 0))::BIGINT
FROM _files f
LEFT JOIN last_ev l ON l.session_id = f.session_id
LEFT JOIN tm ON tm.session_id = f.session_id
LEFT JOIN sm ON sm.session_id = f.session_id
LEFT JOIN last_step c ON c.session_id = f.session_id
LEFT JOIN msgs m ON m.session_id = f.session_id
ON CONFLICT (journal) DO UPDATE SET
    session_id = excluded.session_id, byte_offset = excluded.byte_offset, next_seq = excluded.next_seq,
    header = excluded.header, open_turn = excluded.open_turn, open_step = excluded.open_step,
    chunk_turn = excluded.chunk_turn, chunk_step = excluded.chunk_step,
    chunk_finishes = excluded.chunk_finishes, error = NULL, checked_size = excluded.checked_size,
    updated_at = excluded.updated_at, last_ms = excluded.last_ms, messages = excluded.messages,
    message_tokens = excluded.message_tokens
"""

RECORD_ERRORS = """
INSERT INTO _ingest_state (journal, session_id, byte_offset, next_seq, header, error, checked_size, updated_at)
SELECT unnest($1::VARCHAR[]), unnest($2::VARCHAR[]), 0, 0, '', unnest($3::VARCHAR[]),
       unnest($4::BIGINT[]), now()::TIMESTAMP
ON CONFLICT (journal) DO UPDATE SET
    error = excluded.error, checked_size = excluded.checked_size, updated_at = excluded.updated_at
"""
