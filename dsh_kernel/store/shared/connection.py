"""Where the shared store is and how to reach it: the target check, the driver, the connection and
the server's own ordered migrations.

The target (``DSH_SHARED_STORE``, traitlet ``shared_store``) is a libpq URL
(``postgresql://user@host/db``), a libpq keyword string (``host=… dbname=…``) or a bare service name
(``course``: ``service=course`` in ``pg_service.conf``). Credentials come the libpq way only — the
service file, ``PGPASSFILE``/``~/.pgpass``, ``PGPASSWORD`` — so a target never carries a secret into a
setting, a log line or a status line: ``check_target`` refuses a password inside it with one line
(``StoreError(SHARED_STORE_PASSWORD)``), after teaching the redactor that password so it is scrubbed
wherever it turns up. The password libpq really used (``PGPASSWORD``, or a password file's) is given
to the redactor at every connection.

The driver is psycopg 3, the ``shared`` extra (``pip install 'dsh-kernel[shared]'``). Without it,
``connect`` raises ``StoreError(SHARED_STORE_DRIVER)`` with one line saying so; it is imported here
only, lazily, so the kernel starts and works without it.

Migrations are PostgreSQL's own — ``migrations/NNNN_name.sql`` beside this module, applied in name
order, each in its own transaction with its name recorded in ``dsh_schema_migrations``; a shipped file
is never edited (add one). ``migrate`` serialises concurrent kernels with an advisory lock, and
refuses (``SHARED_STORE_SCHEMA_NEWER``) a server that has a migration this code does not know.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import re
from collections.abc import Generator
from importlib import resources
from types import ModuleType
from typing import Any
from urllib.parse import parse_qs, urlsplit

from dsh_kernel.errors import StoreError
from dsh_kernel.llm.secrets import REDACTOR

__all__ = [
    "CONNECT_TIMEOUT_S",
    "Connection",
    "check_target",
    "connect",
    "describe_target",
    "driver",
    "migrate",
    "migration_names",
    "reason",
    "server_errors",
]

Connection = Any
"""A ``psycopg.Connection`` (the driver is optional, so its type is not imported here)."""

CONNECT_TIMEOUT_S = 5
"""libpq's ``connect_timeout``: a server that is away costs a shipper attempt at most this."""

MIGRATIONS_TABLE = "dsh_schema_migrations"
_LOCK_KEY = 0x64736873  # 'dshs': the advisory lock that serialises migrating kernels

_URL = re.compile(r"^postgres(?:ql)?://", re.IGNORECASE)
_KEYWORD_PASSWORD = re.compile(r"(?:^|\s)password\s*=\s*('(?:[^'\\]|\\.)*'|\S*)", re.IGNORECASE)


def check_target(raw: str, *, name: str = "DSH_SHARED_STORE") -> str:
    """``raw`` (stripped) as a libpq connection string; a bare word becomes ``service=word``.

    Raises ``StoreError(SHARED_STORE_PASSWORD)`` when it holds a password, and
    ``StoreError(SHARED_STORE_TARGET)`` when it is not a target at all; the messages call it
    ``name``."""
    text = raw.strip()
    if not text:
        raise StoreError("the shared store target is empty", code="SHARED_STORE_TARGET")
    password: str | None = None
    if _URL.match(text):
        try:
            parts = urlsplit(text)
            password = parts.password
        except ValueError as exc:
            # urlsplit refuses an unclosed IPv6 bracket or a stray one; a password in such a URL
            # is still learnt (best effort) so the line below never carries it
            REDACTOR.add_password(_url_password_guess(text))
            raise StoreError(
                f"{name} is not a valid postgresql:// URL ({exc}); check the host part "
                "(an IPv6 address is written [::1])",
                code="SHARED_STORE_TARGET",
            ) from exc
        if password is None:
            query = parse_qs(parts.query)
            password = next(iter(query.get("password", [])), None)
    elif "=" in text:
        found = _KEYWORD_PASSWORD.search(text)
        if found is not None:
            password = found.group(1).strip("'") or None
    elif not re.fullmatch(r"[A-Za-z0-9_.\-]+", text):
        raise StoreError(
            f"{name} is neither a postgresql:// URL, a libpq keyword string (host=… "
            "dbname=…) nor a service name",
            code="SHARED_STORE_TARGET",
        )
    else:
        text = f"service={text}"
    if password is not None:
        REDACTOR.add_password(password)
        raise StoreError(
            f"{name} holds a password: remove it from the URL and give it the libpq way "
            "(a service file, PGPASSFILE or ~/.pgpass, or PGPASSWORD)",
            code="SHARED_STORE_PASSWORD",
        )
    return text


def _url_password_guess(text: str) -> str | None:
    """The ``user:password@`` part's password of a URL ``urlsplit`` could not take apart."""
    rest = _URL.sub("", text, count=1)
    userinfo, at, _ = rest.rpartition("@")
    if not at or ":" not in userinfo:
        return None
    return userinfo.split(":", 1)[1] or None


