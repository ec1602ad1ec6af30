"""A fresh database on the session's PostgreSQL server (``pg_server``) for each shared-store test;
``shared_db`` is imported by the conftests of the tests that use it."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, LiteralString

import psycopg
import psycopg.sql
import pytest

from tests.support.postgres import PgServer

_names = itertools.count()


@dataclass
class SharedDb:
    server: PgServer
    name: str

    @property
    def target(self) -> str:
        """The libpq keyword string the kernel would be given (superuser, trust: no password)."""
        return f"host={self.server.socket_dir} dbname={self.name} user=dsh"

    def target_for(self, user: str) -> str:
        return f"host={self.server.socket_dir} dbname={self.name} user={user}"

    def rows(self, sql: LiteralString, params: tuple[object, ...] = ()) -> list[tuple[Any, ...]]:
        with psycopg.connect(self.target) as conn:
            return list(conn.execute(sql, params).fetchall())


@pytest.fixture
def shared_db(pg_server: PgServer) -> Iterator[SharedDb]:
    name = f"t{next(_names)}"
    with psycopg.connect(pg_server.conninfo, autocommit=True) as conn:
        conn.execute(psycopg.sql.SQL("CREATE DATABASE {}").format(psycopg.sql.Identifier(name)))
    yield SharedDb(pg_server, name)
    if pg_server.proc is None:  # a test that stopped the server must leave it running
        pg_server.start()
    with psycopg.connect(pg_server.conninfo, autocommit=True) as conn:
        conn.execute(
            psycopg.sql.SQL("DROP DATABASE {} WITH (FORCE)").format(psycopg.sql.Identifier(name))
        )
