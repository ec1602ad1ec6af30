-- The shared event log: one row per journal event, keyed like the journal (session, seq), so a
-- re-sent batch is a no-op (INSERT ... ON CONFLICT DO NOTHING). `time` is the event's epoch
-- milliseconds and `data` its payload as jsonb, for SQL; `line` is the journal line exactly as the
-- kernel wrote it, which the mirror writes back (jsonb reorders keys, and cannot hold \u0000).
CREATE TABLE dsh_events (
    session_id text   NOT NULL,
    seq        bigint NOT NULL CHECK (seq >= 0),
    type       text   NOT NULL,
    time       bigint NOT NULL,
    data       jsonb  NOT NULL,
    line       text   NOT NULL,
    PRIMARY KEY (session_id, seq)
);
CREATE INDEX dsh_events_type_time ON dsh_events (type, time);
