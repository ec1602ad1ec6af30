"""The redactor, the key store and the URL credential check (``dsh_kernel.llm.secrets``/``keys``).

The kernel-level proof (real kernel, hostile tools, echoing servers) is
``tests/reliability/test_secrets.py``; these pin the pieces: every written form of a key and every
8+ character piece of one is scrubbed, nothing else is touched, and a key that HTTP would quote in an
error is refused without being shown.
"""

from __future__ import annotations

import json
import logging
import urllib.parse

import pytest

from dsh_kernel.errors import LlmError, UsageError
from dsh_kernel.ids import new_session_id
from dsh_kernel.llm.config import (
    BUILTIN_PROVIDERS,
    check_base_url,
    config_from_env,
    resolve_api_key,
)
from dsh_kernel.llm.keys import KeyStore, key_problem
from dsh_kernel.llm.providers.transport import malformed, parse_error_body, redact
from dsh_kernel.llm.secrets import (
    KEY_VARIABLES,
    REDACTED,
    REDACTOR,
    RedactingFilter,
    Redactor,
    url_credentials,
)
from dsh_kernel.session.events import SessionHeader
from dsh_kernel.session.log import Session

KEY = "sk-unit-3f9a7c1e5b2d4f6a8c0e1b3d5f7a9c2e"
ODD = 'sk-odd"quote\\slash/plus+pct%-4e6a8c0e1b3d'
NEWLINE = "sk-line-one-a1b2c3d4\nsk-line-two-e5f6a7b8"


def redactor(*secrets: str) -> Redactor:
    r = Redactor(environ={})
    for s in secrets:
        r.add(s)
    return r


def test_exact_and_every_escaped_form_is_scrubbed() -> None:
    r = redactor(KEY, ODD, NEWLINE)
    texts = {
        "plain": f"key {KEY} end",
        "json": json.dumps({"message": f"bad key {ODD}"}),
        "json-twice": json.dumps(json.dumps({"k": ODD})),
        "repr": repr({"k": NEWLINE}),
        "header": f"Illegal header value {f'Bearer {NEWLINE}'.encode()!r}",
        "url": f"https://x/?k={urllib.parse.quote(ODD, safe='')}",
        "url-plus": urllib.parse.quote_plus(ODD),
    }
    for name, text in texts.items():
        clean = r.redact(text)
        assert REDACTED in clean, name
        for piece in (KEY, ODD, NEWLINE, *NEWLINE.split("\n"), KEY[:8], ODD[:8]):
            assert piece not in clean, (name, clean)


@pytest.mark.parametrize("cut", [120, 300])
def test_a_key_cut_short_by_a_truncated_echo_is_scrubbed(cut: int) -> None:
    r = redactor(KEY)
    for n in range(8, len(KEY)):
        text = ("x" * (cut - n)) + KEY  # the echo is cut at ``cut`` characters, inside the key
        clean = r.redact(text[:cut])
        assert clean == "x" * (cut - n) + REDACTED, n
        assert r.redact(KEY[-n:] + " tail") == f"{REDACTED} tail"  # a head-and-tail cap's suffix
    assert r.redact(KEY[:7]) == KEY[:7]  # shorter than 8: not a recognisable piece


def test_servers_echo_cut_at_120_and_300_characters_is_scrubbed() -> None:
    REDACTOR.add(KEY)  # the process-wide redactor the transport uses (forgotten after the test)
    info = parse_error_body(b"<html>" + b"y" * 270 + KEY.encode() + b"</html>")
    assert info.message is not None and len(info.message) == 300
    text = redact(info.message, "another-key")
    assert KEY[:8] not in text and text.endswith(REDACTED)
    err = malformed(b"z" * 100 + KEY.encode(), "p", None, "not JSON")
    assert KEY[:8] not in err.failure.message and REDACTED in err.failure.message


def test_nothing_else_is_touched_and_short_values_are_not_secrets() -> None:
    r = redactor(KEY, "ollama")
    text = "ollama serves sk-unit models; keys look like sk-unit…; a 7-char piece sk-unit ✓"
    assert r.redact(text) is text
    assert r.redact("keys start with sk-unit-") == f"keys start with {REDACTED}"  # 8: a piece
    assert Redactor(environ={}).redact(f"no secrets known: {KEY}").endswith(KEY)


def test_scrub_walks_values_and_keys_in_place_without_recursion() -> None:
    r = redactor(KEY)
    deep: object = KEY
    for _ in range(5000):
        deep = [deep]
    data = {"a": [KEY, {"b": f"x{KEY}y"}], KEY: 1, "deep": deep, "n": 3}
    copied = r.scrubbed(data)
    out = r.scrub(data)
    assert out is data and isinstance(copied, dict) and copied is not data
    assert copied["a"] == data["a"] and copied["deep"] is not data["deep"]
    assert data["a"] == [REDACTED, {"b": f"x{REDACTED}y"}] and REDACTED in data
    assert KEY not in data and data["n"] == 3
    inner = data["deep"]
    while isinstance(inner, list):
        inner = inner[0]
    assert inner == REDACTED
    original = {"k": [KEY]}
    copied = r.scrubbed(original)  # type: ignore[arg-type]
    assert original == {"k": [KEY]} and copied == {"k": [REDACTED]}
    untouched = {"k": ["fine"]}
    assert r.scrubbed(untouched) is untouched  # type: ignore[arg-type]


