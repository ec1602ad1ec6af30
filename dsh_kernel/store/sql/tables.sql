-- The derived tables of sessions.duckdb: everything ingest writes from the journals, its bookkeeping
-- (_ingest_state) and the catalogue's list prices (refreshed at every read-write open). Applied to an
-- empty projection when the database is built or rebuilt (dsh_kernel/store/projection.py): a change
-- here goes with a bump of PROJECTION_VERSION, never a migration.
-- Tables are prefixed t_ so the public names (sessions, events, ...) are the views of views.sql.

CREATE TABLE t_sessions (
    id VARCHAR PRIMARY KEY,
    version INTEGER NOT NULL,
    created_ms BIGINT NOT NULL,
    cwd VARCHAR,
    notebook VARCHAR,
    parent_session VARCHAR,
    seed_length INTEGER,
    journal VARCHAR NOT NULL,
    "user" VARCHAR,
    ai_policy VARCHAR,
    parent_kind VARCHAR
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
COMMENT ON COLUMN t_sessions."user" IS 'Who the session is for: the header''s user (JUPYTERHUB_USER, else USER, else the account name).';
COMMENT ON COLUMN t_sessions.ai_policy IS 'The header''s aiPolicy: full, explain or off.';
COMMENT ON COLUMN t_sessions.parent_kind IS 'The header''s parentKind: how it came from parent_session (fork, rewind, policy); NULL in a header written before it was recorded.';

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
    source_event_seqs INTEGER[],
    seeded BOOLEAN DEFAULT false
);
COMMENT ON TABLE t_events IS 'Every journal event, verbatim, plus the turn and step it belongs to. (session_id, seq) is unique: ingest guarantees it (each journal''s seqs are validated as a gap-free continuation), so no index slows the load.';
COMMENT ON COLUMN t_events.seq IS '0-based position in the session log.';
COMMENT ON COLUMN t_events.type IS 'Event type, e.g. turn/start, assistant/chunk, tool/result.';
COMMENT ON COLUMN t_events.time_ms IS 'Event time, epoch milliseconds.';
COMMENT ON COLUMN t_events.turn IS 'The turn open at this event (from data.turn, else the enclosing turn/start); NULL between turns.';
COMMENT ON COLUMN t_events.step IS 'The step open at this event; NULL outside steps.';
COMMENT ON COLUMN t_events.data IS 'The event data object, as JSON (an image/data event without its base64 data: the bytes are in t_image_data).';
COMMENT ON COLUMN t_events.ignorable IS 'Informational record a reader may skip when it does not know the type.';
COMMENT ON COLUMN t_events.surface_op IS 'Surface events only: "append" or {"op":"replace","start","end"}.';
COMMENT ON COLUMN t_events.source_event_seqs IS 'Surface events only: the seqs this event was built from.';
COMMENT ON COLUMN t_events.seeded IS 'seq < the session''s seed_length: a fork''s copy of its parent''s event.';

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
    surface_op VARCHAR,
    est_tokens INTEGER,
    seeded BOOLEAN DEFAULT false,
    surface_key INTEGER,
    replaced_by INTEGER,
    cell_id VARCHAR,
    left_turn INTEGER,
    left_why VARCHAR
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
COMMENT ON COLUMN t_messages.surface_op IS 'append, or replace (a compaction summary, a pruned tool result, the note for an overflowed turn).';
COMMENT ON COLUMN t_messages.est_tokens IS 'The token meter''s estimate of the message (SPINE §7.6: chars / 4 + 4 per block, + 4).';
COMMENT ON COLUMN t_messages.seeded IS 'A fork''s copy of its parent''s message.';
COMMENT ON COLUMN t_messages.surface_key IS 'Order on the surface: an appended message''s own seq, a replacement the key of the first message it replaced (store.ingest.surface).';
COMMENT ON COLUMN t_messages.replaced_by IS 'seq of the replacement that took this message off the surface; NULL while the model still sees it.';
COMMENT ON COLUMN t_messages.cell_id IS 'User-sourced messages: the notebook cell that asked it (the source''s cellId); NULL otherwise.';
COMMENT ON COLUMN t_messages.left_turn IS 'A rewind note (plugin dsh/rewind, form left-out): the turn it took out of the model''s context (form.turn); NULL for any other message.';
COMMENT ON COLUMN t_messages.left_why IS 'A rewind note: why the turn was taken out (form.why: rerun, below, deleted, after).';

