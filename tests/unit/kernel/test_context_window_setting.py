"""``DSH_CONTEXT_WINDOW`` and the traitlet's value: read one way, refused with one clear line."""

from __future__ import annotations

import pytest

from dsh_kernel.errors import UsageError
from dsh_kernel.kernel.host.settings import HostSettings, parse_context_window, settings_from_env


@pytest.mark.parametrize(
    ("raw", "tokens"),
    [("8192", 8192), (" 32_768 ", 32768), ("131,072", 131072), ("", None), ("default", None)],
)
def test_a_window_is_a_whole_number_of_tokens_or_default(raw: str, tokens: int | None) -> None:
    assert parse_context_window(raw) == tokens


@pytest.mark.parametrize(
    "raw", ["8k", "lots", "100", "-4096", "4096.5", "100_000_001", "9007199254740993"]
)
def test_anything_else_is_refused_naming_where_it_came_from(raw: str) -> None:
    with pytest.raises(UsageError) as info:
        parse_context_window(raw, "DSH_CONTEXT_WINDOW=")
    message = info.value.message
    assert message.startswith(f"DSH_CONTEXT_WINDOW={raw!r} is not a context window")
    assert "at least 512 and at most 100,000,000" in message and "'default'" in message


def test_the_largest_window_is_accepted() -> None:
    assert parse_context_window("100,000,000") == 100_000_000


def test_the_environment_overrides_the_traitlet(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("DSH_CONTEXT_WINDOW", raising=False)
    assert settings_from_env(HostSettings(context_window=6000)).context_window == 6000
    monkeypatch.setenv("DSH_CONTEXT_WINDOW", "12000")
    assert settings_from_env(HostSettings(context_window=6000)).context_window == 12000
    monkeypatch.setenv("DSH_CONTEXT_WINDOW", "default")
    assert settings_from_env(HostSettings(context_window=6000)).context_window is None
    monkeypatch.setenv("DSH_CONTEXT_WINDOW", "huge")
    with pytest.raises(UsageError, match="DSH_CONTEXT_WINDOW='huge'"):
        settings_from_env(HostSettings())
