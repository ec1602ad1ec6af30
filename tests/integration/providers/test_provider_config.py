"""Provider configuration: built-in profiles, environment selection, per-request keys, make_provider."""

from __future__ import annotations

import pickle

import httpx
import pytest

from dsh_kernel.errors import LlmError, UsageError
from dsh_kernel.llm.config import (
    BUILTIN_PROVIDERS,
    PLACEHOLDER_KEY,
    KeyStore,
    ProviderConfig,
    config_from_env,
    config_from_json,
    make_provider,
    resolve_api_key,
)
from dsh_kernel.llm.provider import Provider
from dsh_kernel.llm.providers import ChatCompletionsProvider, MessagesProvider
from tests.support import wire_transcripts as wt
from tests.support.providers import collect, request
from tests.support.sse_server import SseServer, sse_reply


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        ({}, None),
        ({"ANTHROPIC_API_KEY": "a"}, "anthropic"),
        ({"ANTHROPIC_API_KEY": "a", "OPENAI_API_KEY": "o"}, "openai"),
        ({"ANTHROPIC_API_KEY": "a", "OPENAI_API_KEY": "o", "DEEPSEEK_API_KEY": "d"}, "deepseek"),
        ({"DEEPSEEK_API_KEY": "  "}, None),  # blank is absent
        ({"DEEPSEEK_API_KEY": "d", "DSH_PROVIDER": "anthropic"}, "anthropic"),
        ({"DSH_BASE_URL": "http://127.0.0.1:8080/v1"}, "openai-compatible"),
        ({"DSH_MODEL": "openai:gpt-x"}, "openai"),
    ],
)
def test_default_choice(env: dict[str, str], expected: str | None) -> None:
    config = config_from_env(env)
    assert (config.id if config else None) == expected


def test_overrides() -> None:
    config = config_from_env(
        {
            "DSH_PROVIDER": "deepseek",
            "DSH_MODEL": "deepseek-v4-pro",
            "DSH_BASE_URL": "http://127.0.0.1:1",
        }
    )
    assert config is not None
    assert (config.kind, config.model, config.base_url, config.api_key_env) == (
        "deepseek",
        "deepseek-v4-pro",
        "http://127.0.0.1:1",
        "DEEPSEEK_API_KEY",
    )
    ollama = config_from_env({"DSH_BASE_URL": "http://127.0.0.1:11434/v1", "DSH_MODEL": "qwen3:8b"})
    assert (
        ollama is not None and ollama.model == "qwen3:8b"
    )  # a colon that is not a provider prefix
    assert ollama.api_key_env == "DSH_API_KEY" and ollama.api_key_optional


def test_a_key_in_the_store_selects_a_provider() -> None:
    keys = KeyStore()
    keys.set("OPENAI_API_KEY", "sk-from-store")
    config = config_from_env({}, keys=keys)
    assert config is not None and config.id == "openai"


@pytest.mark.parametrize(
    ("env", "fragment"),
    [
        ({"DSH_PROVIDER": "nope"}, "DSH_PROVIDER='nope'"),
        ({"DSH_PROVIDER": "openai-compatible"}, "DSH_BASE_URL"),
        ({"DSH_PROVIDER": "openai", "DSH_MODEL": "anthropic:claude-x"}, "names provider"),
    ],
)
def test_bad_environment(env: dict[str, str], fragment: str) -> None:
    with pytest.raises(UsageError, match=fragment):
        config_from_env(env)


def test_model_ids_are_configuration() -> None:
    assert {c.model for c in BUILTIN_PROVIDERS.values()} >= {"deepseek-flash"}
    assert all(
        c.model not in ("deepseek-chat", "deepseek-reasoner") for c in BUILTIN_PROVIDERS.values()
    )


def test_missing_credential_names_the_variable() -> None:
    with pytest.raises(LlmError) as info:
        resolve_api_key(BUILTIN_PROVIDERS["deepseek"], env={})
    assert info.value.code == "MISSING_CREDENTIAL"
    assert "DEEPSEEK_API_KEY" in info.value.failure.message
    assert "%agent key deepseek" in info.value.failure.message