CREATE TABLE t_tool_calls (
    session_id VARCHAR NOT NULL,
    seq INTEGER NOT NULL,
    turn INTEGER,
    step INTEGER,
    time_ms BIGINT NOT NULL,
    call_id VARCHAR,
    name VARCHAR,
    arguments VARCHAR,
    synthetic BOOLEAN,
    server VARCHAR,
    tool VARCHAR,
    seeded BOOLEAN DEFAULT false
);
COMMENT ON TABLE t_tool_calls IS 'tool/call events: a tool body is about to run.';
COMMENT ON COLUMN t_tool_calls.arguments IS 'The model''s raw argument JSON text.';
COMMENT ON COLUMN t_tool_calls.synthetic IS 'Written by the harness, not asked for by the model.';
COMMENT ON COLUMN t_tool_calls.server IS 'The MCP server whose tool it is (the event''s origin.mcp); NULL for the kernel''s own tools and in logs written before tool/call named its origin.';
COMMENT ON COLUMN t_tool_calls.tool IS 'The tool''s own name on that server (origin.tool).';
COMMENT ON COLUMN t_tool_calls.seeded IS 'A fork''s copy of its parent''s call.';

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
    est_input_tokens BIGINT,
    est_output_tokens BIGINT,
    streamed_chars BIGINT,
    PRIMARY KEY (session_id, turn, step, attempt)
);
COMMENT ON TABLE t_attempts IS 'One row per model call attempt: its assistant/chunk events aggregated (a finish chunk ends an attempt).';
COMMENT ON COLUMN t_attempts.attempt IS '1 for the first call of a step, 2.. for retries.';
COMMENT ON COLUMN t_attempts.first_delta_ms IS 'Time of the first text, reasoning or tool-call delta.';
COMMENT ON COLUMN t_attempts.start_ms IS 'Time of the event logged just before the first chunk (the request was sent then).';
COMMENT ON COLUMN t_attempts.message_count IS 'Messages with content on the surface when the call was made (replacements folded in): the history sent.';
COMMENT ON COLUMN t_attempts.finish IS 'Finish kind: stop, tool-calls, max-tokens, error, aborted; NULL if the stream never finished.';
COMMENT ON COLUMN t_attempts.est_input_tokens IS 'Estimated tokens of the history sent (the surface counted by message_count), header excluded.';
COMMENT ON COLUMN t_attempts.est_output_tokens IS 'Estimated tokens of the message the attempt produced (its answer, or the kept visible prefix).';
COMMENT ON COLUMN t_attempts.streamed_chars IS 'Characters its deltas streamed: text and reasoning text, tool-call names and argument fragments (the estimate of a failed attempt''s output).';

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
    messages INTEGER,
    message_tokens BIGINT
);
COMMENT ON TABLE _ingest_state IS 'Ingest bookkeeping: how far each journal has been read.';
COMMENT ON COLUMN _ingest_state.byte_offset IS 'Bytes of the journal already ingested (always at a line end).';
COMMENT ON COLUMN _ingest_state.header IS 'The header line, to notice a journal replaced by another file.';
COMMENT ON COLUMN _ingest_state.last_ms IS 'Time of the last ingested event.';
COMMENT ON COLUMN _ingest_state.messages IS 'Messages with content on the surface after the last ingested event.';
COMMENT ON COLUMN _ingest_state.error IS 'Why the journal stopped being ingested (damage, named by line); NULL when healthy.';
COMMENT ON COLUMN _ingest_state.message_tokens IS 'Sum of t_messages.est_tokens of those messages.';

