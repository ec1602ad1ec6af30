"""The shared store: every kernel's sessions shipped, live, to one PostgreSQL (docs/shared-store.md).

The journal stays the source of truth and DuckDB the analysis engine; PostgreSQL is the shared event
log many writers append to. ``connection`` (target, driver, migrations), ``send`` (one journal's
unshipped lines, one transaction), ``shipper`` (the kernel's background thread), ``catchup``
(``python -m dsh_kernel ship`` and ``mirror``). psycopg is the optional ``shared`` extra and is
imported only when a shared store is used.
"""
