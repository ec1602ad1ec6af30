"""Fixtures for provider tests: one loopback scenario server and one httpx client per test."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import httpx
import pytest

from tests.support.sse_server import SseServer


@pytest.fixture
def server() -> Iterator[SseServer]:
    with SseServer() as srv:
        yield srv


@pytest.fixture
async def client() -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient() as c:
        yield c