CREATE TABLE list_prices (
    provider VARCHAR NOT NULL,
    model VARCHAR NOT NULL,
    input_per_mtok DOUBLE,
    cached_input_per_mtok DOUBLE,
    cache_write_per_mtok DOUBLE,
    output_per_mtok DOUBLE,
    prices_as_of DATE,
    PRIMARY KEY (provider, model)
);
COMMENT ON TABLE list_prices IS 'The model catalogue''s list prices per million tokens (USD; DeepSeek off-peak), refreshed by dsh-kernel; a row in prices wins over these.';
COMMENT ON COLUMN list_prices.prices_as_of IS 'When the list price was last verified.';

CREATE TABLE t_images (
    session_id VARCHAR NOT NULL,
    seq INTEGER NOT NULL,
    turn INTEGER,
    step INTEGER,
    time_ms BIGINT NOT NULL,
    source VARCHAR,
    call_id VARCHAR,
    position INTEGER NOT NULL,
    sha256 VARCHAR,
    media_type VARCHAR,
    width INTEGER,
    height INTEGER,
    bytes BIGINT,
    description VARCHAR,
    reduction VARCHAR,
    seeded BOOLEAN NOT NULL
);
COMMENT ON TABLE t_images IS 'One row per image block of an appended user/message or tool/result (the block, never its bytes).';
COMMENT ON COLUMN t_images.seq IS 'seq of the message event holding the block.';
COMMENT ON COLUMN t_images.source IS 'The message''s source kind: tool (a tool result), user (attached by a person) or plugin.';
COMMENT ON COLUMN t_images.call_id IS 'The tool call whose result holds the image; NULL for an image in a user message.';
COMMENT ON COLUMN t_images.position IS '1-based order of the image among the images of its message.';
COMMENT ON COLUMN t_images.sha256 IS 'Hex sha256 of the stored bytes (the block''s reference to its image/data).';
COMMENT ON COLUMN t_images.bytes IS 'Size of the stored (reduced) image, as the block says.';

CREATE TABLE t_image_data (
    sha256 VARCHAR PRIMARY KEY,
    media_type VARCHAR,
    data BLOB NOT NULL
);
COMMENT ON TABLE t_image_data IS 'The bytes of every image, once per hash whichever sessions hold it (a fork''s copy adds nothing); only bytes whose sha256 matches their image/data event''s are stored.';
COMMENT ON COLUMN t_image_data.sha256 IS 'Hex sha256 of data.';
COMMENT ON COLUMN t_image_data.data IS 'The image bytes (decoded from the image/data event''s base64).';

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
COMMENT ON TABLE t_compaction_calls IS 'One row per compaction/summary that records a model call (provider set): the summary call, as the requests view shows it (store.ingest.calls).';
COMMENT ON COLUMN t_compaction_calls.seq IS 'seq of the compaction/summary event.';
COMMENT ON COLUMN t_compaction_calls.start_ms IS 'Time of its compaction/start (the call followed it and its prunes).';
COMMENT ON COLUMN t_compaction_calls.end_ms IS 'Time of the compaction/summary (the call had answered, or failed).';
COMMENT ON COLUMN t_compaction_calls.error_code IS 'The summary''s failure code: why the answer was not used.';
COMMENT ON COLUMN t_compaction_calls.message_count IS 'The replaced range''s messages with content, plus the instruction: the history the call sent.';
COMMENT ON COLUMN t_compaction_calls.est_input_tokens IS 'The range''s size (shadowedTokenCount), header excluded.';
COMMENT ON COLUMN t_compaction_calls.est_output_tokens IS 'The token meter''s estimate of the summary text.';
COMMENT ON COLUMN t_compaction_calls.header_seq IS 'The request/header in force (the call reused its system prompt).';