def describe_target(target: str) -> str:
    """``target`` for a status line (it holds no password: ``check_target`` saw to that)."""
    return REDACTOR.redact(target)


def driver(name: str = "DSH_SHARED_STORE") -> ModuleType:
    """The psycopg module; ``StoreError(SHARED_STORE_DRIVER)`` when it is not installed (the line
    names where the target came from: ``name``)."""
    try:
        return importlib.import_module("psycopg")
    except ImportError as exc:
        given = "is set" if name == "DSH_SHARED_STORE" else "is given"
        raise StoreError(
            f"{name} {given} but the PostgreSQL driver is not installed: "
            "pip install 'dsh-kernel[shared]' (psycopg 3); sessions stay in the local store only",
            code="SHARED_STORE_DRIVER",
        ) from exc


def connect(
    target: str, *, timeout_s: int = CONNECT_TIMEOUT_S, name: str = "DSH_SHARED_STORE"
) -> Connection:
    """A new connection to ``target`` (checked with ``check_target`` first), not in autocommit.

    Raises ``StoreError(SHARED_STORE_DOWN)`` naming the server's reason (never a password)."""
    psycopg = driver(name)
    conninfo = check_target(target, name=name)
    password = _password()
    extra = {} if password is None else {"password": password}
    try:
        conn = psycopg.connect(
            conninfo,
            connect_timeout=max(1, int(timeout_s)),
            application_name="dsh-kernel",
            **extra,
        )
    except psycopg.Error as exc:
        raise StoreError(
            f"the shared store {describe_target(conninfo)} is unreachable: {reason(exc)}",
            code="SHARED_STORE_DOWN",
        ) from exc
    REDACTOR.add_password(conn.info.password or None)
    return conn


def _password() -> str | None:
    """``PGPASSWORD`` as set now, else the one the kernel moved out of ``os.environ`` at start
    (``kernel._protect_secrets``), learnt by the redactor whatever its length; ``None``: libpq's
    own ways (service file, password file)."""
    from dsh_kernel.llm.keys import KEYS

    password = os.environ.get("PGPASSWORD") or KEYS.taken("PGPASSWORD")
    REDACTOR.add_password(password)
    return password or None


@contextlib.contextmanager
def server_errors(target: str) -> Generator[None]:
    """Turn the driver's errors inside the block into ``StoreError(SHARED_STORE_FAILED)`` naming
    the server's reason (a permission a role lacks, a row security policy, a lost connection)."""
    psycopg = driver()
    try:
        yield
    except psycopg.Error as exc:
        raise StoreError(
            f"the shared store {describe_target(check_target(target))} refused: {reason(exc)}",
            code="SHARED_STORE_FAILED",
        ) from exc


def reason(exc: BaseException) -> str:
    """The driver's error ``exc`` as one redacted line (at most 300 characters)."""
    text = " ".join(str(exc).split()) or type(exc).__name__
    return REDACTOR.redact(text[:300])


def migration_names() -> list[str]:
    """The packaged migrations, in apply order (``NNNN_name``)."""
    folder = resources.files("dsh_kernel.store.shared").joinpath("migrations")
    return sorted(p.name[:-4] for p in folder.iterdir() if p.name.endswith(".sql"))


def _migration_sql(name: str) -> str:
    folder = resources.files("dsh_kernel.store.shared").joinpath("migrations")
    return folder.joinpath(f"{name}.sql").read_text(encoding="utf-8")


def migrate(conn: Connection) -> list[str]:
    """Apply the migrations ``conn``'s server lacks; returns their names. Commits.

    A server that has them all is only read (a student's role needs no right to create tables)."""
    known = migration_names()
    with conn.transaction(), conn.cursor() as cur:
        if _applied(cur, known) >= set(known):
            return []
        cur.execute("SELECT pg_advisory_xact_lock(%s)", (_LOCK_KEY,))
        cur.execute(
            f"CREATE TABLE IF NOT EXISTS {MIGRATIONS_TABLE} "
            "(name text PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())"
        )
        done = _applied(cur, known)
        applied: list[str] = []
        for name in known:
            if name in done:
                continue
            cur.execute(_migration_sql(name))
            cur.execute(f"INSERT INTO {MIGRATIONS_TABLE} (name) VALUES (%s)", (name,))
            applied.append(name)
    return applied


def _applied(cur: Any, known: list[str]) -> set[str]:
    cur.execute("SELECT to_regclass(%s) IS NOT NULL", (MIGRATIONS_TABLE,))
    row = cur.fetchone()
    if not row or not row[0]:
        return set()
    cur.execute(f"SELECT name FROM {MIGRATIONS_TABLE}")
    done = {str(r[0]) for r in cur.fetchall()}
    unknown = sorted(done - set(known))
    if unknown:
        raise StoreError(
            f"the shared store has migrations this dsh-kernel does not know ({', '.join(unknown)}): "
            "a newer dsh-kernel set it up; upgrade dsh-kernel",
            code="SHARED_STORE_SCHEMA_NEWER",
        )
    return done
