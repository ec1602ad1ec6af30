-- A session row must agree with its own header: the mirror names a local journal by the session
-- id, and row-level security decides by "user", so a header naming another session, or a "user"
-- column that is not the header's, would let a student's kernel pass one session off as another's.
-- NOT VALID: rows shipped before this migration are kept as they are (the mirror refuses an
-- inconsistent one with a line); every insert and update from now on is checked.
ALTER TABLE dsh_sessions
    ADD CONSTRAINT dsh_sessions_header_id CHECK (header->>'id' = session_id) NOT VALID;
ALTER TABLE dsh_sessions
    ADD CONSTRAINT dsh_sessions_header_user
    CHECK ("user" IS NOT DISTINCT FROM header->>'user') NOT VALID;
