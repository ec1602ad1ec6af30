-- m0004_list_prices: one price source. The kernel keeps list_prices equal to its model catalogue
-- (dsh_kernel.llm.catalogue; DeepSeek at its off-peak band) on every read-write open; usage.cost
-- uses the user's row in prices (set_price) first, else the list price, else NULL. prices is never
-- written by the catalogue.

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

CREATE OR REPLACE VIEW price_book AS
SELECT provider, model, input_per_mtok, cached_input_per_mtok, cache_write_per_mtok, output_per_mtok,
       'user' AS source
FROM prices
UNION ALL
SELECT l.provider, l.model, l.input_per_mtok, l.cached_input_per_mtok, l.cache_write_per_mtok,
       l.output_per_mtok, 'catalogue' AS source
FROM list_prices l
WHERE NOT EXISTS (SELECT 1 FROM prices p WHERE p.provider = l.provider AND p.model = l.model);
COMMENT ON VIEW price_book IS 'The price in force per model: the user''s (prices) if set, else the catalogue''s list price.';
COMMENT ON COLUMN price_book.source IS 'user (set_price) or catalogue (list_prices).';

CREATE OR REPLACE VIEW usage AS
SELECT r.session_id, r.request, r.turn, r.step, r.attempt, r.started_at AS time, r.provider, r.model,
       coalesce(r.input_tokens, 0) AS input_tokens,
       coalesce(r.cache_read_tokens, 0) AS cached_input_tokens,
       coalesce(r.cache_write_tokens, 0) AS cache_write_tokens,
       coalesce(r.output_tokens, 0) AS output_tokens,
       coalesce(r.reasoning_tokens, 0) AS reasoning_tokens,
       (coalesce(r.input_tokens, 0) + coalesce(r.cache_read_tokens, 0) + coalesce(r.cache_write_tokens, 0)
           + coalesce(r.output_tokens, 0))::BIGINT AS total_tokens,
       CASE WHEN NOT r.estimated
                 OR (p.input_per_mtok = 0 AND p.output_per_mtok = 0
                     AND coalesce(p.cached_input_per_mtok, 0) = 0 AND coalesce(p.cache_write_per_mtok, 0) = 0)
            THEN (coalesce(r.input_tokens, 0) * p.input_per_mtok
                  + coalesce(r.cache_read_tokens, 0) * coalesce(p.cached_input_per_mtok, p.input_per_mtok)
                  + coalesce(r.cache_write_tokens, 0) * coalesce(p.cache_write_per_mtok, p.input_per_mtok)
                  + coalesce(r.output_tokens, 0) * p.output_per_mtok) / 1e6
       END AS cost,
       r.finish, r.seeded, r.estimated, p.source AS price_source
FROM requests r
LEFT JOIN price_book p ON p.provider = r.provider AND p.model = r.model
WHERE r.input_tokens IS NOT NULL OR r.output_tokens IS NOT NULL;
COMMENT ON VIEW usage IS 'Tokens by request (failed attempts that reported usage included; estimated where the server sent none), with cache hits and cost.';
COMMENT ON COLUMN usage.request IS 'requests.request of the same session.';
COMMENT ON COLUMN usage.time IS 'When the request was sent.';
COMMENT ON COLUMN usage.input_tokens IS 'Uncached input tokens.';
COMMENT ON COLUMN usage.cached_input_tokens IS 'Input tokens served from the provider''s cache.';
COMMENT ON COLUMN usage.cache_write_tokens IS 'Input tokens written to the provider''s cache.';
COMMENT ON COLUMN usage.output_tokens IS 'Output tokens (reasoning included).';
COMMENT ON COLUMN usage.reasoning_tokens IS 'Reasoning tokens (already inside output_tokens).';
COMMENT ON COLUMN usage.total_tokens IS 'input + cached input + cache write + output.';
COMMENT ON COLUMN usage.cost IS 'Cost at the user''s price (prices, set_price) if any, else the catalogue''s list price (list_prices); NULL when the model has neither, or when the counts are estimated (unless every price of the model is zero).';
COMMENT ON COLUMN usage.finish IS 'How the request ended (error attempts that reported usage are billed too).';
COMMENT ON COLUMN usage.estimated IS 'The server sent no usage for this request: the counts are the token meter''s estimate (chars / 4) and the cost is unknown.';
COMMENT ON COLUMN usage.price_source IS 'Where the price came from: user (set_price), catalogue (list price), or NULL (unknown).';
