"""The SQL of one ingest batch (driven by ``dsh_kernel.store.ingest.incremental``), in execution order.

The new lines are read once, straight into ``t_events`` (``LOAD_EVENTS``): no copy of the events
passes through a scratch table. Temp tables live for one connection: ``_files`` (one row per planned
journal, with the context carried over from ``_ingest_state``), ``_raw`` (the batch's rows of
``t_events``, narrow: what validation and the derived tables need, see ``RAW``), ``_ev`` (a view: the
batch's rows of ``t_events``, complete) and the helpers below. Every row a batch inserts has a
``rowid`` above the bound taken just before the load (``NEW_ROWS``), which is how the batch finds its
rows (and tells them from those of an earlier ingest of a journal re-read from scratch).
``seeded`` is ``seq < seed_length`` (a fork's copy of its parent; ``_files.seed`` comes from the
header, or from ``t_sessions`` for a continuation), carried into ``t_events``, ``t_messages`` and
``t_tool_calls`` so no view joins ``t_sessions`` for it.

The load keeps only rows whose seq lies in the planned range ``[next_seq, next_seq + lines)``: a
journal read from its start also yields its header line, possibly a torn last line, or lines appended
since the plan — all outside the range (or without a seq) and dropped. A damaged line inside the range
shows as a missing seq, a line without the envelope fields as a row with ``seeded`` NULL: validation
catches both, and a refused journal's rows are deleted before anything reads them.

Turn and step of events that do not name them (``user/message``, ``request/header``, approvals, …) come
from the latest ``turn/*``/``step/*`` marker before them (an ASOF join), or from the context carried over
when the marker is in an earlier batch; those few rows of ``t_events`` are updated with it.

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
       unnest($25::VARCHAR[]) AS h_user, unnest($26::VARCHAR[]) AS h_policy
) x
LEFT JOIN t_sessions s ON s.id = x.session_id AND NOT x.reset
"""

DUPLICATE_SESSIONS = """
SELECT f.session_id, s.journal FROM _files f JOIN t_sessions s ON s.id = f.session_id
WHERE s.journal <> f.journal
"""

_TURN_MARKS = "('turn/start', 'turn/end')"

# Whether a row breaks the envelope (validation refuses its journal): no type, the header's type, no
# time, data that is not an object, a surface op that is neither a string nor an object.
_BROKEN = (
    "coalesce(r.type IS NULL OR r.type = 'session' OR r.time IS NULL OR r.data IS NULL"
    " OR NOT starts_with(CAST(r.data AS VARCHAR), '{')"
    " OR (r.surfaceOp IS NOT NULL AND json_type(r.surfaceOp) NOT IN ('VARCHAR', 'OBJECT')), false)"
)

# The one read of the new lines, straight into ``t_events``: the turn and step an event names are
# set here; those it does not name come from the context (``_CONTEXT``), a broken row gets
# placeholders and ``seeded`` NULL (its journal is refused and its rows deleted before anything
# reads them).
LOAD_EVENTS = (
    """
INSERT INTO t_events
SELECT f.session_id, r.seq, coalesce(r.type, ''), coalesce(r.time, 0), TRY_CAST(r.x[1] AS INTEGER),
       CASE WHEN r.type IN """
    + _TURN_MARKS
    + """ THEN NULL ELSE TRY_CAST(r.x[2] AS INTEGER) END,
       CASE WHEN r.broken THEN '{}'::JSON ELSE """
    + STRIPPED_DATA.format(p="r.")
    + """ END,
       coalesce(r.ignorable, false), r.surfaceOp, r.sourceEventSeqs,
       CASE WHEN r.broken THEN NULL ELSE r.seq < f.seed END
FROM (
    SELECT *, json_extract_string(r.data, ['$.turn', '$.step']) AS x, """
    + _BROKEN
    + """ AS broken
    FROM read_json({files}, format = 'newline_delimited', columns = """
    + EVENT_COLUMNS
    + """,
                   filename = true, ignore_errors = true, maximum_object_size = {max_object}) r
) r
JOIN _files f ON f.fname = r.filename
WHERE r.seq >= f.next_seq AND r.seq < f.next_seq + f.lines
"""
)

NEW_ROWS = "SELECT coalesce(max(rowid), -1) FROM t_events"
"""Before the load: every row the batch inserts into ``t_events`` has a greater ``rowid``."""

