"""Real kernels shipping into one real PostgreSQL server (``DSH_SHARED_STORE``), the model played
by the offline demo provider: two students' kernels chat and the server holds both journals exactly;
a kernel whose server is away chats on, says how far behind it is, and ``python -m dsh_kernel ship``
catches up; a password inside the URL is refused with one line and is never written anywhere."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from tests.support.kernel import Kernel, start_kernel
from tests.support.shared_db import SharedDb

GUARD_S = 60  # only against a hang


def _env(target: str, user: str) -> dict[str, str]:
    return {
        "DSH_PROVIDER": "offline",
        "DSH_HEADLESS_APPROVAL_TIMEOUT": "0.1",
        "JUPYTERHUB_USER": user,
        "DSH_SHARED_STORE": target,
    }


def _journal(store: Path) -> dict[int, str]:
    (path,) = list((store / "journals").rglob("*.jsonl"))
    lines = path.read_text(encoding="utf-8").splitlines()[1:]
    import json

    return {json.loads(line)["seq"]: json.loads(line)["type"] for line in lines}


def _server(db: SharedDb, user: str) -> dict[int, str]:
    rows = db.rows(
        'SELECT e.seq, e.type FROM dsh_events e JOIN dsh_sessions s USING (session_id) WHERE s."user" = %s',
        (user,),
    )
    return {int(str(seq)): str(kind) for seq, kind in rows}


def _until_shipped(db: SharedDb, user: str, store: Path) -> None:
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        if _server(db, user) == _journal(store):
            return
        time.sleep(0.1)
    assert _server(db, user) == _journal(store)


def _status(k: Kernel) -> str:
    done = k.execute("%agent status", timeout=GUARD_S)
    assert done.status == "ok", done.content
    return done.stdout + "".join(
        str(m["content"].get("data", {}).get("text/plain", ""))
        for m in done.of_type("display_data") + done.of_type("execute_result")
    )


def _status_until(k: Kernel, needle: str) -> str:
    """``%agent status`` once it says ``needle`` (the last one read, after ``GUARD_S``)."""
    deadline = time.monotonic() + GUARD_S
    status = _status(k)
    while needle not in status and time.monotonic() < deadline:
        time.sleep(0.2)
        status = _status(k)
    return status


def test_two_kernels_chat_into_one_server(shared_db: SharedDb, tmp_path: Path) -> None:
    with (
        start_kernel(tmp_path / "a", env=_env(shared_db.target, "alice")) as a,
        start_kernel(tmp_path / "b", env=_env(shared_db.target, "bob")) as b,
    ):
        for k in (a, b):
            assert k.execute("Hello! What can you do?", timeout=GUARD_S).status == "ok"
        assert a.execute("And what is 2 + 2?", timeout=GUARD_S).status == "ok"
        _until_shipped(shared_db, "alice", tmp_path / "a" / "store")
        _until_shipped(shared_db, "bob", tmp_path / "b" / "store")
        assert "events shipped" in _status(a) and "up to date" in _status(a)
    sessions = shared_db.rows('SELECT "user", events FROM dsh_sessions ORDER BY 1')
    assert [u for u, _ in sessions] == ["alice", "bob"]
    turns = shared_db.rows(
        'SELECT s."user", count(*) FROM dsh_events e JOIN dsh_sessions s USING (session_id) '
        "WHERE e.type = 'turn/end' GROUP BY 1 ORDER BY 1"
    )
    assert turns == [("alice", 2), ("bob", 1)]


def test_a_server_that_is_away_blocks_nothing_and_ship_catches_up(
    shared_db: SharedDb, tmp_path: Path
) -> None:
    away = f"host={tmp_path / 'no-server'} dbname={shared_db.name} user=dsh"
    (tmp_path / "no-server").mkdir()
    store = tmp_path / "k" / "store"
    with start_kernel(tmp_path / "k", env=_env(away, "carol")) as k:
        started = time.monotonic()
        assert k.execute("Hello! What can you do?", timeout=GUARD_S).status == "ok"
        assert time.monotonic() - started < 10
        status = _status_until(k, "unreachable")  # once the shipper has tried
        assert "events behind" in status and "unreachable" in status, status
        assert "nothing is lost" in status
    env = {k: v for k, v in os.environ.items() if not k.startswith("DSH_")}
    env["DSH_SHARED_STORE"] = shared_db.target
    done = subprocess.run(
        [sys.executable, "-m", "dsh_kernel", "ship", "--store", str(store)],
        capture_output=True,
        text=True,
        timeout=GUARD_S,
        env=env,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"shipped {len(_journal(store))} new events of 1 journals")
    assert _server(shared_db, "carol") == _journal(store)


def test_a_password_in_the_url_is_refused_with_one_line(
    shared_db: SharedDb, tmp_path: Path
) -> None:
    secret = "s3cret-Pa55word-xyz"
    url = f"postgresql://dsh:{secret}@localhost/{shared_db.name}"
    with start_kernel(tmp_path / "k", env=_env(url, "dave")) as k:
        assert k.execute("Hello! What can you do?", timeout=GUARD_S).status == "ok"
        status = _status(k)
        shared = [line for line in status.splitlines() if line.startswith("shared:")]
        assert shared == [
            "shared:   off: DSH_SHARED_STORE holds a password: remove it from the URL and give it "
            "the libpq way (a service file, PGPASSFILE or ~/.pgpass, or PGPASSWORD)"
        ]
        assert secret not in status
        # the kernel's redactor (logs, journal, model-bound text) learned the password
        seen = k.python(
            "import os\nfrom dsh_kernel.llm.secrets import REDACTOR\n"
            "print(REDACTOR.redact(os.environ['DSH_SHARED_STORE']))"
        )
        assert secret not in seen and seen.startswith("postgresql://dsh:")
    assert "holds a password" in (tmp_path / "k" / "kernel.log").read_text()
    for path in tmp_path.rglob("*"):
        if path.is_file():
            assert secret.encode() not in path.read_bytes(), path
    assert shared_db.rows("SELECT to_regclass('dsh_events')") == [(None,)]


def test_a_malformed_target_is_one_line_and_the_kernel_runs_on(tmp_path: Path) -> None:
    with start_kernel(tmp_path / "k", env=_env("postgresql://[::1", "erin")) as k:
        assert k.execute("Hello! What can you do?", timeout=GUARD_S).status == "ok"
        shared = [line for line in _status(k).splitlines() if line.startswith("shared:")]
        assert shared == [
            "shared:   off: DSH_SHARED_STORE is not a valid postgresql:// URL (Invalid IPv6 URL); "
            "check the host part (an IPv6 address is written [::1])"
        ]
    for stray in ("postgresql://[::1", "postgresql://host]/db"):
        for argv in (["ship", "--store", str(tmp_path / "k" / "store")], ["mirror", stray]):
            env = {**os.environ, "DSH_SHARED_STORE": stray, "DSH_STORE": str(tmp_path / "m")}
            done = subprocess.run(
                [sys.executable, "-m", "dsh_kernel", *argv],
                capture_output=True,
                text=True,
                env=env,
                timeout=GUARD_S,
                check=False,
                stdin=subprocess.DEVNULL,
            )
            assert done.returncode != 0
            assert "Traceback" not in done.stderr, done.stderr
            assert "not a valid postgresql:// URL" in done.stderr, done.stderr


def test_pgpassword_leaves_the_environment_and_a_short_one_is_redacted(
    shared_db: SharedDb, tmp_path: Path
) -> None:
    env = {**_env(shared_db.target_for("dsh"), "frank"), "PGPASSWORD": "bobpw"}
    with start_kernel(tmp_path / "k", env=env) as k:
        assert k.execute("Hello! my password is bobpw", timeout=GUARD_S).status == "ok"
        seen = k.python(
            "import os\nfrom dsh_kernel.llm.secrets import REDACTOR\n"
            "print('PGPASSWORD' in os.environ, REDACTOR.redact('pw=bobpw;'))"
        )
        assert seen.split() == ["False", "pw=[redacted];"]
        _until_shipped(shared_db, "frank", tmp_path / "k" / "store")
    for path in [*(tmp_path / "k" / "store").rglob("*.jsonl"), tmp_path / "k" / "kernel.log"]:
        assert b"bobpw" not in path.read_bytes(), path
    assert not any("bobpw" in str(r) for r in shared_db.rows("SELECT line FROM dsh_events"))


def test_shipping_errors_go_to_the_kernel_log_not_the_cell(tmp_path: Path) -> None:
    down = f"host={tmp_path / 'nowhere'} dbname=course"
    with start_kernel(tmp_path / "k", env=_env(down, "gina")) as k:
        chat = k.execute("Hello! What can you do?", timeout=GUARD_S)
        assert chat.status == "ok"
        time.sleep(1.5)  # the shipper's first round fails meanwhile
        status = k.execute("%agent status", timeout=GUARD_S)
        streams = "".join(
            str(m["content"].get("text", ""))
            for m in chat.of_type("stream") + status.of_type("stream")
        )
        assert "shipping to the shared store failed" not in streams
        assert streams.count("shared:") == 1, streams
    assert "shipping to the shared store failed" in (tmp_path / "k" / "kernel.log").read_text()


def test_mirror_without_the_driver_names_its_dsn(tmp_path: Path) -> None:
    code = (
        "import sys; sys.modules['psycopg'] = None\n"  # a plain install: the driver is absent
        "from dsh_kernel.__main__ import main\n"
        f"sys.exit(main(['mirror', 'host=x dbname=y', '--store', {str(tmp_path / 'm')!r}]))"
    )
    env = {k: v for k, v in os.environ.items() if k != "DSH_SHARED_STORE"}
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env=env,
        timeout=GUARD_S,
        check=False,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode != 0
    assert "the mirror's DSN is given but the PostgreSQL driver is not installed" in done.stderr
    assert "DSH_SHARED_STORE" not in done.stderr


def test_status_before_any_turn_does_not_claim_up_to_date(tmp_path: Path) -> None:
    down = f"host={tmp_path / 'nowhere'} dbname=course"
    with start_kernel(tmp_path / "k", env=_env(down, "hank")) as k:
        shared = [line for line in _status(k).splitlines() if line.startswith("shared:")]
        assert len(shared) == 1 and "up to date" not in shared[0], shared
