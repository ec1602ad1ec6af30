"""The live tier (``make test-local``): real kernels against a real llama-cpp-python server.

Nothing here is faked: the model server is ``python -m llama_cpp.server`` from the cache venv
(``tests/local/models.py``), serving SmolLM2-135M-Instruct or Qwen2.5-Coder-0.5B-Instruct on
127.0.0.1 with one thread and ``n_ctx`` 4096 (``tests/local/server.py``); each test gets its own server, stopped by
its PID after the test. Sampling is pinned: every kernel sends ``temperature`` 0 and a fixed
``seed`` with each request (``DSH_TEMPERATURE``, ``DSH_SEED``), and the server runs one thread, so
the same requests get the same answers. Each test gets a fresh ``dsh`` kernel
(``tests/support/kernel.py``) with ``DSH_PROVIDER=openai-compatible``, ``DSH_BASE_URL`` at that
server, ``DSH_APPROVAL=auto``, the pinned sampling and a private ``DSH_STORE``.

Deselected by default (``-m 'not local'`` in the project's pytest options); ``make test-local``
installs the cache and runs ``pytest -m local tests/local``. A missing cache fails the tests with
the command that installs it.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import pytest

from tests.local.models import CacheError, CachePaths, cache_paths
from tests.local.server import LlamaServer
from tests.support.kernel import Kernel, start_kernel

KernelFactory = Callable[..., AbstractContextManager[Kernel]]


@pytest.fixture(scope="session")
def cache() -> CachePaths:
    try:
        return cache_paths()
    except CacheError as e:
        pytest.fail(str(e), pytrace=False)


def _serve(cache: CachePaths, model: str, tmp: pytest.TempPathFactory) -> Iterator[LlamaServer]:
    log = tmp.mktemp(f"llama-{model}") / "server.log"
    with LlamaServer(cache, model, log=log) as server:
        yield server


@pytest.fixture
def smollm(cache: CachePaths, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LlamaServer]:
    yield from _serve(cache, "smollm2", tmp_path_factory)


@pytest.fixture
def qwen(cache: CachePaths, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LlamaServer]:
    yield from _serve(cache, "qwen", tmp_path_factory)


SEED = 1234
"""The sampling seed every live kernel sends (with temperature 0)."""


@pytest.fixture
def kernel_at(tmp_path: Path) -> KernelFactory:
    """``with kernel_at(server, **env) as k:`` a fresh ``dsh`` kernel talking to ``server``."""

    def start(server: LlamaServer, **extra: str) -> AbstractContextManager[Kernel]:
        env = {
            "DSH_PROVIDER": "openai-compatible",
            "DSH_BASE_URL": server.base_url,
            "DSH_MODEL": server.model,
            "DSH_APPROVAL": "auto",
            "DSH_TEMPERATURE": "0",
            "DSH_SEED": str(SEED),
            **extra,
        }
        return start_kernel(tmp_path / "kernel", "dsh", env=env, store=tmp_path / "store")

    return start


def sql(k: Kernel, query: str) -> list[dict[str, Any]]:
    """Rows of a ``%%sql`` cell, read back from the ``_sql`` DataFrame it leaves in the namespace."""
    ex = k.execute("%%sql\n" + query)
    assert ex.status == "ok", ex.content
    return json.loads(k.python("print(_sql.to_json(orient='records'))"))


def answer(ex: Any) -> str:
    """The finished turn's Markdown (the last ``text/markdown`` the cell displayed)."""
    shown = ex.data("text/markdown")
    return str(shown[-1]) if shown else ""


TEMPLATE_PROBE_POSTS = 2
"""The chat requests a fresh kernel's first request to a llama-cpp-python server brings with it: the
token calibration's template probe (``dsh_kernel.llm.providers.tokenizer``: two one-token answers,
once per server and model, not in the session's log)."""


def chat_posts(server: LlamaServer) -> int:
    """How many chat-completion requests the server has logged so far (its access log)."""
    text = server.log.read_text(encoding="utf-8", errors="replace")
    return text.count('"POST /v1/chat/completions HTTP/1.1"')
