-- Migration m0001_tables: the typed tables fed by ingest. Shipped: never edit, add a migration instead.
-- Tables are prefixed t_ so the public names (sessions, events, ...) are the views of 0002.

CREATE TABLE t_sessions (
    id VARCHAR PRIMARY KEY,
    version INTEGER NOT NULL,
    created_ms BIGINT NOT NULL,
    cwd VARCHAR,
    notebook VARCHAR,
    parent_session VARCHAR,
    seed_length INTEGER,
    journal VARCHAR NOT NULL
);
COMMENT ON TABLE t_sessions IS 'One row per journal header (the session header line).';
COMMENT ON COLUMN t_sessions.id IS 'Session id (a UUID).';
COMMENT ON COLUMN t_sessions.version IS 'Journal format version of the header.';
COMMENT ON COLUMN t_sessions.created_ms IS 'Creation time, epoch milliseconds.';
COMMENT ON COLUMN t_sessions.cwd IS 'Working directory of the kernel that created the session.';
COMMENT ON COLUMN t_sessions.notebook IS 'Notebook path, when the server told the kernel.';
COMMENT ON COLUMN t_sessions.parent_session IS 'The session this one was forked from.';
COMMENT ON COLUMN t_sessions.seed_length IS 'How many events were copied from the parent (a fork''s prefix).';
COMMENT ON COLUMN t_sessions.journal IS 'The journal file, relative to the store directory.';

CREATE TABLE t_events (
    session_id VARCHAR NOT NULL,
    seq INTEGER NOT NULL,
    type VARCHAR NOT NULL,
    time_ms BIGINT NOT NULL,
    turn INTEGER,
    step INTEGER,
    data JSON NOT NULL,
    ignorable BOOLEAN NOT NULL,
    surface_op JSON,
    source_event_seqs INTEGER[]
);
COMMENT ON TABLE t_events IS 'Every journal event, verbatim, plus the turn and step it belongs to. (session_id, seq) is unique: ingest guarantees it (each journal''s seqs are validated as a gap-free continuation), so no index slows the load.';
COMMENT ON COLUMN t_events.seq IS '0-based position in the session log.';
COMMENT ON COLUMN t_events.type IS 'Event type, e.g. turn/start, assistant/chunk, tool/result.';
COMMENT ON COLUMN t_events.time_ms IS 'Event time, epoch milliseconds.';
COMMENT ON COLUMN t_events.turn IS 'The turn open at this event (from data.turn, else the enclosing turn/start); NULL between turns.';
COMMENT ON COLUMN t_events.step IS 'The step open at this event; NULL outside steps.';
COMMENT ON COLUMN t_events.data IS 'The event data object, as JSON.';
COMMENT ON COLUMN t_events.ignorable IS 'Informational record a reader may skip when it does not know the type.';
COMMENT ON COLUMN t_events.surface_op IS 'Surface events only: "append" or {"op":"replace","start","end"}.';
COMMENT ON COLUMN t_events.source_event_seqs IS 'Surface events only: the seqs this event was built from.';

CREATE TABLE t_messages (
    session_id VARCHAR NOT NULL,
    seq INTEGER NOT NULL,
    turn INTEGER,
    step INTEGER,
    time_ms BIGINT NOT NULL,
    event_type VARCHAR NOT NULL,
    message_id VARCHAR,
    role VARCHAR,
    source VARCHAR,
    call_id VARCHAR,
    text VARCHAR,
    reasoning VARCHAR,
    tool_calls INTEGER,
    has_content BOOLEAN,
    is_error BOOLEAN,
    interrupted BOOLEAN,
    surface_op VARCHAR
);
COMMENT ON TABLE t_messages IS 'Surface events (user/message, assistant/message, tool/result) with their text extracted.';
COMMENT ON COLUMN t_messages.event_type IS 'user/message, assistant/message or tool/result.';
COMMENT ON COLUMN t_messages.role IS 'Message role: user or assistant (tool results are user-role messages).';
COMMENT ON COLUMN t_messages.source IS 'Message source kind: user, plugin, model or tool.';
COMMENT ON COLUMN t_messages.call_id IS 'Tool results: the tool call answered.';
COMMENT ON COLUMN t_messages.text IS 'Concatenated text blocks (for a tool result, the text of its content).';
COMMENT ON COLUMN t_messages.reasoning IS 'Concatenated reasoning blocks (assistant messages).';
COMMENT ON COLUMN t_messages.tool_calls IS 'Number of tool-call blocks (assistant messages).';
COMMENT ON COLUMN t_messages.has_content IS 'False for a content-less message (never sent to the model).';
COMMENT ON COLUMN t_messages.interrupted IS 'The visible prefix of a cancelled stream.';
COMMENT ON COLUMN t_messages.surface_op IS 'append, or replace (a compaction or pruning copy).';

