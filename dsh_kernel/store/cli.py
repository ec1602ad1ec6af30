"""The store's subcommands of ``dsh-kernel`` (``python -m dsh_kernel``): a course's sessions with no
kernel running. Each has ``*_arguments(parser)`` (its arguments, added to its subparser by
``dsh_kernel.__main__``) and ``*_command(args)`` (the parsed arguments in, the exit status out).

* ``export --parquet DIR [--store PATH] [--since YYYY-MM-DD] [--force]`` — what ``%agent export
  --parquet`` writes, for a whole store (default: ``DSH_STORE``, else the per-user store): the store
  is ingested first, then every session (or those active on or after ``--since``, a UTC day) goes
  to ``DIR`` (``store.sessions.export_parquet``);
* ``report PATH... [-o FILE] [--format md|html] [--force]`` — the course's summary
  (``store.report``) from one or many exports and submitted notebooks (their capsules, counted as
  self-reported), as Markdown on stdout, or to ``FILE`` (its suffix, ``.md`` or ``.html``, picks
  the format unless ``--format`` does). A notebook not counted (its capsules refused, or none) is
  named on stderr (``skipped …``) and in the report, and the report is still written;
* ``ship [DSN] [--store PATH]`` and ``mirror [DSN] [--store PATH] [--since YYYY-MM-DD]`` — a store's
  journals to the shared store, and the shared sessions into a store (``store.shared.catchup``).
  Both take the shared store as ``DSN``, else from ``DSH_SHARED_STORE``; a DSN with a password in it
  is refused (a command line is visible to other users: the password goes the libpq way).

Nothing is overwritten without ``--force``. Exit status: 0 done; 1 it could not be done (one line on
stderr saying why and what to do — a store locked by another process, an export already there, a
folder that is no export, no shared store given); 2 the command line is wrong (usage on stderr, as
argparse does; a command raises ``argparse.ArgumentError`` for what it finds wrong after parsing).
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Callable
from datetime import date
from pathlib import Path
from typing import TYPE_CHECKING

from dsh_kernel.errors import DshError

if TYPE_CHECKING:
    from dsh_kernel.store.layout import Store
    from dsh_kernel.store.report.render import Format

# DuckDB and the store load when a command runs, not when the command line is built: `dsh-kernel
# --help` and the kernel's start do not pay for them.

BUSY_TIMEOUT_S = 10.0
"""How long the CLI waits for a store another process holds (a kernel's opens are short)."""


def _day(text: str) -> date:
    if not re.fullmatch(r"\d{4}-\d{2}-\d{2}", text):
        raise argparse.ArgumentTypeError(f"not a day: {text!r} (give YYYY-MM-DD, UTC)")
    try:
        return date.fromisoformat(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"not a day: {text!r} ({exc})") from exc


def export_arguments(p: argparse.ArgumentParser) -> None:
    """The ``export`` subcommand's arguments."""
    p.add_argument("--parquet", metavar="DIR", required=True, type=Path, help="the folder to write")
    _store_arg(p)
    _since_arg(p)
    p.add_argument("--force", action="store_true", help="replace an export already in DIR")


def report_arguments(p: argparse.ArgumentParser) -> None:
    """The ``report`` subcommand's arguments."""
    p.add_argument(
        "exports",
        metavar="PATH",
        nargs="+",
        type=Path,
        help="an export, a submitted notebook (.ipynb), or a folder of them (its subfolders' too): "
        "a notebook counts as its chat cells' capsules carry it, marked self-reported",
    )
    p.add_argument("-o", "--output", metavar="FILE", type=Path, help="write here (default: stdout)")
    p.add_argument("--format", choices=("md", "html"), help="default: by FILE's suffix, else md")
    p.add_argument("--force", action="store_true", help="replace FILE if it exists")


def export_command(args: argparse.Namespace) -> int:
    """``export``: the parsed arguments in, the exit status out."""
    store = _store(args)
    return _run(lambda: _export(store, args.parquet, since=args.since, force=args.force), store)


def report_command(args: argparse.Namespace) -> int:
    """``report``; a FILE whose format cannot be told is an ``argparse.ArgumentError``."""
    out: Path | None = args.output
    fmt: Format
    if args.format is not None:
        fmt = "html" if args.format == "html" else "md"
    elif out is None or out.suffix.lower() in (".md", ".markdown"):
        fmt = "md"
    elif out.suffix.lower() in (".html", ".htm"):
        fmt = "html"
    else:
        raise argparse.ArgumentError(
            None, f"cannot tell the format of {out}: name it .md or .html, or give --format"
        )
    return _run(lambda: _report(args.exports, out, fmt, force=args.force), None)


def _run(action: Callable[[], None], store: Store | None) -> int:
    from dsh_kernel.store.db import DatabaseBusy

    try:
        action()
    except DatabaseBusy as exc:
        assert store is not None
        pid = re.search(r"PID (\d+)", exc.message)
        holder = f"another process (PID {pid.group(1)})" if pid else "another process"
        print(
            f"error: the store's database {store.db_path} is locked by {holder}: close what holds "
            "it (a DuckDB shell, a duckdb.connect in a notebook) or wait until its kernel is idle, "
            "then run this again",
            file=sys.stderr,
        )
        return 1
    except DshError as exc:
        print(f"error: {exc.message}", file=sys.stderr)
        return 1
    return 0


def _export(store: Store, out: Path, *, since: date | None, force: bool) -> None:
    from dsh_kernel.errors import UsageError
    from dsh_kernel.store.db import DatabaseBusy
    from dsh_kernel.store.ingest.incremental import ingest
    from dsh_kernel.store.report import session_count
    from dsh_kernel.store.sessions import EXPORT_FILES, export_parquet

    if not store.journals_dir.is_dir():
        raise UsageError(
            f"no session store at {store.root} (it has no journals/ folder): give --store PATH, "
            "or set DSH_STORE"
        )
    report = ingest(store, timeout_s=BUSY_TIMEOUT_S)
    if report.status == "deferred":
        raise DatabaseBusy(report.notice or f"{store.db_path} is locked")
    written = export_parquet(store, out, force=force, since=since, timeout_s=BUSY_TIMEOUT_S)
    n = session_count(written)
    which = "" if since is None else f" active since {since.isoformat()}"
    files = f"{', '.join(EXPORT_FILES[:-1])} and {EXPORT_FILES[-1]}"
    print(
        f"exported {n} session{'s' * (n != 1)}{which} from {store.root} to {written} "
        f"(events/ partitioned by date and session; {files} as Parquet files beside it)"
    )


def _report(dirs: list[Path], out: Path | None, fmt: Format, *, force: bool) -> None:
    from dsh_kernel.store.report import course_report, read_sources
    from dsh_kernel.store.report.render import render
    from dsh_kernel.store.sessions import write_export

    found = read_sources(dirs)
    report = course_report(found.exports, notebooks=found.notebooks)
    for note in report.notes:
        print(note, file=sys.stderr)
    text = render(report, fmt)
    if out is None:
        sys.stdout.write(text)
        return
    written = write_export(out, text, force=force)
    print(f"wrote the report to {written}")


def _store_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--store",
        metavar="PATH",
        type=Path,
        help="the store (default: DSH_STORE, else ~/.local/share/dsh-kernel)",
    )


