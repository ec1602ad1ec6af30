-- One row can never cost a reader more than a bound, and a row's line is the event it is stored as.
-- Without this a student's role could insert a line of 100 MB (stored compressed, a few MB) and the
-- mirror, reading it back, would run out of memory for the whole class.
--   line   at most 32 MiB (33554432 bytes): above the largest event a session writes (an image at
--          the largest DSH_IMAGE_MAX_BYTES, 20 MiB, is 26.7 MiB as base64); the kernel ships a longer
--          event as a small "shared/omitted" marker at the same seq (docs/shared-store.md);
--   data   at most 64 MiB as text (jsonb's text puts a space after each ':' and ',');
--   header at most 64 KiB as text (ids, two paths and a few names);
--   line   one JSON object whose "seq" is the row's seq, written as the integer it is (the mirror
--          writes the line back into a journal at that seq). PostgreSQL's JSON functions cannot
--          unescape a \u0000, so for the check each escaped backslash is set aside and each
--          \u0000 read as \ufffd (the line itself is stored as it came).
-- The same numbers are dsh_kernel.store.shared.bounds. NOT VALID: rows stored before this migration
-- are kept as they are (the mirror writes a marker for a line over the bound, with a line saying so);
-- every insert and update from now on is checked.
CREATE FUNCTION dsh_event_line_is_event(line text, seq bigint) RETURNS boolean
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
DECLARE
    found json;
BEGIN
    IF octet_length(line) > 33554432 THEN
        RETURN false;  -- never parsed: dsh_events_line_bounded refuses it
    END IF;
    found := replace(replace(line, E'\\\\', '__'), E'\\u0000', E'\\ufffd')::json -> 'seq';
    -- an object (-> is NULL for anything else), and "seq" is the number as written: a string "5",
    -- 5.0 or 5e0 is not seq 5 (the journal's readers take an integer only)
    RETURN coalesce(ltrim(line, E' \t\n\r') LIKE '{%' AND found::text = seq::text, false);
EXCEPTION WHEN invalid_text_representation OR untranslatable_character THEN
    RETURN false;  -- not JSON (or an escape this database cannot hold)
END
$$;
ALTER TABLE dsh_events
    ADD CONSTRAINT dsh_events_line_bounded CHECK (octet_length(line) <= 33554432) NOT VALID;
ALTER TABLE dsh_events
    ADD CONSTRAINT dsh_events_data_bounded CHECK (octet_length(data::text) <= 67108864) NOT VALID;
ALTER TABLE dsh_events
    ADD CONSTRAINT dsh_events_line_is_event CHECK (dsh_event_line_is_event(line, seq)) NOT VALID;
ALTER TABLE dsh_sessions
    ADD CONSTRAINT dsh_sessions_header_bounded CHECK (octet_length(header::text) <= 65536) NOT VALID;
