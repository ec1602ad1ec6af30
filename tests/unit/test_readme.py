"""The plain-Python example (docs/python.md, linked from the README) runs as written and prints what
it says; the README's test command is the one CI runs."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

README = Path(__file__).resolve().parents[2] / "README.md"
PYTHON_DOC = README.parent / "docs" / "python.md"


def test_python_doc_example_runs() -> None:
    assert "](docs/python.md)" in README.read_text(encoding="utf-8")
    text = PYTHON_DOC.read_text(encoding="utf-8")
    blocks = re.findall(r"```python\n(.*?)```", text, flags=re.S)
    assert blocks, "docs/python.md has no python example"
    out = subprocess.run(
        [sys.executable, "-c", blocks[0]], capture_output=True, text=True, timeout=60, check=False
    )
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0] == "2 + 3 = 5"
    assert "turn/start" in lines[1]
    assert lines[2] == "5"  # the @tool function is still the function


def test_readme_test_command_is_what_ci_runs() -> None:
    ci = (README.parent / ".ci" / "run").read_text(encoding="utf-8")
    assert "make test" in README.read_text(encoding="utf-8")
    assert "\nmake test\n" in ci