def test_the_environment_and_url_credentials_are_learnt_on_refresh() -> None:
    env = {
        "DSH_API_KEY": KEY,
        "DSH_BASE_URL": "http://user:hunter2-pass@127.0.0.1:1/v1?token=tok-123456789",
    }
    r = Redactor(environ=env)
    assert r.redact(f"{KEY} hunter2-pass tok-123456789") == f"{REDACTED} {REDACTED} {REDACTED}"
    env["OPENAI_API_KEY"] = "sk-later-set-a1b2c3d4e5"
    r.refresh()
    assert r.redact("sk-later-set-a1b2c3d4e5") == REDACTED
    assert set(KEY_VARIABLES.values()) == {
        c.api_key_env for c in BUILTIN_PROVIDERS.values() if c.api_key_env
    }, "the redactor must watch every variable a provider reads"


def test_url_credentials_and_the_base_url_check() -> None:
    assert url_credentials("http://u:p@h/v1") == ["u", "p", "u:p"]
    assert url_credentials("https://h/v1?api_key=abc&x=1&Token=t") == ["abc", "t"]
    assert url_credentials("http://127.0.0.1:8080/v1") == []
    url = "http://me:s3cret-password@127.0.0.1:1/v1"
    for env in ({"DSH_BASE_URL": url}, {"DSH_PROVIDER": "openai", "OPENAI_BASE_URL": url}):
        with pytest.raises(UsageError) as info:
            config_from_env(env)
        assert "DSH_API_KEY" in info.value.message and "s3cret" not in info.value.message
        assert url not in info.value.message
    assert check_base_url("http://127.0.0.1:1/v1", "x") == "http://127.0.0.1:1/v1"


def test_each_provider_has_its_own_endpoint_variable() -> None:
    env = {"DSH_PROVIDER": "anthropic", "OPENAI_BASE_URL": "http://127.0.0.1:2"}
    config = config_from_env(env)
    assert config is not None and config.base_url == "https://api.anthropic.com"
    env["ANTHROPIC_BASE_URL"] = "http://127.0.0.1:3"
    config = config_from_env(env)
    assert config is not None and config.base_url == "http://127.0.0.1:3"
    env["DSH_BASE_URL"] = "http://127.0.0.1:4"
    config = config_from_env(env)
    assert config is not None and config.base_url == "http://127.0.0.1:4"


def test_keys_with_control_characters_are_refused_without_being_shown() -> None:
    assert key_problem(KEY) is None
    assert key_problem(NEWLINE) is not None and key_problem("sk-é") is not None
    r = Redactor(environ={})
    keys = KeyStore(redactor=r)
    with pytest.raises(UsageError) as info:
        keys.set("OPENAI_API_KEY", NEWLINE)
    assert "control character" in info.value.message and "OPENAI_API_KEY" in info.value.message
    assert "sk-line" not in info.value.message and "OPENAI_API_KEY" not in keys
    assert r.redact(NEWLINE) == REDACTED  # refused, and still scrubbed wherever it turns up
    env = {"DEEPSEEK_API_KEY": NEWLINE, "OPENAI_API_KEY": f"  {KEY} ", "OTHER": "x"}
    warnings = keys.take_environment(environ=env)
    assert env == {"OTHER": "x"}, "the keys left the environment"
    assert keys.taken("OPENAI_API_KEY") == KEY and keys.refused("DEEPSEEK_API_KEY")
    assert len(warnings) == 1 and "DEEPSEEK_API_KEY" in warnings[0] and "sk-" not in warnings[0]
    with pytest.raises(LlmError) as err:
        resolve_api_key(BUILTIN_PROVIDERS["deepseek"], env={}, keys=keys)
    assert (
        err.value.code == "INVALID_CREDENTIAL" and "control character" in err.value.failure.message
    )
    with pytest.raises(LlmError):
        resolve_api_key(BUILTIN_PROVIDERS["openai-compatible"], env={"DSH_API_KEY": NEWLINE})


def test_key_resolution_order_typed_then_environment_then_taken_at_start() -> None:
    keys = KeyStore(redactor=Redactor(environ={}))
    keys.take_environment(environ={"OPENAI_API_KEY": "sk-taken-at-start-1"})
    config = BUILTIN_PROVIDERS["openai"]
    assert resolve_api_key(config, env={}, keys=keys) == "sk-taken-at-start-1"
    assert resolve_api_key(config, env={"OPENAI_API_KEY": "sk-set-later-2"}, keys=keys) == (
        "sk-set-later-2"
    )
    keys.set("OPENAI_API_KEY", "sk-typed-3")
    assert resolve_api_key(config, env={"OPENAI_API_KEY": "sk-set-later-2"}, keys=keys) == (
        "sk-typed-3"
    )


def test_the_session_log_never_records_a_secret() -> None:
    r = redactor(KEY)
    session = Session(header=SessionHeader(id=new_session_id(), created_at=0), redactor=r)
    ev = session.append("command/run", {"commandId": "c1", "name": "x", "args": f"k={KEY}"})
    assert ev.data["args"] == f"k={REDACTED}"


def test_the_log_filter_scrubs_message_arguments_and_tracebacks(
    caplog: pytest.LogCaptureFixture,
) -> None:
    r = redactor(KEY)
    log = logging.getLogger("tests.secrets")
    caplog.handler.addFilter(RedactingFilter(r))
    try:
        raise RuntimeError(f"failed with {KEY}")
    except RuntimeError:
        log.exception("request with %s failed", KEY[:20])
    assert KEY[:8] not in caplog.text and REDACTED in caplog.text
