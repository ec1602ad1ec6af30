-- Migration m0005_images: images in the store (issue 15). Shipped: never edit, add a migration instead.
-- An image block in a message names its bytes by sha256; the bytes are the session's image/data event
-- (base64). Ingest keeps the base64 out of t_events.data (an image/data row keeps sha256 and mediaType)
-- and stores the decoded bytes once per hash in t_image_data, so the events view and every query that
-- scans events stay light however many images a session holds, while the bytes stay one join away.
-- t_images has one row per image block of an appended user/message or tool/result.
-- 0005_backfill.sql, run right after, does the same for the rows ingested before this migration.

COMMENT ON COLUMN t_events.data IS 'The event data object, as JSON (an image/data event without its base64 data: the bytes are in t_image_data).';
COMMENT ON COLUMN events.data IS 'The event data (JSON): query it with ->, ->> or json_extract. An image/data event keeps sha256 and mediaType; its bytes are in image_data.';

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

CREATE OR REPLACE VIEW image_data AS
SELECT sha256 AS hash, media_type, octet_length(data)::BIGINT AS bytes, data
FROM t_image_data;
COMMENT ON VIEW image_data IS 'The bytes of every image in the store, one row per hash: join images on hash. The events view keeps only sha256 and mediaType of an image/data event; the base64 stays in the journal.';
COMMENT ON COLUMN image_data.hash IS 'Hex sha256 of data (images.hash).';
COMMENT ON COLUMN image_data.media_type IS 'image/png, image/jpeg, ...';
COMMENT ON COLUMN image_data.bytes IS 'Size of data.';
COMMENT ON COLUMN image_data.data IS 'The image bytes (e.g. IPython.display.Image(data=...) in a %%sql result).';

CREATE OR REPLACE VIEW images AS
SELECT i.session_id, i.seq, i.turn, i.step, epoch_ms(i.time_ms) AS time, i.source, i.call_id,
       i.position, i.sha256 AS hash, i.media_type, i.width, i.height, i.bytes, i.description,
       i.reduction,
       CASE WHEN r.first_seq IS NULL OR r.config IS NULL THEN NULL
            ELSE coalesce(TRY_CAST(r.config ->> '$.images' AS BOOLEAN), false) END AS sent_to_model,
       r.request, d.sha256 IS NOT NULL AS stored, i.seeded
FROM t_images i
ASOF LEFT JOIN requests r ON r.session_id = i.session_id AND r.first_seq > i.seq
LEFT JOIN t_image_data d ON d.sha256 = i.sha256;
COMMENT ON VIEW images IS 'One row per image a message carried: a tool result''s (call set) or one attached to a user message (call NULL); whether the model was sent it; the bytes are in image_data.';
COMMENT ON COLUMN images.seq IS 'seq of the user/message or tool/result event holding the image.';
COMMENT ON COLUMN images.time IS 'When the message holding the image was logged (UTC).';
COMMENT ON COLUMN images.source IS 'tool (a tool result''s image), user (attached to a person''s message) or plugin (injected context).';
COMMENT ON COLUMN images.call_id IS 'The tool call whose result holds the image; NULL for an image attached to a user message.';
COMMENT ON COLUMN images.position IS '1-based order of the image among the images of its message.';
COMMENT ON COLUMN images.hash IS 'Hex sha256 of the image bytes: join image_data on hash for them.';
COMMENT ON COLUMN images.media_type IS 'image/png, image/jpeg, ...';
COMMENT ON COLUMN images.width IS 'Width in pixels, as stored (after any reduction).';
COMMENT ON COLUMN images.height IS 'Height in pixels, as stored.';
COMMENT ON COLUMN images.bytes IS 'Size of the stored (reduced) image.';
COMMENT ON COLUMN images.description IS 'The text stand-in a model that takes no images is sent instead (built when the image was captured).';
COMMENT ON COLUMN images.reduction IS 'How the original was reduced (e.g. 2000x1500 PNG 412 kB → 1024x768 PNG 88 kB); NULL when sent as captured.';
COMMENT ON COLUMN images.sent_to_model IS 'The first model request after the image went to a route that takes images (its config has images: true), so it was sent as an image; false: as its description; NULL: no request followed yet.';
COMMENT ON COLUMN images.request IS 'That first request after the image (requests.request of the same session); NULL when none followed.';
COMMENT ON COLUMN images.stored IS 'The store holds the bytes (image_data has the hash); false for a journal whose image/data is missing or does not match its hash.';
COMMENT ON COLUMN images.seeded IS 'Copied from the parent session by a fork: filter with NOT seeded to count each image once.';