def _since_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--since",
        metavar="YYYY-MM-DD",
        type=_day,
        help="only sessions active on or after this UTC day",
    )


def _dsn_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "dsn",
        metavar="DSN",
        nargs="?",
        help="the shared store: a postgresql:// URL, libpq keywords or a service name "
        "(default: DSH_SHARED_STORE)",
    )


def _store(args: argparse.Namespace) -> Store:
    from dsh_kernel.store.layout import Store

    return Store.at(args.store) if args.store is not None else Store.default()


def _target(args: argparse.Namespace, given_name: str) -> tuple[str, str]:
    """``(target, where it came from)``: the positional DSN, else ``DSH_SHARED_STORE``."""
    import os

    from dsh_kernel.errors import UsageError

    if args.dsn is not None and args.dsn.strip():
        return args.dsn.strip(), given_name
    env = os.environ.get("DSH_SHARED_STORE", "").strip()
    if env:
        return env, "DSH_SHARED_STORE"
    raise UsageError(
        "no shared store: give its DSN (a postgresql:// URL, libpq keywords or a service name), "
        "or set DSH_SHARED_STORE (docs/shared-store.md)"
    )


def ship_arguments(p: argparse.ArgumentParser) -> None:
    """The ``ship`` subcommand's arguments."""
    _dsn_arg(p)
    _store_arg(p)


def mirror_arguments(p: argparse.ArgumentParser) -> None:
    """The ``mirror`` subcommand's arguments."""
    _dsn_arg(p)
    _store_arg(p)
    _since_arg(p)


def ship_command(args: argparse.Namespace) -> int:
    """``ship``: catch the shared store up with a store's journals
    (``store.shared.catchup.ship_store``). Exits 1 when a journal was skipped (each is named on
    stderr), the others shipped all the same."""
    store = _store(args)

    def action() -> None:
        from dsh_kernel.errors import UsageError
        from dsh_kernel.store.shared.catchup import ship_store
        from dsh_kernel.store.shared.connection import describe_target

        target, name = _target(args, "the ship command's DSN")
        if not store.journals_dir.is_dir():
            raise UsageError(
                f"no session store at {store.root}: give --store PATH, or set DSH_STORE"
            )
        done = ship_store(store, target, name=name)
        for why in done.skipped:
            print(f"skipped {why}", file=sys.stderr)
        print(
            f"shipped {done.events} new events of {done.journals} journals from {store.root} to "
            f"{describe_target(target)}"
        )
        skipped.extend(done.skipped)

    skipped: list[str] = []
    status = _run(action, store)
    # A journal left behind is a failure a script must see (a cron job, the course's hub hook).
    return 1 if status == 0 and skipped else status


def mirror_command(args: argparse.Namespace) -> int:
    """``mirror``: pull the shared sessions into a local store and ingest it
    (``store.shared.catchup.mirror_store``)."""
    store = _store(args)

    def action() -> None:
        from dsh_kernel.store.db import DatabaseBusy
        from dsh_kernel.store.ingest.incremental import ingest
        from dsh_kernel.store.shared.catchup import mirror_store
        from dsh_kernel.store.shared.connection import describe_target

        target, name = _target(args, "the mirror's DSN")
        done = mirror_store(target, store, args.since, name=name)
        for why in done.skipped:
            print(f"skipped {why}", file=sys.stderr)
        report = ingest(store, timeout_s=BUSY_TIMEOUT_S)
        if report.status == "deferred":
            raise DatabaseBusy(report.notice or f"{store.db_path} is locked")
        print(
            f"mirrored {done.events} new events of {done.sessions} sessions from "
            f"{describe_target(target)} into {store.root} (ingested)"
        )

    return _run(action, store)
