"""``check_read_only``: the ``sql`` tool's filter — exactly one read, or a one-line refusal.

The rules are ``dsh_kernel.kernel.toolbox.sql``'s first guarantee (its docstring). Both the tool (before
it starts the query's child process) and the child (``dsh_kernel.store.query.sandbox``, a second look)
apply them; this module is theirs to share, so neither imports the other.
"""

from __future__ import annotations

import duckdb

from dsh_kernel.store.query.run import QueryError
from dsh_kernel.textcap import cap_echo

MAX_SQL_CHARS = 100_000
_READS = "only SELECT, WITH, SHOW, DESCRIBE, SUMMARIZE and EXPLAIN [ANALYZE] of a SELECT"


def _refuse(why: str) -> QueryError:
    return QueryError(f"the sql tool is read-only: {why} ({_READS})", code="SQL_REFUSED")


def _kind(statement: duckdb.Statement) -> duckdb.StatementType | None:
    """The statement's type, or ``None`` for one the Python enum cannot name."""
    try:
        return statement.type
    except ValueError:  # e.g. UPDATE EXTENSIONS: "29 is not a valid StatementType"
        return None


def _tokens(sql: str) -> list[tuple[str, bool]]:
    """DuckDB's tokens of ``sql`` as (text, is-keyword), comments dropped (positions are bytes)."""
    raw = sql.encode()
    found = duckdb.tokenize(sql)
    out: list[tuple[str, bool]] = []
    for i, (pos, kind) in enumerate(found):
        if kind == duckdb.token_type.comment:
            continue
        end = found[i + 1][0] if i + 1 < len(found) else len(raw)
        out.append(
            (raw[pos:end].decode("utf-8", "replace").strip(), kind == duckdb.token_type.keyword)
        )
    return out


def _name(sql: str) -> str:
    """What to call a refused statement: its type, else its leading keywords (``UPDATE EXTENSIONS``)."""
    try:
        statements = duckdb.extract_statements(sql)
    except duckdb.Error:
        statements = []
    kind = _kind(statements[0]) if len(statements) == 1 else None
    if kind is not None:
        return str(kind).rsplit(".", 1)[-1]
    words: list[str] = []
    for text, keyword in _tokens(sql)[:3]:
        if not keyword:
            break
        words.append(text.upper())
    return cap_echo(" ".join(words), 40) or "this"


def _explained(sql: str) -> str | None:
    """What ``EXPLAIN [ANALYZE] [(options)]`` wraps, or ``None`` if that cannot be told."""
    raw = sql.encode()  # token positions are byte offsets
    found = duckdb.tokenize(sql)
    starts = [p for p, kind in found if kind != duckdb.token_type.comment]
    texts = [t.upper() for t, _ in _tokens(sql)]
    if not texts or texts[0] != "EXPLAIN":
        return None
    i = 1
    if i < len(texts) and texts[i] in ("ANALYZE", "ANALYSE"):
        i += 1
    if i >= len(texts):
        return None
    rest = raw[starts[i] :].decode("utf-8", "replace")
    if _single_select(rest) or texts[i] != "(":
        return rest
    depth = 0
    for j in range(i, len(texts)):  # skip the "(FORMAT json, …)" option list
        depth += texts[j].count("(") - texts[j].count(")")
        if depth <= 0:
            return raw[starts[j + 1] :].decode("utf-8", "replace") if j + 1 < len(texts) else None
    return None


def _single_select(sql: str) -> bool:
    try:
        statements = duckdb.extract_statements(sql)
    except duckdb.Error:
        return False
    return len(statements) == 1 and _kind(statements[0]) == duckdb.StatementType.SELECT


def check_read_only(sql: str) -> None:
    """Refuse anything but exactly one read (see the module docstring) with a one-line
    ``QueryError`` (``SQL_REFUSED``; ``SQL_SYNTAX`` for SQL DuckDB cannot parse)."""
    if len(sql) > MAX_SQL_CHARS:
        raise QueryError(
            f"the sql tool takes at most {MAX_SQL_CHARS:,} characters of SQL; got {len(sql):,}",
            code="SQL_REFUSED",
        )
    try:
        statements = duckdb.extract_statements(sql)
    except duckdb.Error as exc:
        raise QueryError(str(exc), code="SQL_SYNTAX") from exc
    if len(statements) != 1:
        raise QueryError(
            f"the sql tool runs exactly one statement; got {len(statements)}", code="SQL_REFUSED"
        )
    kind = _kind(statements[0])
    if kind == duckdb.StatementType.EXPLAIN:
        inner = _explained(sql)
        if inner is None:
            raise _refuse("this EXPLAIN is not allowed: write EXPLAIN [ANALYZE] SELECT …")
        if not _single_select(inner):
            raise _refuse(
                f"EXPLAIN may only wrap a SELECT (EXPLAIN ANALYZE runs what it wraps), and "
                f"{_name(inner)} statements are not allowed"
            )
    elif kind != duckdb.StatementType.SELECT:
        raise _refuse(f"{_name(sql)} statements are not allowed")
