"""Provider configuration: which backend, where, which model, and which credential — by name only.

A provider is ``ProviderConfig{id, kind, base_url, api_key_env, model, defaults}`` (plus timeouts).
``kind`` picks the wire and dialect: ``deepseek`` and ``openai`` are profiles of the Chat Completions
adapter, ``openai-compatible`` is that adapter with nothing assumed (vLLM, Ollama, llama.cpp, LM
Studio, OpenRouter, LiteLLM), ``anthropic`` is the Messages adapter. Model ids are configuration,
never code: the built-in profiles only supply a starting id.

Credentials are referenced by environment-variable name and resolved **per request**
(``resolve_api_key``): a key typed at ``%agent key``, then the variable in the environment now, then
the key the kernel moved out of the environment at start (``dsh_kernel.llm.keys``). A key with a
control character is never sent: ``LlmError(INVALID_CREDENTIAL)`` names the variable, never the key.
A missing key is ``LlmError(MISSING_CREDENTIAL)`` naming the variable to set. The generic profile's key
(``DSH_API_KEY``) is optional — local servers ignore it, so a placeholder is sent — and deliberately
not ``OPENAI_API_KEY``, which must never travel to an arbitrary base URL. Every key resolved is handed
to the redactor (``dsh_kernel.llm.secrets``).

Environment (``config_from_env``): ``DSH_PROVIDER`` names a built-in profile; ``DSH_MODEL`` sets the
model (``provider:model`` also picks the provider when the prefix is a profile id); ``DSH_BASE_URL``
is the endpoint of *that* provider, and alone selects the generic OpenAI-compatible profile. Without
``DSH_BASE_URL`` a profile's own variable (``DEEPSEEK_BASE_URL``, ``OPENAI_BASE_URL``,
``ANTHROPIC_BASE_URL``) may name its endpoint, else the built-in one is used. A base URL with
credentials in it (``user:password@``, an ``api_key=``/``key=``/``token=`` query parameter) is
refused with a one-line ``UsageError`` that does not print it. With none of these, the first profile
whose key is present wins — DeepSeek, then OpenAI, then Anthropic — and with no key at all the answer
is ``None`` (the kernel then offers its offline demo model). ``DSH_IDLE_TIMEOUT`` and ``DSH_DEADLINE``
(seconds) override ``Timeouts.idle_s`` (longest silence between two reads) and
``Timeouts.deadline_s`` (longest attempt) of whichever provider is chosen.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Literal, Protocol, TypeAlias

import httpx
from pydantic import TypeAdapter, ValidationError

from dsh_kernel.errors import LlmError, UsageError
from dsh_kernel.jsonvalue import JsonObject
from dsh_kernel.llm.keys import KEYS, KeyStore, api_key, key_problem
from dsh_kernel.llm.provider import Provider
from dsh_kernel.llm.providers.anthropic.adapter import MessagesProvider
from dsh_kernel.llm.providers.base import KeySource, ProviderDefaults, Timeouts
from dsh_kernel.llm.providers.openai_compat.adapter import ChatCompletionsProvider
from dsh_kernel.llm.providers.openai_compat.profiles import DEEPSEEK, GENERIC, OPENAI
from dsh_kernel.llm.secrets import KEY_VARIABLES, REDACTOR, URL_VARIABLES, url_credentials
from dsh_kernel.llm.types import LlmFailure

__all__ = [
    "BUILTIN_PROVIDERS",
    "KEYS",
    "PLACEHOLDER_KEY",
    "HttpProvider",
    "KeyStore",
    "ProviderConfig",
    "ProviderKind",
    "api_key",
    "check_base_url",
    "config_from_env",
    "config_from_json",
    "has_key",
    "key_source",
    "make_provider",
    "resolve_api_key",
]

ProviderKind: TypeAlias = Literal["deepseek", "openai", "openai-compatible", "anthropic"]

PLACEHOLDER_KEY = "sk-no-key"
"""Sent when an optional key is absent: some local servers and proxies insist on *a* bearer token."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ProviderConfig:
    """Which provider to talk to and how: kind, endpoint, key variable and model (never the key)."""

    id: str
    """What the log records as ``config.provider``."""
    kind: ProviderKind
    base_url: str
    api_key_env: str | None
    """The environment variable holding the key (the key itself is never configuration)."""
    model: str
    defaults: ProviderDefaults = field(default_factory=ProviderDefaults)
    timeouts: Timeouts = field(default_factory=Timeouts)
    api_key_optional: bool = False
    base_url_env: str | None = None
    """The environment variable that may name this provider's own endpoint (``OPENAI_BASE_URL``)."""


