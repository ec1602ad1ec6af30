"""The attempt row of a model call that got no chunk at all (an ingest step, after ``statements``).

A call cancelled or crashed while it waited for its first chunk has no chunk to make its
``t_attempts`` row from. It can only be the last call of a turn that ended aborted or interrupted, so
when such a ``turn/end`` arrives (``SILENT_NEEDED``), its last step is checked: one call per
``step/start`` and ``llm/retry-started``, one more after an ``overflow`` compaction that ended without
error after a call of the step (the server said it did not fit: the step retries once; an overflow
found before sending made no call), one fewer when a compaction in the step never ended (the crash
came while it ran, before the call it made room for) — and fewer attempts than that means the last
call got nothing. Its row has no chunks; ``first_seq`` and ``last_seq`` are the seq of the event that
closed it, and the history it sent is the surface before that event: the messages logged before it
that no replacement before it took off (``surface``).
"""

from __future__ import annotations

SILENT_NEEDED = """
SELECT count(*) FROM _raw
WHERE type = 'turn/end' AND data ->> '$.reason.kind' IN ('aborted', 'interrupted')
"""

SILENT = """
INSERT INTO t_attempts
WITH cut AS (
    SELECT session_id, turn, seq AS end_seq, time_ms AS end_ms
    FROM _raw WHERE type = 'turn/end' AND data ->> '$.reason.kind' IN ('aborted', 'interrupted')
),
steps AS (
    SELECT e.session_id, e.turn, e.step,
           1 + count(*) FILTER (WHERE e.type = 'llm/retry-started') AS calls,
           arg_max(e.time_ms, e.seq) FILTER (WHERE e.type <> 'step/end') AS mark_ms,
           min(e.seq) FILTER (WHERE e.type = 'step/end') AS close_seq,
           min(e.time_ms) FILTER (WHERE e.type = 'step/end') AS close_ms
    FROM t_events e SEMI JOIN cut c ON c.session_id = e.session_id AND c.turn = e.turn
    WHERE e.type IN ('step/start', 'step/end', 'llm/retry-started', 'compaction/end')
      AND e.step IS NOT NULL
    GROUP BY e.session_id, e.turn, e.step
    QUALIFY e.step = max(e.step) OVER (PARTITION BY e.session_id, e.turn)
),
brackets AS (
    SELECT e.session_id, e.turn, e.step,
           any_value(e.data ->> '$.trigger') FILTER (WHERE e.type = 'compaction/start') AS trig,
           min(e.seq) FILTER (WHERE e.type = 'compaction/start') AS start_seq,
           count(*) FILTER (WHERE e.type = 'compaction/end') > 0 AS ended,
           coalesce(bool_or(e.type = 'compaction/end'
                             AND coalesce(json_type(e.data -> '$.error'), 'NULL') <> 'NULL'), false) AS failed
    FROM t_events e SEMI JOIN cut c ON c.session_id = e.session_id AND c.turn = e.turn
    WHERE starts_with(e.type, 'compaction/') AND e.type IN ('compaction/start', 'compaction/end')
      AND e.step IS NOT NULL
    GROUP BY e.session_id, e.turn, e.step, e.data ->> '$.compactionId'
),
retried AS (  -- an overflow compaction that ended well after a call of its step: the step retried
    SELECT DISTINCT b.session_id, b.turn, b.step, b.start_seq
    FROM brackets b
    JOIN t_attempts a ON a.session_id = b.session_id AND a.turn = b.turn AND a.step = b.step
                     AND a.first_seq < b.start_seq
    WHERE b.trig = 'overflow' AND b.ended AND NOT b.failed
),
adjust AS (
    SELECT b.session_id, b.turn, b.step,
           count(r.start_seq) - count(*) FILTER (WHERE NOT b.ended) AS d
    FROM brackets b
    LEFT JOIN retried r USING (session_id, turn, step, start_seq)
    GROUP BY ALL
),
made AS (
    SELECT a.session_id, a.turn, a.step, count(*) AS n
    FROM t_attempts a SEMI JOIN cut c ON c.session_id = a.session_id AND c.turn = a.turn
    GROUP BY ALL
),
silent AS (
    SELECT s.session_id, s.turn, s.step, s.calls + coalesce(j.d, 0) AS expected, s.mark_ms,
           coalesce(s.close_seq, c.end_seq) AS close_seq, coalesce(s.close_ms, c.end_ms) AS close_ms
    FROM steps s
    JOIN cut c USING (session_id, turn)
    LEFT JOIN adjust j USING (session_id, turn, step)
    LEFT JOIN made m USING (session_id, turn, step)
    WHERE coalesce(m.n, 0) < s.calls + coalesce(j.d, 0) AND s.mark_ms IS NOT NULL
),
hist AS (
    SELECT s.session_id, s.turn, s.step, count(m.seq) AS n, sum(m.est_tokens) AS tokens
    FROM silent s
    LEFT JOIN t_messages m
        ON m.session_id = s.session_id AND m.seq < s.close_seq AND m.has_content
       AND (m.replaced_by IS NULL OR m.replaced_by > s.close_seq)
    GROUP BY ALL
)
SELECT s.session_id, s.turn, s.step, s.expected::INTEGER, s.close_seq, s.close_seq, s.mark_ms, NULL,
       s.close_ms, 0, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, s.mark_ms,
       h.n::INTEGER, coalesce(h.tokens, 0)::BIGINT, NULL, 0
FROM silent s JOIN hist h USING (session_id, turn, step)
ON CONFLICT DO NOTHING
"""