_END_FIELDS = (
    "['$.chunk.reason.kind', '$.chunk.reason.failure.code', '$.chunk.reason.failure.message', "
    "'$.chunk.usage.inputTokens', '$.chunk.usage.outputTokens', '$.chunk.usage.cacheReadTokens', "
    "'$.chunk.usage.cacheWriteTokens', '$.chunk.usage.reasoningTokens']"
)
"""What a finish chunk (its reason) and a usage chunk (its counts) add to ``t_attempts``, read in
one parse (``_raw.fin``)."""
_CHUNK_FIELDS = "['$.chunk.type', '$.chunk.text', '$.chunk.name', '$.chunk.argumentsDelta']"
_DELTAS = "('text-delta', 'reasoning-delta', 'tool-call-delta')"

# The batch's rows, narrow, from ``t_events`` (their data is read once more only here, and parsed
# only where a column needs it): ``turn`` and ``step`` as the event names them (``NULL`` when it
# does not, before the context), ``ctx`` whether the context sets them, a chunk's type and the
# characters a delta streamed (``t_attempts.streamed_chars``: its text, or a tool call's name and
# argument fragment, ``session.usage``'s reading), what a finish or usage chunk reports (``fin``), and
# ``data`` only for the few rows read again (turn ends, compaction summaries).
_CANDIDATE = f"(turn IS NULL OR (step IS NULL AND type NOT IN {_TURN_MARKS}))"
"""A row that may need the context: it names no turn, or no step (``turn`` and ``step`` as loaded)."""
_CTX = (
    f"CASE WHEN {_CANDIDATE} THEN json_extract_string(data, '$.turn') IS NULL "
    f"OR (json_extract_string(data, '$.step') IS NULL AND type NOT IN {_TURN_MARKS}) ELSE false END"
)
_KEPT = "('turn/end', 'compaction/summary')"

RAW = (
    """
CREATE OR REPLACE TEMP TABLE _raw AS
SELECT session_id, seq, type, time_ms, turn, step, seeded, ctx, v[1] AS ctype,
       CASE WHEN v[1] IN """
    + _DELTAS
    + """ THEN length(coalesce(v[2], '')) + length(coalesce(v[3], '')) + length(coalesce(v[4], ''))
       END AS chars,
       CASE WHEN v[1] IN ('finish', 'usage') THEN json_extract_string(data, """
    + _END_FIELDS
    + """) END AS fin,
       NULL::JSON AS data
FROM (
    SELECT session_id, seq, type, time_ms, turn, step, seeded, data,
           json_extract_string(data, """
    + _CHUNK_FIELDS
    + """) AS v, """
    + _CTX
    + """ AS ctx
    FROM t_events WHERE rowid > {bound} AND type = 'assistant/chunk'
)
UNION ALL
SELECT session_id, seq, type, time_ms, turn, step, seeded, """
    + _CTX
    + """, NULL, NULL, NULL,
       CASE WHEN type IN """
    + _KEPT
    + """ THEN data END
FROM t_events
WHERE rowid > {bound} AND type <> 'assistant/chunk' AND ("""
    + _CANDIDATE
    + " OR type IN "
    + _KEPT
    + """)
UNION ALL
SELECT session_id, seq, type, time_ms, turn, step, seeded, false, NULL, NULL, NULL, NULL
FROM t_events
WHERE rowid > {bound} AND type <> 'assistant/chunk' AND NOT """
    + _CANDIDATE
    + " AND type NOT IN "
    + _KEPT
    + """
"""
)

# Journals whose rows do not add up: a missing seq (a line that did not parse), a repeat, or a line
# without the envelope fields (``seeded`` NULL).
VALIDATE = """
WITH agg AS (
    SELECT f.session_id, f.lines, count(r.session_id) AS n, count(DISTINCT r.seq) AS distinct_seqs,
           count(r.session_id) FILTER (WHERE r.seeded IS NULL) AS broken
    FROM _files f LEFT JOIN _raw r ON r.session_id = f.session_id
    GROUP BY ALL
)
SELECT session_id FROM agg WHERE n <> lines OR distinct_seqs <> lines OR broken > 0
"""

