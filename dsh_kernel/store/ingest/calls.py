"""The summary calls of compactions (an ingest step, after ``statements``): one ``t_compaction_calls``
row per ``compaction/summary`` that records a model call (``provider`` set — also a call that failed
and left a reduction in its place), so the ``requests`` view reads a compaction's call as cheaply as
an agent's attempt.

The row holds what the view needs and the batch can know: the step the compaction ran in, when it
began (its ``compaction/start``, possibly ingested by an earlier batch) and when the summary was
logged, the route, the reported usage or the failure, the history the call sent (the replaced range's
messages with content, plus its instruction) with the token meter's estimate of it
(``shadowedTokenCount``) and of its answer (the summary text), and the ``request/header`` in force
(its system prompt was reused). Run only for batches that hold such an event (``NEEDED``); everything
it reads — the start, the header, the range's messages — is in ``t_events`` and ``t_messages`` by then.
"""

from __future__ import annotations

NEEDED = """
SELECT count(*) FROM _raw WHERE type = 'compaction/summary' AND (data ->> '$.provider') IS NOT NULL
"""

INSERT = """
INSERT INTO t_compaction_calls
WITH s AS (
    SELECT session_id, seq, time_ms, turn, step, seeded, data, data ->> '$.compactionId' AS cid
    FROM _ev WHERE type = 'compaction/summary' AND (data ->> '$.provider') IS NOT NULL
),
started AS (
    SELECT e.session_id, e.data ->> '$.compactionId' AS cid, min(e.time_ms) AS start_ms
    FROM t_events e SEMI JOIN s ON s.session_id = e.session_id
    WHERE e.type = 'compaction/start'
    GROUP BY ALL
),
sent AS (
    SELECT x.session_id, x.seq, count(*) AS n
    FROM (SELECT session_id, seq, unnest(TRY_CAST(data -> '$.shadowedSeqs' AS INTEGER[])) AS node FROM s) x
    JOIN t_messages m ON m.session_id = x.session_id AND m.seq = x.node
    WHERE m.has_content
    GROUP BY ALL
),
hdr AS (
    SELECT s.session_id, s.seq, max(e.seq) AS header_seq
    FROM s JOIN t_events e ON e.session_id = s.session_id AND e.seq < s.seq
    WHERE e.type = 'request/header'
    GROUP BY ALL
)
SELECT s.session_id, s.seq, s.cid, s.turn, s.step, coalesce(st.start_ms, s.time_ms), s.time_ms,
       s.data ->> '$.provider', s.data ->> '$.model', TRY_CAST(s.data ->> '$.maxTokens' AS BIGINT),
       s.data ->> '$.failure.code', s.data ->> '$.failure.message',
       TRY_CAST(s.data ->> '$.usage.inputTokens' AS BIGINT),
       TRY_CAST(s.data ->> '$.usage.cacheReadTokens' AS BIGINT),
       TRY_CAST(s.data ->> '$.usage.cacheWriteTokens' AS BIGINT),
       TRY_CAST(s.data ->> '$.usage.outputTokens' AS BIGINT),
       TRY_CAST(s.data ->> '$.usage.reasoningTokens' AS BIGINT),
       (coalesce(n.n, 0) + 1)::INTEGER,
       TRY_CAST(s.data ->> '$.shadowedTokenCount' AS BIGINT),
       (ceil(length(coalesce(s.data ->> '$.summary', '')) / 4) + 8)::BIGINT,
       h.header_seq, coalesce(s.seeded, false)
FROM s
LEFT JOIN started st ON st.session_id = s.session_id AND st.cid = s.cid
LEFT JOIN sent n ON n.session_id = s.session_id AND n.seq = s.seq
LEFT JOIN hdr h ON h.session_id = s.session_id AND h.seq = s.seq
"""
