"""The public API, pinned: the names users build on stay exactly as they are.

A change here is a change of contract: it must be deliberate, in the CHANGELOG, and this test edited
with it. What is pinned: the package's exports (``Agent``, ``tool``, ``api_key``), the public fakes
of ``dsh_kernel.testing``, the store's exports with ``set_price`` and ``import_journal`` and their
signatures, ``Agent``'s constructor, the ``SessionEvent`` fields, the kernelspec names, the
``%agent`` subcommands (the SQL views are pinned by ``docs/store-schema.md``'s staleness test).
"""

from __future__ import annotations

import dataclasses
import inspect

import dsh_kernel
import dsh_kernel.store
import dsh_kernel.testing
from dsh_kernel.kernel.kernelspec import KERNELS
from dsh_kernel.kernel.magics import subcommands
from dsh_kernel.session.events import SessionEvent
from dsh_kernel.store.importing import import_journal


def _params(fn: object) -> list[str]:
    return list(inspect.signature(fn).parameters)  # type: ignore[arg-type]


def test_the_package_exports() -> None:
    assert sorted(dsh_kernel.__all__) == ["Agent", "__version__", "api_key", "tool"]
    for name in dsh_kernel.__all__:
        assert getattr(dsh_kernel, name) is not None


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
    assert _params(import_journal) == ["path", "store"]


def test_the_session_event_fields() -> None:
    fields = [f.name for f in dataclasses.fields(SessionEvent)]
    assert fields == ["type", "seq", "time", "data", "ignorable", "surface_op", "source_event_seqs"]


def test_the_kernelspec_names() -> None:
    assert sorted(KERNELS) == ["dsh", "dsh-python"]
    assert KERNELS["dsh"][0] == "DSH Agent" and KERNELS["dsh-python"][0] == "DSH Python"


def test_the_agent_subcommands() -> None:
    assert subcommands() == [
        "approve",
        "compact",
        "context",
        "cost",
        "export",
        "fork",
        "help",
        "key",
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