BUILTIN_PROVIDERS: Mapping[str, ProviderConfig] = {
    "deepseek": ProviderConfig(
        id="deepseek",
        kind="deepseek",
        base_url="https://api.deepseek.com",
        api_key_env=KEY_VARIABLES["deepseek"],
        base_url_env=URL_VARIABLES["deepseek"],
        model="deepseek-flash",
    ),
    "openai": ProviderConfig(
        id="openai",
        kind="openai",
        base_url="https://api.openai.com/v1",
        api_key_env=KEY_VARIABLES["openai"],
        base_url_env=URL_VARIABLES["openai"],
        model="gpt-6-luna",
    ),
    "anthropic": ProviderConfig(
        id="anthropic",
        kind="anthropic",
        base_url="https://api.anthropic.com",
        api_key_env=KEY_VARIABLES["anthropic"],
        base_url_env=URL_VARIABLES["anthropic"],
        model="claude-sonnet-5-5",
    ),
    "openai-compatible": ProviderConfig(
        id="openai-compatible",
        kind="openai-compatible",
        base_url="",
        api_key_env=KEY_VARIABLES["openai-compatible"],
        model="default",
        api_key_optional=True,
    ),
}
"""Starting points; ``DSH_MODEL``/``DSH_BASE_URL`` (or the kernel's configuration) override them."""

DEFAULT_ORDER = ("deepseek", "openai", "anthropic")


def resolve_api_key(
    config: ProviderConfig, *, env: Mapping[str, str] | None = None, keys: KeyStore | None = None
) -> str:
    """The key for one request: typed, then the environment, then the key taken from the
    environment at start; else the placeholder (optional keys) or ``MISSING_CREDENTIAL``
    (``INVALID_CREDENTIAL`` for a key with a control character)."""
    name = config.api_key_env
    refused: str | None = None
    if name:
        key = keys.typed(name) if keys is not None else None
        if not key:
            key = (os.environ if env is None else env).get(name, "").strip()
            if key and (refused := key_problem(key)) is not None:
                REDACTOR.add(key)
                key = None
        if not key and keys is not None:
            key = keys.taken(name)
            refused = refused or keys.refused(name)
        if key:
            REDACTOR.add(key)
            return key
    if refused is not None:
        raise LlmError(
            LlmFailure(
                code="INVALID_CREDENTIAL",
                message=(
                    f"the key in {name} contains {refused}, so it is not sent: set it again as one "
                    f"line (or run `%agent key {config.id}`)"
                ),
            )
        )
    if config.api_key_optional:
        return PLACEHOLDER_KEY
    raise LlmError(
        LlmFailure(
            code="MISSING_CREDENTIAL",
            message=(
                f"no API key for provider {config.id!r}: set the environment variable {name}"
                f" (or run `%agent key {config.id}`)"
                if name
                else f"provider {config.id!r} has no api_key_env configured"
            ),
        )
    )


def key_source(
    config: ProviderConfig, *, env: Mapping[str, str] | None = None, keys: KeyStore | None = None
) -> KeySource:
    """A ``KeySource`` that resolves afresh on every call (so a key set later is used next)."""
    return lambda: resolve_api_key(config, env=env, keys=keys)


def has_key(
    config: ProviderConfig, *, env: Mapping[str, str] | None = None, keys: KeyStore | None = None
) -> bool:
    """Whether a usable key for ``config`` is in ``keys`` or its environment variable."""
    name = config.api_key_env
    if not name:
        return False
    if keys is not None and keys.get(name):
        return True
    key = (os.environ if env is None else env).get(name, "").strip()
    return bool(key) and key_problem(key) is None


def check_base_url(url: str, where: str) -> str:
    """``url`` when it carries no credentials; else ``UsageError`` (the URL is never printed)."""
    if url_credentials(url):
        REDACTOR.add_url(url)
        raise UsageError(
            f"{where} has credentials in it (a user:password@ part or a key/token query "
            "parameter), so it is not used: remove them and put the key in DSH_API_KEY"
        )
    return url


