"""``DSH_COMPACTION`` and ``c.DshKernel.compaction``: read one way, refused with one clear line; the
``%agent compact`` cell the kernel awaits itself, and the host handing the setting to each agent."""

from __future__ import annotations

from pathlib import Path

import pytest

from dsh_kernel.errors import UsageError
from dsh_kernel.kernel.host.agent_host import AgentHost
from dsh_kernel.kernel.host.settings import HostSettings, parse_compaction, settings_from_env
from dsh_kernel.kernel.magic.compact import compact_command, compaction_text, is_compact_cell
from dsh_kernel.llm.keys import KeyStore


@pytest.mark.parametrize(
    ("raw", "auto"), [("on", True), (" OFF ", False), ("true", True), ("0", False)]
)
def test_the_switch_is_on_or_off(raw: str, auto: bool) -> None:
    assert parse_compaction(raw) is auto


@pytest.mark.parametrize("raw", ["maybe", "auto", "", "2"])
def test_anything_else_is_refused_naming_where_it_came_from(raw: str) -> None:
    with pytest.raises(UsageError) as info:
        parse_compaction(raw, "DSH_COMPACTION=")
    message = info.value.message
    assert message.startswith(f"DSH_COMPACTION={raw!r} is not a compaction setting: use on")
    assert "off" in message and "\n" not in message


def test_the_environment_overrides_the_traitlet(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("DSH_COMPACTION", raising=False)
    assert settings_from_env(HostSettings()).compaction is True
    assert settings_from_env(HostSettings(compaction=False)).compaction is False
    monkeypatch.setenv("DSH_COMPACTION", "on")
    assert settings_from_env(HostSettings(compaction=False)).compaction is True
    monkeypatch.setenv("DSH_COMPACTION", "off")
    assert settings_from_env(HostSettings(compaction=True)).compaction is False
    monkeypatch.setenv("DSH_COMPACTION", "sometimes")
    with pytest.raises(UsageError, match="DSH_COMPACTION='sometimes'"):
        settings_from_env(HostSettings())


@pytest.mark.parametrize(
    ("code", "routed"),
    [
        ("%agent compact", True),
        ("  %agent   compact  \n", True),
        ("# make room\n%agent compact\n", True),
        ("%agent compact on", False),
        ("%agent compact\n%agent status", False),
        ("%agent compactly", False),
        ("x = 1\n%agent compact", False),
    ],
)
def test_the_kernel_awaits_a_cell_that_is_exactly_agent_compact(code: str, routed: bool) -> None:
    assert is_compact_cell(code) is routed


def test_every_agent_of_the_host_gets_the_setting(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv("DSH_COMPACTION", raising=False)
    host = AgentHost(
        HostSettings(provider="offline", store=str(tmp_path), compaction=False),
        namespace={},
        keys=KeyStore(),
    )
    assert host.agent.compaction.auto is False
    assert compaction_text(host).startswith("off (`%agent compact` compacts by hand")
    assert compact_command(host, ["on"]).startswith("compaction: on, at 80% of the 32,768-token")
    assert host.new_session().compaction.auto is True  # %agent new keeps it
    compact_command(host, ["OFF"])
    assert host.new_session().compaction.auto is False
    for bad in (["maybe"], ["on", "now"]):
        with pytest.raises(UsageError, match=r"^usage: %agent compact"):
            compact_command(host, bad)
    with pytest.raises(UsageError, match="a cell of its own"):
        compact_command(host, [])