CREATE TABLE t_tool_calls (
    session_id VARCHAR NOT NULL,
    seq INTEGER NOT NULL,
    turn INTEGER,
    step INTEGER,
    time_ms BIGINT NOT NULL,
    call_id VARCHAR,
    name VARCHAR,
    arguments VARCHAR,
    synthetic BOOLEAN
);
COMMENT ON TABLE t_tool_calls IS 'tool/call events: a tool body is about to run.';
COMMENT ON COLUMN t_tool_calls.arguments IS 'The model''s raw argument JSON text.';

CREATE TABLE t_tool_results (
    session_id VARCHAR NOT NULL,
    seq INTEGER NOT NULL,
    turn INTEGER,
    step INTEGER,
    time_ms BIGINT NOT NULL,
    call_id VARCHAR,
    is_error BOOLEAN,
    error_code VARCHAR,
    error_name VARCHAR,
    duration_ms BIGINT,
    meta JSON,
    surface_op VARCHAR
);
COMMENT ON TABLE t_tool_results IS 'tool/result events: outcome, error code and presentation meta of one call.';
COMMENT ON COLUMN t_tool_results.meta IS 'The tool''s presentation payload (e.g. code, stdout, stderr for python).';

CREATE TABLE t_attempts (
    session_id VARCHAR NOT NULL,
    turn INTEGER NOT NULL,
    step INTEGER NOT NULL,
    attempt INTEGER NOT NULL,
    first_seq INTEGER NOT NULL,
    last_seq INTEGER NOT NULL,
    first_ms BIGINT NOT NULL,
    first_delta_ms BIGINT,
    last_ms BIGINT NOT NULL,
    chunks INTEGER NOT NULL,
    finish_seq INTEGER,
    finish VARCHAR,
    error_code VARCHAR,
    error_message VARCHAR,
    input_tokens BIGINT,
    output_tokens BIGINT,
    cache_read_tokens BIGINT,
    cache_write_tokens BIGINT,
    reasoning_tokens BIGINT,
    start_ms BIGINT,
    message_count INTEGER,
    PRIMARY KEY (session_id, turn, step, attempt)
);
COMMENT ON TABLE t_attempts IS 'One row per model call attempt: its assistant/chunk events aggregated (a finish chunk ends an attempt).';
COMMENT ON COLUMN t_attempts.attempt IS '1 for the first call of a step, 2.. for retries.';
COMMENT ON COLUMN t_attempts.first_delta_ms IS 'Time of the first text, reasoning or tool-call delta.';
COMMENT ON COLUMN t_attempts.start_ms IS 'Time of the event logged just before the first chunk (the request was sent then).';
COMMENT ON COLUMN t_attempts.message_count IS 'Appended messages with content logged before the first chunk: the history sent.';
COMMENT ON COLUMN t_attempts.finish IS 'Finish kind: stop, tool-calls, max-tokens, error, aborted; NULL if the stream never finished.';

CREATE TABLE prices (
    provider VARCHAR NOT NULL,
    model VARCHAR NOT NULL,
    input_per_mtok DOUBLE,
    cached_input_per_mtok DOUBLE,
    cache_write_per_mtok DOUBLE,
    output_per_mtok DOUBLE,
    PRIMARY KEY (provider, model)
);
COMMENT ON TABLE prices IS 'Per-model prices in currency units per million tokens; usage.cost is NULL where no row matches.';
COMMENT ON COLUMN prices.cached_input_per_mtok IS 'Price of cache-hit input tokens (defaults to input_per_mtok).';
COMMENT ON COLUMN prices.cache_write_per_mtok IS 'Price of cache-write input tokens (defaults to input_per_mtok).';

CREATE TABLE _ingest_state (
    journal VARCHAR PRIMARY KEY,
    session_id VARCHAR NOT NULL,
    byte_offset BIGINT NOT NULL,
    next_seq BIGINT NOT NULL,
    header VARCHAR NOT NULL,
    open_turn INTEGER,
    open_step INTEGER,
    chunk_turn INTEGER,
    chunk_step INTEGER,
    chunk_finishes INTEGER,
    error VARCHAR,
    checked_size BIGINT,
    updated_at TIMESTAMP NOT NULL,
    last_ms BIGINT,
    messages INTEGER
);
COMMENT ON TABLE _ingest_state IS 'Ingest bookkeeping: how far each journal has been read.';
COMMENT ON COLUMN _ingest_state.byte_offset IS 'Bytes of the journal already ingested (always at a line end).';
COMMENT ON COLUMN _ingest_state.header IS 'The header line, to notice a journal replaced by another file.';
COMMENT ON COLUMN _ingest_state.last_ms IS 'Time of the last ingested event.';
COMMENT ON COLUMN _ingest_state.messages IS 'Appended messages with content ingested so far.';
COMMENT ON COLUMN _ingest_state.error IS 'Why the journal stopped being ingested (damage, named by line); NULL when healthy.';
