"""Kernel tier: real kernel subprocesses driven through ``jupyter_client``, the model played by the
loopback server (``tests/support/sse_server.py``) through the OpenAI-compatible provider.

One ``dsh`` kernel and one server are shared by the tests of this package that need them (starting
a kernel costs ~1.5 s); each test scripts the server afresh. Sharing is also a check: every test
leaves a kernel the next test must find healthy (interrupts included). Each kernel gets a private
store, IPython directory (history database) and working directory.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support.frontend import Frontend
from tests.support.kernel import Kernel, start_kernel
from tests.support.sse_server import SseServer


def provider_env(server: SseServer, tmp: Path, **extra: str) -> dict[str, str]:
    return {
        "DSH_PROVIDER": "openai-compatible",
        "DSH_BASE_URL": server.url,
        "IPYTHONDIR": str(tmp / "ipython"),
        **extra,
    }


@dataclass
class Live:
    """A running kernel, the frontend reading it, and the server playing the model."""

    kernel: Kernel
    fe: Frontend
    server: SseServer
    tmp: Path


@pytest.fixture(scope="package")
def server() -> Iterator[SseServer]:
    with SseServer() as srv:
        yield srv


@pytest.fixture(scope="package")
def agent_kernel(
    server: SseServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Kernel, Frontend, Path]]:
    tmp = tmp_path_factory.mktemp("dsh-kernel")
    with start_kernel(tmp, "dsh", env=provider_env(server, tmp)) as kernel:
        yield kernel, Frontend(kernel), tmp


@pytest.fixture
def live(agent_kernel: tuple[Kernel, Frontend, Path], server: SseServer) -> Live:
    kernel, fe, tmp = agent_kernel
    server.script()
    return Live(kernel=kernel, fe=fe, server=server, tmp=tmp)