def test_key_precedence_and_placeholder() -> None:
    keys = KeyStore()
    config = BUILTIN_PROVIDERS["anthropic"]
    assert resolve_api_key(config, env={"ANTHROPIC_API_KEY": " env-key "}, keys=keys) == "env-key"
    keys.set("ANTHROPIC_API_KEY", "store-key")
    assert resolve_api_key(config, env={"ANTHROPIC_API_KEY": "env-key"}, keys=keys) == "store-key"
    keys.forget("ANTHROPIC_API_KEY")
    assert "ANTHROPIC_API_KEY" not in keys
    assert resolve_api_key(BUILTIN_PROVIDERS["openai-compatible"], env={}) == PLACEHOLDER_KEY


def test_key_store_never_shows_or_serialises_keys() -> None:
    keys = KeyStore()
    keys.set("DEEPSEEK_API_KEY", "sk-very-secret-value")
    assert "sk-very-secret" not in repr(keys) and "DEEPSEEK_API_KEY" in repr(keys)
    with pytest.raises(TypeError):
        pickle.dumps(keys)
    with pytest.raises(UsageError):
        keys.set("X", "  ")


async def test_keys_resolve_per_request(server: SseServer, client: httpx.AsyncClient) -> None:
    env: dict[str, str] = {}
    keys = KeyStore()
    config = ProviderConfig(
        id="deepseek",
        kind="deepseek",
        base_url=server.url,
        api_key_env="DEEPSEEK_API_KEY",
        model="deepseek-flash",
    )
    provider = make_provider(config, client, keys=keys, env=env)
    with pytest.raises(LlmError) as info:
        await collect(provider, request())  # type: ignore[arg-type]
    assert info.value.code == "MISSING_CREDENTIAL"
    assert server.requests == []  # nothing was sent without a key
    server.script(sse_reply(wt.OPENAI_TEXT), sse_reply(wt.OPENAI_TEXT))
    env["DEEPSEEK_API_KEY"] = "sk-first"
    await collect(provider, request())  # type: ignore[arg-type]
    keys.set("DEEPSEEK_API_KEY", "sk-second")
    await collect(provider, request())  # type: ignore[arg-type]
    assert [r.headers["authorization"] for r in server.requests] == [
        "Bearer sk-first",
        "Bearer sk-second",
    ]


def test_make_provider_kinds() -> None:
    made = {
        kind: make_provider(
            ProviderConfig(
                id=kind, kind=kind, base_url="http://127.0.0.1:1/", api_key_env="K", model="m"
            )
        )
        for kind in ("deepseek", "openai", "openai-compatible", "anthropic")
    }
    assert all(isinstance(p, Provider) for p in made.values())
    assert isinstance(made["anthropic"], MessagesProvider)
    profiles = {
        k: p.profile.name for k, p in made.items() if isinstance(p, ChatCompletionsProvider)
    }
    assert profiles == {
        "deepseek": "DeepSeek",
        "openai": "OpenAI",
        "openai-compatible": "OpenAI-compatible server",
    }
    assert made["deepseek"].id == "deepseek"
    assert {p.default_model for p in made.values()} == {"m"}  # type: ignore[attr-defined]


def test_config_from_json() -> None:
    config = config_from_json(
        {
            "id": "local",
            "kind": "openai-compatible",
            "base_url": "http://127.0.0.1:8000/v1",
            "api_key_env": None,
            "model": "qwen",
            "api_key_optional": True,
            "defaults": {"temperature": 0.3},
            "timeouts": {"idle_s": 60},
        }
    )
    assert config.defaults.temperature == 0.3 and config.timeouts.idle_s == 60
    with pytest.raises(UsageError, match="kind"):
        config_from_json(
            {"id": "x", "kind": "gemini", "base_url": "u", "api_key_env": "K", "model": "m"}
        )
