-- Migration m0007_course: who a session is for and the AI policy it ran under (issue 17), from
-- the session header. Shipped: never edit, add a migration instead.

ALTER TABLE t_sessions ADD COLUMN "user" VARCHAR;
ALTER TABLE t_sessions ADD COLUMN ai_policy VARCHAR;
COMMENT ON COLUMN t_sessions."user" IS 'Who the session is for: the header''s user (JUPYTERHUB_USER, else USER).';
COMMENT ON COLUMN t_sessions.ai_policy IS 'The header''s aiPolicy: full, explain or off.';

CREATE OR REPLACE VIEW sessions AS
WITH ev AS (
    SELECT session_id, count(*) AS events, max(time_ms) AS last_ms FROM t_events GROUP BY session_id
),
tu AS (
    SELECT session_id, count(*) AS turns FROM t_events WHERE type = 'turn/start' GROUP BY session_id
),
ti AS (
    SELECT session_id, arg_max(data ->> '$.title', seq) AS title
    FROM t_events WHERE type = 'session/title' GROUP BY session_id
),
pr AS (
    SELECT session_id, arg_min(text, seq) AS prompt FROM t_messages WHERE source = 'user' GROUP BY session_id
),
us AS (
    SELECT session_id, sum(input_tokens)::BIGINT AS input_tokens,
           sum(cached_input_tokens)::BIGINT AS cached_input_tokens,
           sum(output_tokens)::BIGINT AS output_tokens, sum(total_tokens)::BIGINT AS total_tokens,
           sum(cost) AS cost,
           bool_and(cost IS NOT NULL) AS cost_complete, bool_or(estimated) AS estimated
    FROM usage WHERE NOT seeded GROUP BY session_id
)
SELECT s.id AS session_id,
       coalesce(ti.title, left(trim(regexp_replace(pr.prompt, '\s+', ' ', 'g')), 80)) AS title,
       epoch_ms(s.created_ms) AS created, epoch_ms(ev.last_ms) AS last_active, s.notebook, s.cwd,
       s."user", s.ai_policy,
       s.parent_session, s.seed_length, coalesce(tu.turns, 0)::INTEGER AS turns,
       coalesce(ev.events, 0)::INTEGER AS events,
       coalesce(us.input_tokens, 0) AS input_tokens, coalesce(us.cached_input_tokens, 0) AS cached_input_tokens,
       coalesce(us.output_tokens, 0) AS output_tokens, coalesce(us.total_tokens, 0) AS total_tokens,
       us.cost, coalesce(us.cost_complete, true) AS cost_complete, s.journal,
       coalesce(us.estimated, false) AS estimated
FROM t_sessions s
LEFT JOIN ev ON ev.session_id = s.id
LEFT JOIN tu ON tu.session_id = s.id
LEFT JOIN ti ON ti.session_id = s.id
LEFT JOIN pr ON pr.session_id = s.id
LEFT JOIN us ON us.session_id = s.id;
COMMENT ON VIEW sessions IS 'One row per session: title, created, notebook, turns, tokens and cost.';
COMMENT ON COLUMN sessions.session_id IS 'Session id (a UUID).';
COMMENT ON COLUMN sessions.title IS 'The latest session/title, else the start of the first prompt.';
COMMENT ON COLUMN sessions.created IS 'When the session was created (UTC).';
COMMENT ON COLUMN sessions.last_active IS 'Time of its latest event.';
COMMENT ON COLUMN sessions.notebook IS 'The notebook it was started from, when known.';
COMMENT ON COLUMN sessions.cwd IS 'Working directory of the kernel.';
COMMENT ON COLUMN sessions."user" IS 'Who the session is for (JUPYTERHUB_USER, else USER); NULL for sessions written before dsh-kernel recorded it.';
COMMENT ON COLUMN sessions.ai_policy IS 'The AI policy in force when the session was created: full, explain or off; NULL before dsh-kernel recorded it.';
COMMENT ON COLUMN sessions.parent_session IS 'For a fork: the session it was forked from.';
COMMENT ON COLUMN sessions.seed_length IS 'For a fork: how many events were copied from the parent.';
COMMENT ON COLUMN sessions.turns IS 'Turns in the log (a fork''s copied turns included).';
COMMENT ON COLUMN sessions.events IS 'Events in the log.';
COMMENT ON COLUMN sessions.total_tokens IS 'Tokens of this session''s own requests (a fork''s copied prefix excluded).';
COMMENT ON COLUMN sessions.cost IS 'Sum of priced requests; NULL if none is priced.';
COMMENT ON COLUMN sessions.cost_complete IS 'False when some requests have no cost (no price, or estimated counts): cost is then a lower bound.';
COMMENT ON COLUMN sessions.journal IS 'The journal file, relative to the store directory.';
COMMENT ON COLUMN sessions.estimated IS 'Some token counts are estimates (the server sent no usage for some requests).';
