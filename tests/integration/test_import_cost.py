"""What an import or a command line costs, in a fresh interpreter: the package's exports load on first
use, and building the ``dsh-kernel`` command line loads neither DuckDB nor the agent, so a submodule
(a schema generator, a store command), ``--help`` and the kernel's start pay only for what they use."""

from __future__ import annotations

import ast
import subprocess
import sys

HEAVY = ("dsh_kernel.agent", "dsh_kernel.llm.config", "httpx", "duckdb", "ipykernel", "pandas")


def loaded_after(code: str) -> list[str]:
    probe = f"{code}\nimport sys\nprint(sorted(m for m in {HEAVY!r} if m in sys.modules))"
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, check=True
    )
    return ast.literal_eval(done.stdout.strip())


def test_importing_a_submodule_loads_no_export() -> None:
    assert loaded_after("import dsh_kernel.llm.types, dsh_kernel.session.events") == []


def test_building_the_command_line_loads_no_store_and_no_agent() -> None:
    assert loaded_after("from dsh_kernel.__main__ import parser\nparser()") == []


def test_an_export_loads_its_home_and_no_more() -> None:
    assert loaded_after("from dsh_kernel import tool") == []
    assert "dsh_kernel.agent" in loaded_after("from dsh_kernel import Agent")
