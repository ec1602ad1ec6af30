"""``jupyter console --kernel dsh`` in a pseudo-terminal, with the offline demo model: a chat message
shows its answer, its tool call's outcome and the footer as text; an approval that needs a click is
refused at once and says how to allow; ``exit`` leaves."""

from __future__ import annotations

import os
import re
import sys
import time
from pathlib import Path

import pytest

from tests.support.kernel import kernelspecs

pexpect = pytest.importorskip("pexpect")
pytest.importorskip("jupyter_console")

PROMPT = r"In \[(\d+)\]: "


def console_env(tmp: Path) -> dict[str, str]:
    """The kernel's environment as ``start_kernel`` makes it (no keys, a private store), offline."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.endswith(("_API_KEY", "_BASE_URL")) and not k.startswith("DSH_")
    }
    env.update(
        {
            "JUPYTER_PATH": str(kernelspecs(tmp)),
            "JUPYTER_CONFIG_DIR": str(tmp / "config"),
            "JUPYTER_RUNTIME_DIR": str(tmp / "runtime"),
            "IPYTHONDIR": str(tmp / "ipython"),
            "MPLCONFIGDIR": str(tmp / "mpl"),
            "DSH_STORE": str(tmp / "store"),
            "DSH_PROVIDER": "offline",
            "TERM": "dumb",
        }
    )
    return env


def test_a_console_session_shows_the_turn_as_text_and_exit_leaves(tmp_path: Path) -> None:
    child = pexpect.spawn(
        sys.executable,
        ["-m", "jupyter_console", "--kernel", "dsh", "--simple-prompt"],
        env=console_env(tmp_path),
        cwd=str(tmp_path),
        encoding="utf-8",
        timeout=90,
        dimensions=(50, 200),
    )
    transcript = (tmp_path / "console.log").open("w", encoding="utf-8")
    child.logfile_read = transcript
    try:
        child.expect(PROMPT)

        # Approval is on ("ask"): no one can click in a terminal, so the call is refused at once.
        started = time.monotonic()
        child.sendline("Please look around my namespace.")
        child.expect(PROMPT)
        refused = child.before
        assert time.monotonic() - started < 30
        assert "▸ python: list variables" in refused
        assert re.search(r"✗ python denied: .*`%agent approve auto`", refused), refused
        assert "— offline:offline-demo" in refused

        child.sendline("%agent approve auto")
        child.expect(PROMPT)

        child.sendline("Please look around my namespace again.")
        child.expect(PROMPT)
        turn = child.before
        assert "VBox(" not in turn and "<style" not in turn  # no widget's repr
        assert "I am the **offline demo model" in turn  # the answer, as Markdown text
        assert "▸ python: list variables" in turn
        assert re.search(r"✓ python: done in [\d.]+ m?s", turn), turn
        assert "The tool answered:" in turn  # the answer goes on after the call
        footer = [ln for ln in turn.splitlines() if ln.startswith("— ")]
        assert len(footer) == 1, footer
        assert "offline:offline-demo" in footer[0] and "session " in footer[0]
        assert turn.rstrip().splitlines()[-1].startswith("— ")  # the footer is the last line

        child.sendline("exit")
        child.expect(pexpect.EOF, timeout=60)
    finally:
        child.close(force=True)
        transcript.close()
    assert child.exitstatus == 0, (child.exitstatus, child.signalstatus)
