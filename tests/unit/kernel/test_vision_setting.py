"""``DSH_VISION`` / ``c.DshKernel.vision``: read one way, refused with one clear line, and said in
``%agent status`` (``kernel.magic.vision``) for each kind of route."""

from __future__ import annotations

import pytest

from dsh_kernel import Agent
from dsh_kernel.errors import UsageError
from dsh_kernel.kernel.host.settings import HostSettings, settings_from_env
from dsh_kernel.kernel.magic.vision import parse_vision, vision_text
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

NOWHERE = "http://127.0.0.1:9"  # never contacted: only prepare_call and the catalogue are asked


def chat(profile: ChatProfile, id: str) -> ChatCompletionsProvider:
    return ChatCompletionsProvider(id=id, base_url=NOWHERE, profile=profile, api_key=lambda: "k")


@pytest.mark.parametrize(
    ("raw", "value"),
    [("on", True), (" ON ", True), ("off", False), ("Off", False), ("auto", None), ("", None)],
)
def test_on_off_or_auto(raw: str, value: bool | None) -> None:
    assert parse_vision(raw) is value


@pytest.mark.parametrize("raw", ["yes", "1", "true", "maybe", "vision"])
def test_anything_else_is_refused_naming_the_accepted_values(raw: str) -> None:
    with pytest.raises(UsageError) as info:
        parse_vision(raw, "DSH_VISION=")
    message = info.value.message
    assert message.startswith(f"DSH_VISION={raw!r} is not a vision setting: use on")
    assert "off" in message and "auto" in message and "\n" not in message


def test_the_environment_overrides_the_traitlet(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("DSH_VISION", raising=False)
    assert settings_from_env(HostSettings()).vision is None
    assert settings_from_env(HostSettings(vision=True)).vision is True
    monkeypatch.setenv("DSH_VISION", "off")
    assert settings_from_env(HostSettings(vision=True)).vision is False
    monkeypatch.setenv("DSH_VISION", "auto")
    assert settings_from_env(HostSettings(vision=False)).vision is None
    monkeypatch.setenv("DSH_VISION", "sometimes")
    with pytest.raises(UsageError, match="DSH_VISION='sometimes' is not a vision setting"):
        settings_from_env(HostSettings())


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
