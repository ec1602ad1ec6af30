-- Migration m0010_projection: what sessions.duckdb holds that the journals do not. The user's prices
-- (set_price) — created here unless a store of before has the table already, with its rows — and
-- _projection, the version of the derived tables and views the database was built with
-- (dsh_kernel/store/projection.py). Shipped: never edit, add a migration instead.

CREATE TABLE IF NOT EXISTS prices (
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

CREATE TABLE IF NOT EXISTS _projection (
    version INTEGER NOT NULL,
    built_at TIMESTAMP NOT NULL,
    views_sha256 VARCHAR NOT NULL
);
COMMENT ON TABLE _projection IS 'One row: the projection version the derived tables and views were built with (PROJECTION_VERSION); a different version is rebuilt from the journals at the next read-write open.';
COMMENT ON COLUMN _projection.built_at IS 'When they were (re)built (UTC).';
COMMENT ON COLUMN _projection.views_sha256 IS 'Hex sha256 of the views.sql applied last: a read-write open whose views.sql differs re-applies it.';