# A journal re-read from scratch: its earlier rows go (in ``t_events`` those up to ``{bound}``: the
# batch's own rows are already there).
RESET_SESSIONS = """
CREATE OR REPLACE TEMP TABLE _reset AS
SELECT s.id FROM t_sessions s JOIN _files f ON f.journal = s.journal WHERE f.reset;
DELETE FROM t_events WHERE session_id IN (SELECT id FROM _reset) AND rowid <= {bound};
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
    (id, version, created_ms, cwd, notebook, parent_session, seed_length, journal, "user", ai_policy)
SELECT session_id, h_version, h_created, h_cwd, h_notebook, h_parent, h_seed, journal, h_user,
       h_policy
FROM _files WHERE is_new
"""

# The turn and step of the rows that do not name them: the latest marker before them (an ASOF
# join), or the context carried over when the marker is in an earlier batch; set in ``t_events``
# by an update of those few rows. ``_ev`` is the batch's rows of ``t_events``, complete.
_CONTEXT = f"""
CREATE OR REPLACE TEMP TABLE _tmarks AS
SELECT session_id, seq, CASE WHEN type = 'turn/start' THEN turn ELSE -1 END AS mark
FROM _raw WHERE type IN {_TURN_MARKS};
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
UPDATE t_events SET turn = coalesce(t_events.turn, c.turn),
       step = CASE WHEN t_events.type IN {_TURN_MARKS} THEN NULL ELSE coalesce(t_events.step, c.step) END
FROM _ctx c
WHERE t_events.rowid > {{bound}} AND t_events.session_id = c.session_id AND t_events.seq = c.seq;
CREATE OR REPLACE TEMP VIEW _ev AS SELECT * FROM t_events WHERE rowid > {{bound}};
"""

_IMAGE_SIZE = '"width": "BIGINT", "height": "BIGINT", "description": "VARCHAR"'
MESSAGE_SHAPE = (  # the struct a message is parsed into (``m`` below)
    '{"id": "VARCHAR", "role": "VARCHAR", "source": {"kind": "VARCHAR", "callId": "VARCHAR"}, '
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
CREATE OR REPLACE TEMP TABLE _m AS
WITH src AS MATERIALIZED (  -- parse each message once (the struct is used by every column below)
    SELECT session_id, seq, turn, step, time_ms, type, data ->> '$.interrupted' AS interrupted, surface_op, seeded,
           TRY_CAST(surface_op ->> '$.start' AS INTEGER) AS op_start,
           TRY_CAST(surface_op ->> '$.end' AS INTEGER) AS op_end,
           source_event_seqs[1] AS first_source, len(coalesce(source_event_seqs, [])) AS sources,
           contains(CAST(data AS VARCHAR), '"image"') AS image_text,
           CASE WHEN type = 'user/message' THEN json_transform(data, '"""
    + MESSAGE_SHAPE
    + """')
                ELSE json_transform(data, '{"message": """
    + MESSAGE_SHAPE
    + """}').message END AS m
    FROM _ev WHERE type IN ('user/message', 'assistant/message', 'tool/result')
)
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
       op_start, op_end, first_source, sources, image_text
FROM src
"""
)

# After the surface fold (``surface``) has set the keys of the batch's replacements and who
# replaced what: the batch's messages join the table.
_MESSAGES_INSERT = """
INSERT INTO t_messages
SELECT session_id, seq, turn, step, time_ms, event_type, message_id, role, source, call_id, text,
       reasoning, tool_calls, has_content, is_error, interrupted, surface_op, est_tokens, seeded,
       surface_key, replaced_by
FROM _m
"""

_TOOL_CALLS = """
INSERT INTO t_tool_calls
SELECT session_id, seq, turn, step, time_ms, data ->> '$.callId', data ->> '$.name', data ->> '$.arguments',
       coalesce(TRY_CAST(data ->> '$.synthetic' AS BOOLEAN), false), seeded
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
    FROM _raw WHERE type = 'assistant/chunk' AND turn IS NOT NULL AND step IS NOT NULL
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
    SELECT r.session_id, r.seq, s.turn, s.step, r.time_ms, r.ctype, r.chars,
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
    FROM (SELECT session_id, seq, turn, step, ctype, fin FROM _raw
          WHERE type = 'assistant/chunk' AND ctype IN ('finish', 'usage')) r
    JOIN _att a ON a.session_id = r.session_id AND a.turn = r.turn
     AND a.step = r.step AND r.seq BETWEEN a.first_seq AND a.last_seq
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
