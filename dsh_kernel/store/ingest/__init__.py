"""Ingest: the journals into the typed tables of ``sessions.duckdb``, incrementally.

``incremental`` drives a pass (``ingest``): ``plan`` finds the journals with new whole lines and
where they start; ``statements`` is the SQL of one batch in execution order; ``surface`` folds
replacements into what the model saw; ``calls``, ``silent`` and ``image_rows`` derive the
compaction calls, the attempts that got no chunk, and the stored images. A pass is one
transaction per batch: a journal it cannot read is reported and left for the next pass, never
half-loaded.
"""
