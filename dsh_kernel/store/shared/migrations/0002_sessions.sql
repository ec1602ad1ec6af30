-- One row per shipped session: its journal header and who and where it is, upserted with every
-- batch. `created` and `last_active` are epoch milliseconds (the header's createdAt; the newest
-- shipped event's time); `events` is how many events the server holds (its max(seq) + 1).
CREATE TABLE dsh_sessions (
    session_id  text PRIMARY KEY,
    "user"      text,
    notebook    text,
    created     bigint NOT NULL,
    last_active bigint NOT NULL,
    events      bigint NOT NULL DEFAULT 0,
    header      jsonb  NOT NULL
);
CREATE INDEX dsh_sessions_user ON dsh_sessions ("user");
CREATE INDEX dsh_sessions_last_active ON dsh_sessions (last_active);
