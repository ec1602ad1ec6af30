-- Migration m0008_notebook_edits: the agent's cells in the notebook (issue 18). Shipped: never edit,
-- add a migration instead.
--   * notebook_edits: one row per cell the agent inserted (or offered) with notebook_insert, read
--     from the notebook/insert events that ingest already keeps in t_events like every event, so
--     no table, no ingest step and no backfill are needed: sessions ingested before show theirs.

CREATE OR REPLACE VIEW notebook_edits AS
WITH ev AS (
    SELECT session_id, seq, turn, step, time_ms, seeded, data,
           CAST(data -> '$.cells' AS JSON[]) AS cells,
           CAST(data -> '$.inserted' AS VARCHAR[]) AS inserted
    FROM t_events
    WHERE type = 'notebook/insert'
)
SELECT ev.session_id, ev.seq, ev.turn, ev.step, epoch_ms(ev.time_ms) AS time,
       ev.data ->> '$.callId' AS call_id,
       ev.data ->> '$.notebook' AS notebook,
       ev.data ->> '$.after' AS after_cell,
       r.i::INTEGER AS position,
       ev.cells[r.i + 1] ->> '$.cell_type' AS cell_type,
       ev.cells[r.i + 1] ->> '$.source' AS source,
       ev.cells[r.i + 1] ->> '$.sha256' AS sha256,
       CASE
           WHEN ev.data ->> '$.applied' = 'set_next_input' AND r.i > 0 THEN 'card'
           ELSE ev.data ->> '$.applied'
       END AS applied,
       ev.inserted[r.i + 1] AS cell_id,
       ev.seeded
FROM ev, range(len(ev.cells)) AS r(i);
COMMENT ON VIEW notebook_edits IS 'One row per cell the agent added to a notebook with notebook_insert (issue 18), in order; read from the notebook/insert events.';
COMMENT ON COLUMN notebook_edits.session_id IS 'The session (sessions.session_id).';
COMMENT ON COLUMN notebook_edits.seq IS 'seq of the notebook/insert event (one per call).';
COMMENT ON COLUMN notebook_edits.turn IS 'The turn of the call.';
COMMENT ON COLUMN notebook_edits.step IS 'The step of the call.';
COMMENT ON COLUMN notebook_edits.time IS 'When the insertion was applied (UTC).';
COMMENT ON COLUMN notebook_edits.call_id IS 'The notebook_insert call (tool_calls.call_id).';
COMMENT ON COLUMN notebook_edits.notebook IS 'The notebook''s path as the frontend named it (else the saved file''s); NULL when unknown.';
COMMENT ON COLUMN notebook_edits.after_cell IS 'The id of the cell the new cells went below (set_next_input: the anchor asked for).';
COMMENT ON COLUMN notebook_edits.position IS '0-based position of this cell among the cells of its call.';
COMMENT ON COLUMN notebook_edits.cell_type IS 'code or markdown.';
COMMENT ON COLUMN notebook_edits.source IS 'The cell''s source as inserted (a code cell on the dsh kernel starts with %%python).';
COMMENT ON COLUMN notebook_edits.sha256 IS 'sha256 (hex) of source.';
COMMENT ON COLUMN notebook_edits.applied IS 'extension (inserted by the frontend extension), set_next_input (offered in the execute reply; the frontend may ignore it) or card (only shown to copy).';
COMMENT ON COLUMN notebook_edits.cell_id IS 'The new cell''s id (extension only); NULL otherwise.';
COMMENT ON COLUMN notebook_edits.seeded IS 'The row is a fork''s copy of its parent''s event.';
