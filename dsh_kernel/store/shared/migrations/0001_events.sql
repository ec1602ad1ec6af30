-- The shared event log: one row per journal event, keyed like the journal (session, seq), so a
-- re-sent batch is a no-op (INSERT ... ON CONFLICT DO NOTHING). `time` is the event's epoch
-- milliseconds, `data` its payload, `extra` the rest of its envelope (surface op, source seqs,
-- ignorable) or NULL: together they rebuild the journal line exactly (the mirror does).
CREATE TABLE dsh_events (
    session_id text   NOT NULL,
    seq        bigint NOT NULL CHECK (seq >= 0),
    type       text   NOT NULL,
    time       bigint NOT NULL,
    data       jsonb  NOT NULL,
    extra      jsonb,
    PRIMARY KEY (session_id, seq)
);
CREATE INDEX dsh_events_type_time ON dsh_events (type, time);