def config_from_env(
    env: Mapping[str, str] | None = None, *, keys: KeyStore | None = None
) -> ProviderConfig | None:
    """The provider the environment asks for (module docstring), or ``None`` when nothing is set."""
    env = os.environ if env is None else env
    provider = env.get("DSH_PROVIDER", "").strip()
    model = env.get("DSH_MODEL", "").strip()
    base_url = env.get("DSH_BASE_URL", "").strip()
    prefix, sep, rest = model.partition(":")
    if sep and prefix in BUILTIN_PROVIDERS and rest:
        if provider and provider != prefix:
            raise UsageError(
                f"DSH_MODEL={model!r} names provider {prefix!r} but DSH_PROVIDER={provider!r}"
            )
        provider, model = prefix, rest
    if provider:
        config = BUILTIN_PROVIDERS.get(provider)
        if config is None:
            raise UsageError(
                f"DSH_PROVIDER={provider!r} is not one of {', '.join(sorted(BUILTIN_PROVIDERS))}"
            )
    elif base_url:
        config = BUILTIN_PROVIDERS["openai-compatible"]
    else:
        found = [p for p in DEFAULT_ORDER if has_key(BUILTIN_PROVIDERS[p], env=env, keys=keys)]
        if not found:
            return None
        config = BUILTIN_PROVIDERS[found[0]]
    if base_url:
        config = replace(config, base_url=check_base_url(base_url, "DSH_BASE_URL"))
    elif config.base_url_env and (own := env.get(config.base_url_env, "").strip()):
        config = replace(config, base_url=check_base_url(own, config.base_url_env))
    if model:
        config = replace(config, model=model)
    if not config.base_url:
        raise UsageError(f"provider {config.id!r} needs a base URL: set DSH_BASE_URL")
    idle = _seconds(env, "DSH_IDLE_TIMEOUT")
    deadline = _seconds(env, "DSH_DEADLINE")
    if idle is not None or deadline is not None:
        t = config.timeouts
        config = replace(
            config,
            timeouts=Timeouts(
                connect_s=t.connect_s,
                idle_s=t.idle_s if idle is None else idle,
                deadline_s=t.deadline_s if deadline is None else deadline,
            ),
        )
    return config


def _seconds(env: Mapping[str, str], name: str) -> float | None:
    """A positive number of seconds from ``env[name]``; ``None`` when unset."""
    raw = env.get(name, "").strip()
    if not raw:
        return None
    try:
        value = float(raw)
    except ValueError:
        value = 0.0
    if not 0 < value < float("inf"):
        raise UsageError(f"{name}={raw!r} is not a positive number of seconds")
    return value


_CONFIG_ADAPTER: TypeAdapter[ProviderConfig] = TypeAdapter(ProviderConfig)


def config_from_json(value: JsonObject) -> ProviderConfig:
    """Validate a configuration object (Jupyter config, a settings file) into a ``ProviderConfig``."""
    try:
        return _CONFIG_ADAPTER.validate_python(value)
    except ValidationError as exc:
        raise UsageError(f"invalid provider configuration: {exc}") from exc


class HttpProvider(Provider, Protocol):
    """A ``Provider`` that may own an HTTP client, released by ``aclose()``."""

    async def aclose(self) -> None: ...


def make_provider(
    config: ProviderConfig,
    client: httpx.AsyncClient | None = None,
    *,
    keys: KeyStore | None = None,
    env: Mapping[str, str] | None = None,
) -> HttpProvider:
    """The adapter for ``config``. Keys resolve per request (``resolve_api_key``) from ``keys`` (the
    process's ``KEYS`` when not given) and ``env`` (``os.environ`` when not given)."""
    check_base_url(config.base_url, f"the base URL of provider {config.id!r}")
    source = key_source(config, env=env, keys=KEYS if keys is None else keys)
    match config.kind:
        case "deepseek" | "openai" | "openai-compatible":
            profile = {"deepseek": DEEPSEEK, "openai": OPENAI, "openai-compatible": GENERIC}[
                config.kind
            ]
            return ChatCompletionsProvider(
                id=config.id,
                base_url=config.base_url,
                profile=profile,
                api_key=source,
                client=client,
                defaults=config.defaults,
                timeouts=config.timeouts,
                default_model=config.model,
            )
        case "anthropic":
            return MessagesProvider(
                id=config.id,
                base_url=config.base_url,
                api_key=source,
                client=client,
                defaults=config.defaults,
                timeouts=config.timeouts,
                default_model=config.model,
            )
