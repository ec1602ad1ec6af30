"""The public API, pinned: the names users build on stay exactly as they are.

A change here is a change of contract: it must be deliberate, in the CHANGELOG, and this test edited
with it. What is pinned: the package's exports (``__all__``, exactly its public names; the README
and docs import only from the root, ``dsh_kernel.testing`` and ``dsh_kernel.store``), the public fakes
of ``dsh_kernel.testing``, the store's exports with ``set_price`` and ``import_journal`` and their
signatures, ``Agent``'s constructor, the ``SessionEvent`` fields, the kernelspec names and their
command line, the ``dsh-kernel`` subcommands, the ``%agent`` subcommands (the SQL views are pinned by ``docs/store-schema.md``'s staleness test).
"""

from __future__ import annotations

import argparse
import dataclasses
import inspect
import json
import re
from pathlib import Path
from types import ModuleType

import pytest

import dsh_kernel
import dsh_kernel.store
import dsh_kernel.testing
from dsh_kernel.kernel.kernelspec import KERNELS, spec
from dsh_kernel.kernel.magic.agent import subcommands
from dsh_kernel.session.events import SessionEvent

ROOT = Path(__file__).resolve().parents[2]


def _params(fn: object) -> list[str]:
    return list(inspect.signature(fn).parameters)  # type: ignore[arg-type]


EXPORTS = [
    "Agent",
    "ApprovalPolicy",
    "Session",
    "SessionEvent",
    "ToolDefinition",
    "__version__",
    "api_key",
    "config_from_env",
    "make_provider",
    "tool",
]


def test_the_package_exports_its_public_names_and_nothing_else() -> None:
    # httpx's way: ``__all__`` is exactly the namespace's public names, sorted (submodules that an
    # import has bound as attributes aside).
    public = sorted(
        name
        for name in dir(dsh_kernel)
        if (not name.startswith("_") or name == "__version__")
        and not isinstance(getattr(dsh_kernel, name), ModuleType)
    )
    assert dsh_kernel.__all__ == public
    assert dsh_kernel.__all__ == EXPORTS
    doc = (ROOT / "docs" / "python.md").read_text(encoding="utf-8")
    assert [n for n in EXPORTS if f"`{n}`" not in doc] == ["__version__"]  # each one told


def test_each_export_is_the_object_its_home_defines() -> None:
    from dsh_kernel import tools
    from dsh_kernel.llm import config
    from dsh_kernel.session.log import Session

    assert dsh_kernel.tool is tools.tool
    assert dsh_kernel.ToolDefinition is tools.ToolDefinition
    assert dsh_kernel.ApprovalPolicy is tools.ApprovalPolicy
    assert dsh_kernel.make_provider is config.make_provider
    assert dsh_kernel.config_from_env is config.config_from_env
    assert dsh_kernel.api_key is config.api_key
    assert dsh_kernel.Session is Session and dsh_kernel.SessionEvent is SessionEvent
    assert isinstance(dsh_kernel.Agent, type) and dsh_kernel.__version__
    with pytest.raises(AttributeError, match="has no attribute 'Agnet'"):
        _ = dsh_kernel.Agnet


@pytest.mark.parametrize(
    "doc", ["README.md", *(f"docs/{p.name}" for p in sorted((ROOT / "docs").glob("*.md")))]
)
def test_the_docs_import_only_from_the_public_surface(doc: str) -> None:
    # What a reader is told to import: the package root, its public fakes, the store's API.
    text = (ROOT / doc).read_text(encoding="utf-8")
    found = re.findall(r"^\s*from (dsh_kernel[\w.]*) import", text, flags=re.M)
    assert set(found) <= {"dsh_kernel", "dsh_kernel.testing", "dsh_kernel.store"}, found


def test_the_public_fakes() -> None:
    assert sorted(dsh_kernel.testing.__all__) == [
        "DEFAULT_HANG_PREFIX",
        "FakeClock",
        "FunctionProvider",
        "Hang",
        "RaiseAfter",
        "ResponseFn",
        "ScriptEntry",
        "ScriptedProvider",
        "error_response",
        "hang",
        "max_tokens_response",
        "new_call_id",
        "raise_after",
        "text_response",
        "tool_call_response",
        "tool_calls_response",
    ]


def test_the_agent_constructor() -> None:
    params = inspect.signature(dsh_kernel.Agent).parameters
    assert list(params)[:1] == ["provider"]
    assert {
        "model",
        "tools",
        "system",
        "session",
        "reasoning_effort",
        "temperature",
        "seed",
        "max_tokens",
        "retry_policy",
        "approval_policy",
        "answerer",
    } <= set(params)
    assert all(p.kind is p.KEYWORD_ONLY for p in params.values())


def test_the_store_api() -> None:
    assert {
        "Store",
        "set_price",
        "ingest",
        "list_sessions",
        "load_session",
        "resume",
        "fork",
        "import_journal",
        "export_parquet",
        "export_markdown",
        "ReplayProvider",
    } <= set(dsh_kernel.store.__all__)
    assert _params(dsh_kernel.store.set_price) == [
        "store",
        "provider",
        "model",
        "input_per_mtok",
        "output_per_mtok",
        "cached_input_per_mtok",
        "cache_write_per_mtok",
        "timeout_s",
    ]
    assert _params(dsh_kernel.store.import_journal) == ["path", "store"]


def test_the_session_event_fields() -> None:
    fields = [f.name for f in dataclasses.fields(SessionEvent)]
    assert fields == ["type", "seq", "time", "data", "ignorable", "surface_op", "source_event_seqs"]


def test_the_kernelspec_names() -> None:
    assert sorted(KERNELS) == ["dsh", "dsh-python"]
    assert KERNELS["dsh"][0] == "DSH Agent" and KERNELS["dsh-python"][0] == "DSH Python"


def test_the_command_line_subcommands() -> None:
    from dsh_kernel.__main__ import parser

    top = parser("dsh-kernel")
    (commands,) = [a for a in top._actions if isinstance(a, argparse._SubParsersAction)]
    assert list(commands.choices) == [
        "kernel",
        "install",
        "export",
        "report",
        "ship",
        "mirror",
        "strip",
        "help",
    ]
    assert spec("dsh", "python")["argv"] == [
        "python",
        "-m",
        "dsh_kernel",
        "kernel",
        "-f",
        "{connection_file}",
    ]
    # the kernelspecs pip installs are the ones `install` writes
    for name in KERNELS:
        shipped = json.loads((ROOT / "jupyter-config/kernels" / name / "kernel.json").read_text())
        assert shipped == spec(name, "python"), name


def test_the_agent_subcommands() -> None:
    assert subcommands() == [
        "approve",
        "compact",
        "context",
        "cost",
        "export",
        "fork",
        "help",
        "history",
        "key",
        "mcp",
        "model",
        "new",
        "provider",
        "reasoning",
        "replay",
        "resume",
        "search",
        "sessions",
        "status",
        "title",
        "tools",
    ]
