"""A real PostgreSQL server for the shared-store tests, on a Unix socket in a private directory.

``PgServer.create()`` runs ``initdb`` (trust authentication, one superuser ``dsh``) and ``start()``
starts ``postgres`` listening on no TCP port, only on a socket in its own directory, so the tests
talk to nothing but a local socket. ``stop()`` ends the server by its PID (a fast shutdown,
SIGINT) and waits for it; ``start()`` again reuses the same data directory (a restart).

Binaries: Debian's ``postgresql`` package (``/usr/lib/postgresql/<major>/bin``, the newest), else
``postgres`` on ``PATH``. ``.ci/run`` installs the package. initdb and postgres refuse to run as
root, and CI runs as root: then both run as ``nobody`` (``subprocess``'s ``user=``/``group=``, no
extra groups), and the directory is handed to that user. Without binaries, ``find_bindir()`` is
``None``; the fixture then skips the tests, except under ``CI`` where it fails (a green CI must
never hide a missing install step).
"""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

SUPERUSER = "dsh"
DATABASE = "postgres"


def find_bindir() -> Path | None:
    """The directory of ``initdb`` and ``postgres``, or ``None``."""
    found = sorted(
        glob.glob("/usr/lib/postgresql/*/bin/postgres"),
        key=lambda p: (
            int(Path(p).parent.parent.name) if Path(p).parent.parent.name.isdigit() else 0
        ),
    )
    if found:
        return Path(found[-1]).parent
    on_path = shutil.which("postgres")
    return Path(on_path).parent if on_path and shutil.which("initdb") else None


def _as_user() -> dict[str, object]:
    if os.geteuid() != 0:
        return {}
    nobody = pwd.getpwnam("nobody")
    return {"user": nobody.pw_uid, "group": nobody.pw_gid, "extra_groups": []}


class PgServer:
    """One server: a data directory and, while running, a postmaster process."""

    def __init__(self, bindir: Path, root: Path) -> None:
        self.bindir = bindir
        self.root = root
        self.data = root / "data"
        self.socket_dir = root / "socket"
        self.log = root / "postgres.log"
        self.proc: subprocess.Popen[bytes] | None = None

    @classmethod
    def create(cls, bindir: Path) -> PgServer:
        # A short path: a Unix socket's path must fit in ~100 bytes.
        root = Path(tempfile.mkdtemp(prefix="dshpg-", dir="/tmp"))
        server = cls(bindir, root)
        server.socket_dir.mkdir()
        creds = _as_user()
        if creds:
            for p in (root, server.socket_dir):
                os.chown(p, int(creds["user"]), int(creds["group"]))  # type: ignore[call-overload]
        subprocess.run(
            [
                str(bindir / "initdb"),
                "-D",
                str(server.data),
                "-U",
                SUPERUSER,
                "--auth=trust",
                "--no-sync",
                "-E",
                "UTF8",
                "--locale=C",
            ],
            check=True,
            capture_output=True,
            cwd=root,
            **creds,  # type: ignore[arg-type]
        )
        return server

    @property
    def conninfo(self) -> str:
        """A libpq connection string for the superuser."""
        return self.conninfo_for(SUPERUSER)

    def conninfo_for(self, user: str) -> str:
        """A libpq connection string for ``user`` (trust authentication: no password)."""
        return f"host={self.socket_dir} dbname={DATABASE} user={user}"

    def start(self) -> None:
        """Start the server and wait until it accepts connections (at most 30 s)."""
        assert self.proc is None, "already running"
        with open(self.log, "ab") as log:
            self.proc = subprocess.Popen(
                [
                    str(self.bindir / "postgres"),
                    "-D",
                    str(self.data),
                    "-k",
                    str(self.socket_dir),
                    "-c",
                    "listen_addresses=",
                    "-c",
                    "fsync=off",
                    "-c",
                    "synchronous_commit=off",
                    "-c",
                    "full_page_writes=off",
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=self.root,
                **_as_user(),  # type: ignore[arg-type]
            )
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(
                    f"postgres exited: {self.log.read_text(errors='replace')[-2000:]}"
                )
            if self._ready():
                return
            time.sleep(0.05)
        raise RuntimeError("postgres did not start within 30 s")

    def _ready(self) -> bool:
        pg_isready = self.bindir / "pg_isready"
        result = subprocess.run(
            [str(pg_isready), "-q", "-h", str(self.socket_dir), "-U", SUPERUSER, "-d", DATABASE],
            check=False,
        )
        return result.returncode == 0

    def stop(self) -> None:
        """Fast shutdown by PID (SIGINT: running transactions are rolled back), then wait."""
        proc, self.proc = self.proc, None
        if proc is None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.kill(proc.pid, signal.SIGINT)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait()

    def remove(self) -> None:
        """Stop, then delete the data directory."""
        self.stop()
        shutil.rmtree(self.root, ignore_errors=True)
