"""The settings table (``kernel.configuration``): every setting read one way from its traitlet and
its variable, the environment over the traitlet, a bad value refused with one line naming where it
came from; the kernel's traitlets, ``HostSettings``, ``%agent status`` and docs/configuration.md all
generated from it; and the behaviour behind three of the settings (compaction, vision, the store)."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
from pathlib import Path

import pytest

from dsh_kernel import Agent
from dsh_kernel.errors import StoreError, UsageError
from dsh_kernel.kernel import configuration
from dsh_kernel.kernel.configuration import (
    BY_NAME,
    SETTINGS,
    environment,
    settings_from_traits,
    status_lines,
)
from dsh_kernel.kernel.host.agent_host import AgentHost
from dsh_kernel.kernel.host.settings import HostSettings
from dsh_kernel.kernel.kernel import DshKernel
from dsh_kernel.kernel.magic.agent import STATUS_ORDER, AgentMagics
from dsh_kernel.kernel.magic.compact import compact_command, compaction_text, is_compact_cell
from dsh_kernel.kernel.magic.vision import vision_text
from dsh_kernel.llm.codec import config_from_json, config_to_json
from dsh_kernel.llm.keys import KeyStore
from dsh_kernel.llm.provider import Provider
from dsh_kernel.llm.providers import (
    DEEPSEEK,
    GENERIC,
    OPENAI,
    ChatCompletionsProvider,
    ChatProfile,
    MessagesProvider,
)
from dsh_kernel.llm.providers.offline import OfflineProvider
from dsh_kernel.llm.types import LlmCallConfig
from dsh_kernel.runtime.image_reduce import DEFAULT_IMAGE_CAPS, ImageCaps
from dsh_kernel.store.layout import Store

DOC = Path(__file__).resolve().parents[3] / "docs" / "configuration.md"
NOWHERE = "http://127.0.0.1:9"  # never contacted: only prepare_call and the catalogue are asked


def from_env(**env: str) -> HostSettings:
    """The settings with every traitlet at its default and exactly ``env`` set."""
    return settings_from_traits({}, env)


# --- read one way --------------------------------------------------------------------------------

READ = [
    ("provider", " openai ", "openai"),
    ("model", "anthropic:claude-sonnet-5-5", "anthropic:claude-sonnet-5-5"),
    ("approval", "auto", "auto"),
    ("approval_timeout", "60", 60.0),
    ("approval_timeout", "none", None),
    ("approval_timeout", "inf", None),
    ("approval_timeout", "0", None),
    ("headless_approval_timeout", "2.5", 2.5),
    ("redraw_rate", "5", 5.0),
    ("redraw_rate", " 0.01 ", 0.01),
    ("redraw_rate", "100", 100.0),
    ("reasoning", "high", "high"),
    ("context_window", "8192", 8192),
    ("context_window", " 32_768 ", 32768),
    ("context_window", "131,072", 131072),
    ("context_window", "default", None),
    ("context_window", "100,000,000", 100_000_000),
    ("compaction", "on", True),
    ("compaction", " OFF ", False),
    ("compaction", "true", True),
    ("compaction", "0", False),
    ("vision", "on", True),
    ("vision", " ON ", True),
    ("vision", "Off", False),
    ("vision", "auto", None),
    ("image_max_side", "2048", 2048),
    ("image_max_side", " 1_536 ", 1536),
    ("images_per_call", "0", 0),
    ("image_max_bytes", "262144", 262144),
    ("image_max_bytes", "256k", 256 * 1024),
    ("image_max_bytes", "256KiB", 256 * 1024),
    ("image_max_bytes", "2M", 2 * 1024 * 1024),
    ("image_max_bytes", "2 MB", 2 * 1024 * 1024),
    ("temperature", "0", 0.0),
    ("temperature", " 0.7 ", 0.7),
    ("temperature", "2", 2.0),
    ("temperature", "default", None),
    ("seed", "1234", 1234),
    ("seed", " 1_000 ", 1000),
    ("seed", "none", None),
]


@pytest.mark.parametrize(("name", "raw", "value"), READ)
def test_a_variable_is_read_one_way(name: str, raw: str, value: object) -> None:
    env = BY_NAME[name].env
    assert env is not None
    assert getattr(from_env(**{env: raw}), name) == value


def test_the_defaults() -> None:
    settings = from_env()
    assert settings.images == ImageCaps(max_side=1024, per_call=4, max_bytes=512 * 1024)
    assert settings.compaction is True and settings.vision is None
    assert settings.context_window is None and settings.approval_timeout == 300.0
    assert settings.headless_approval_timeout == 10.0 and settings.redraw_rate == 20.0
    assert settings.course.ai_policy == "full" and settings.course.budget_tokens is None


REFUSED = (
    [
        ("DSH_COMPACTION", raw, "is not a compaction setting: use on")
        for raw in ("maybe", "auto", "2", "sometimes")
    ]
    + [
        ("DSH_VISION", raw, "is not a vision setting: use on (images go to the model), off")
        for raw in ("yes", "1", "true", "maybe", "vision")
    ]
    + [
        ("DSH_CONTEXT_WINDOW", raw, "is not a context window")
        for raw in ("8k", "lots", "100", "-4096", "4096.5", "100_000_001", "9007199254740993")
    ]
    + [
        ("DSH_APPROVAL_TIMEOUT", "soon", "is not a number of seconds (or 'none')"),
        ("DSH_HEADLESS_APPROVAL_TIMEOUT", "soon", "is not a number"),
    ]
    + [
        ("DSH_REDRAW_RATE", raw, "is not a redraw rate: a number from 0.01 to 100")
        for raw in ("fast", "0", "-5", "101", "nan", "inf")
    ]
    + [
        ("DSH_TEMPERATURE", raw, "is not a temperature: give a number from 0 to 2")
        for raw in ("hot", "-0.1", "2.5", "nan")
    ]
    + [
        ("DSH_SEED", raw, "is not a seed: give a whole number from 0 to 2**63 - 1")
        for raw in ("-1", "1.5", "lucky", str(2**63))
    ]
)


@pytest.mark.parametrize(("variable", "raw", "what"), REFUSED)
def test_a_bad_variable_is_one_line_naming_it(variable: str, raw: str, what: str) -> None:
    with pytest.raises(UsageError) as info:
        from_env(**{variable: raw})
    message = info.value.message
    assert message.startswith(f"{variable}={raw.strip()!r} {what}")
    assert "\n" not in message
    if variable == "DSH_CONTEXT_WINDOW":
        assert "at least 512 and at most 100,000,000" in message and "'default'" in message
    if variable == "DSH_VISION":
        assert "auto" in message


IMAGE_RANGES = {
    "DSH_IMAGE_MAX_SIDE": "the longest side in pixels, a whole number from 64 to 8,192",
    "DSH_IMAGES_PER_CALL": "the number of images per call, a whole number from 0 to 50",
    "DSH_IMAGE_MAX_BYTES": "the bytes per image, a whole number from 8,192 to 20,971,520",
}


@pytest.mark.parametrize(
    ("variable", "raw"),
    [
        ("DSH_IMAGE_MAX_SIDE", "huge"),
        ("DSH_IMAGE_MAX_SIDE", "10"),
        ("DSH_IMAGES_PER_CALL", "-1"),
        ("DSH_IMAGES_PER_CALL", "2.5"),
        ("DSH_IMAGE_MAX_BYTES", "1G"),
        ("DSH_IMAGE_MAX_BYTES", "100"),
    ],
)
def test_a_bad_image_limit_names_the_variable_and_the_range(variable: str, raw: str) -> None:
    with pytest.raises(UsageError) as info:
        from_env(**{variable: raw})
    message = info.value.message
    assert message.startswith(f"{variable}={raw!r} is ")
    assert message.endswith(f"give {IMAGE_RANGES[variable]}") and "\n" not in message


# --- the environment over the traitlet -----------------------------------------------------------

OVER = [
    ("provider", "deepseek", "openai", "openai"),
    ("store", "/from/config", "/from/env", "/from/env"),
    ("context_window", 6000, "12000", 12000),
    ("context_window", 6000, "default", None),
    ("compaction", False, "on", True),
    ("compaction", True, "off", False),
    ("vision", "on", "off", False),
    ("vision", "off", "auto", None),
    ("images_per_call", 2, "7", 7),
    ("approval_timeout", 600.0, "none", None),
    ("redraw_rate", 5.0, "50", 50.0),
]


@pytest.mark.parametrize(("name", "trait", "raw", "value"), OVER)
def test_the_environment_wins_over_the_traitlet(
    name: str, trait: object, raw: str, value: object
) -> None:
    env = BY_NAME[name].env
    assert env is not None
    traits = {name: trait}
    assert getattr(settings_from_traits(traits, {}), name) != value  # the traitlet alone
    assert getattr(settings_from_traits(traits, {env: raw}), name) == value
    assert getattr(settings_from_traits(traits, {env: "  "}), name) != value  # blank: not set


@pytest.mark.parametrize(
    ("name", "trait", "message"),
    [
        (
            "images_per_call",
            100,
            "c.DshKernel.images_per_call = 100 is out of range: give the number of images per "
            "call, a whole number from 0 to 50",
        ),
        ("context_window", 100, "c.DshKernel.context_window = '100' is not a context window"),
        ("vision", "maybe", "c.DshKernel.vision = 'maybe' is not a vision setting"),
        ("redraw_rate", 0.0, "c.DshKernel.redraw_rate = '0.0' is not a redraw rate"),
    ],
)
def test_a_bad_traitlet_names_the_traitlet(name: str, trait: object, message: str) -> None:
    with pytest.raises(UsageError) as info:
        settings_from_traits({name: trait}, {})
    assert info.value.message.startswith(message)


def test_the_course_takes_the_stricter_of_the_two() -> None:
    both = settings_from_traits(
        {"ai_policy": "explain", "budget_tokens": 5000},
        {"DSH_AI_POLICY": "full", "DSH_BUDGET_TOKENS": "1000"},
    ).course
    assert (both.ai_policy, both.budget_tokens) == ("explain", 1000)
    assert both.origin == {
        "ai_policy": "c.DshKernel.ai_policy",
        "budget_tokens": "DSH_BUDGET_TOKENS",
    }
    bad = settings_from_traits({}, {"DSH_BUDGET_USD": "lots"}).course
    assert bad.ai_policy == "off" and bad.problem is not None
    assert bad.problem.startswith("DSH_BUDGET_USD='lots' is not a budget in US dollars")


def test_a_base_url_belongs_to_the_provider_it_was_configured_for() -> None:
    assert from_env(DSH_BASE_URL="http://127.0.0.1:1/v1").base_url_provider == "openai-compatible"
    routed = from_env(DSH_BASE_URL="http://127.0.0.1:1/v1", DSH_MODEL="openai:gpt-6-luna")
    assert routed.base_url_provider == "openai"
    assert from_env().base_url_provider == ""


def test_start_variables_are_the_ones_the_kernel_kept() -> None:
    at_start = {"DSH_STORE": "/at/start"}
    now = {"DSH_STORE": "/changed/later", "DSH_AI_POLICY": "off", "DSH_VISION": "on"}
    env = environment(at_start, now)
    assert env == {"DSH_STORE": "/at/start", "DSH_VISION": "on"}  # DSH_AI_POLICY was not set then
    assert {"DSH_STORE", "DSH_SHARED_STORE", "DSH_AI_POLICY", "USER"} <= set(
        configuration.START_VARIABLES
    )


# --- generated from the table --------------------------------------------------------------------


def test_the_kernel_traitlets_are_the_table() -> None:
    traits = {
        n: t for n, t in DshKernel.class_traits(config=True).items() if t.this_class is DshKernel
    }
    assert list(traits) == sorted(s.name for s in SETTINGS)
    for s in SETTINGS:
        trait = traits[s.name]
        assert type(trait) is type(s.trait()) and trait.default_value == s.trait().default_value
        assert trait.help.startswith(s.help)
        assert (f"Env: {s.env}" in trait.help) is (s.env is not None)


def test_host_settings_has_one_field_per_agent_setting() -> None:
    fields = {f.name for f in dataclasses.fields(HostSettings)}
    plain = {s.name for s in SETTINGS if s.host and s.combine == "environment wins"}
    assert fields == plain | {"base_url_provider", "course"}
    default = HostSettings()
    for name in plain:
        assert getattr(default, name) == getattr(from_env(), name), name
    assert from_env().images == DEFAULT_IMAGE_CAPS


def test_every_status_line_of_a_setting_is_shown_in_order(tmp_path: Path) -> None:
    assert {s.name for s in SETTINGS if s.status} <= set(STATUS_ORDER)
    host = AgentHost(
        from_env(DSH_PROVIDER="offline", DSH_STORE=str(tmp_path)),
        namespace={},
        keys=KeyStore(),
    )
    lines = status_lines(host)
    assert lines["context_window"] == "window:   32,768 tokens (catalogue)"
    assert lines["approval"] == "approval: ask for tools that change things; read-only tools run"
    assert lines["store"].startswith(f"store:    {Store.at(tmp_path).root}")
    assert "budget_tokens" not in lines and "shared_store" not in lines  # nothing to say
    assert "temperature" not in lines  # neither temperature nor seed set
    status = AgentMagics(None, host=lambda: host)._cmd_status([]).splitlines()
    labels = [line.split(":", 1)[0] for line in status]
    assert labels == [
        "provider", "model", "window", "session", "context", "compaction", "rewind", "capsule",
        "reasoning", "images", "approval", "tools", "store", "ai policy",
    ]  # fmt: skip
    assert all(line in status for line in lines.values())


def test_the_configuration_doc_table_is_current() -> None:
    text = DOC.read_text(encoding="utf-8")
    assert text == configuration.rewrite(text), (
        "docs/configuration.md is stale: run python -m dsh_kernel.kernel.configuration"
    )
    for s in SETTINGS:
        assert f"| `c.DshKernel.{s.name}` |" in text


def test_check_mode_fails_on_a_stale_table_and_passes_after_writing(tmp_path: Path) -> None:
    stale = tmp_path / "configuration.md"
    stale.write_text(f"# old\n\n{configuration.BEGIN}\n| old |\n{configuration.END}\n\nend\n")
    out = subprocess.run(
        [sys.executable, "-m", "dsh_kernel.kernel.configuration", "--check", str(stale)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert out.returncode == 1 and "stale" in out.stderr
    assert configuration.main([str(stale)]) == 0
    assert configuration.main(["--check", str(stale)]) == 0
    assert stale.read_text().endswith("\n\nend\n") and "| old |" not in stale.read_text()


# --- the store: opened once ------------------------------------------------------------------------


def test_temperature_and_seed_go_with_every_request_and_are_logged(tmp_path: Path) -> None:
    host = AgentHost(
        from_env(
            DSH_PROVIDER="offline", DSH_STORE=str(tmp_path), DSH_TEMPERATURE="0", DSH_SEED="7"
        ),
        namespace={},
        keys=KeyStore(),
    )
    assert (host.agent.temperature, host.agent.seed) == (0.0, 7)
    assert status_lines(host)["temperature"] == "sampling: temperature 0.0, seed 7"
    settings = host.agent._step_settings()
    assert (settings.temperature, settings.seed) == (0.0, 7)
    config = LlmCallConfig(provider="p", model="m", temperature=0.0, seed=7)
    assert config_from_json(config_to_json(config)) == config
    assert config_to_json(config)["seed"] == 7


def test_the_host_runs_with_the_store_the_kernel_opened(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    with pytest.raises(StoreError) as info:
        Store.open(blocker / "store")
    refused = info.value
    assert refused.code == "STORE_NOT_WRITABLE" and "DSH_STORE" in refused.message
    settings = from_env(DSH_PROVIDER="offline", DSH_STORE=str(tmp_path / "elsewhere"))
    host = AgentHost(settings, namespace={}, keys=KeyStore(), store=refused)
    assert host.store is None and host.store_warning == refused.message
    assert not (tmp_path / "elsewhere").exists()  # not opened again
    opened = Store.open(tmp_path / "ok")
    assert AgentHost(settings, namespace={}, keys=KeyStore(), store=opened).store is opened
    assert AgentHost(settings, namespace={}, keys=KeyStore()).store == Store.at(
        tmp_path / "elsewhere"
    )


# --- compaction: the switch and the %agent compact cell ------------------------------------------


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


def test_every_agent_of_the_host_gets_the_compaction_setting(tmp_path: Path) -> None:
    host = AgentHost(
        settings_from_traits({"compaction": False}, {"DSH_PROVIDER": "offline"}),
        namespace={},
        keys=KeyStore(),
        store=Store.open(tmp_path),
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


# --- vision: what %agent status says, per route ---------------------------------------------------


def chat(profile: ChatProfile, id: str) -> ChatCompletionsProvider:
    return ChatCompletionsProvider(id=id, base_url=NOWHERE, profile=profile, api_key=lambda: "k")


@pytest.mark.parametrize(
    ("provider", "model", "images", "text"),
    [
        (
            MessagesProvider(id="anthropic", base_url=NOWHERE, api_key=lambda: "k"),
            "claude-sonnet-5-5",
            None,
            "sent to the model (claude-sonnet-5-5 takes them)",
        ),
        (
            chat(OPENAI, "openai"),
            "gpt-6-luna",
            False,
            "not sent, described in text (configured: vision off)",
        ),
        (
            chat(DEEPSEEK, "deepseek"),
            "deepseek-flash",
            None,
            "not sent, described in text (deepseek-flash takes none)",
        ),
        (
            chat(DEEPSEEK, "deepseek"),
            "deepseek-flash",
            True,
            "not sent, described in text (deepseek takes none, whatever the vision setting)",
        ),
        (
            chat(GENERIC, "openai-compatible"),
            "qwen",
            None,
            "not sent, described in text (qwen is not known to take images; DSH_VISION=on or "
            "c.DshKernel.vision = 'on' sends them)",
        ),
        (
            chat(GENERIC, "openai-compatible"),
            "llava",
            True,
            "sent to the model (configured: vision on)",
        ),
    ],
)
def test_status_says_whether_images_go_to_the_model_and_why(
    provider: Provider, model: str, images: bool | None, text: str
) -> None:
    agent = Agent(provider=provider, model=model)
    agent.images = images
    assert vision_text(agent) == text
    # …and it is what the next request does
    sent = provider.prepare_call(LlmCallConfig(provider=provider.id, model=model, images=images))
    assert (sent.config.images is True) == text.startswith("sent")


def test_the_offline_demo_says_it_reads_nothing() -> None:
    agent = Agent(provider=OfflineProvider())
    assert vision_text(agent) == "not sent — offline demo model (scripted, not a language model)"
