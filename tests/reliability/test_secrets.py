"""Secrets through a real kernel (issue 11: items 1, 2, 5, 7 and the truncated echoes of item 9).

One kernel (``rig``) is started with a distinct fake key in every variable a provider reads
(``DEEPSEEK_API_KEY``, ``OPENAI_API_KEY``, ``ANTHROPIC_API_KEY``, ``DSH_API_KEY``) and three loopback
servers, each the configured endpoint of one provider: ``DSH_BASE_URL`` (openai-compatible),
``OPENAI_BASE_URL`` and ``ANTHROPIC_BASE_URL``. A fifth key is typed at ``%agent key``. The model
(the scripted servers) then tries hostile tool calls — ``inspect`` of private paths, ``sql``,
``python`` under ``never`` and under ``auto`` —, the user switches provider and model, and servers
echo the key back, whole and cut at 120 and 300 characters.

After each test, ``assert_no_leak`` looks for every key *and every 8-character piece of one* in:
every file under the kernel's directory (journal, ``sessions.duckdb``, exports, IPython's history,
the kernel's stdout/stderr log, the cell outputs saved as JSON), and every request the servers
received — bodies and headers — where the only place a key may appear is the ``Authorization`` /
``x-api-key`` header of a request to *that key's own provider's* endpoint.

Separate kernels cover a key with a newline in it (refused at start, never written) and a base URL
with credentials in it (refused, never printed).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.reliability.support import (
    FIGURES,
    Call,
    journal_of,
    launch,
    loopback_env,
    python_call,
    text_reply,
    tool_reply,
)
from tests.reliability.test_security import with_input
from tests.support.kernel import Execution, Kernel
from tests.support.sse_server import SseServer, json_reply, sse_reply
from tests.support.wire_transcripts import anthropic_text, sse

KEYS = {
    "DEEPSEEK_API_KEY": "dsk-live-Qm7Vx2Lp9Rw4Tz1Kb6Nc3Hf8J",
    "OPENAI_API_KEY": "sk-proj-Wd5Gy8Ua1Ej4Oi7Bs2Xn9Vq3Mr",
    "ANTHROPIC_API_KEY": "sk-ant-api03-Pt6Zk1Cv8Ls3Fh5Dy2Wg9Qx4",
    "DSH_API_KEY": "dsh-proxy-Rn4Bj7Ym2Ke9Su1Ha6Xc3Vt8",
}
TYPED_KEY = "typed-in-Lg3Wq8Zp5Ex2Nb7Ro1Cy4Ud9"
HUB_TOKEN = "hub-api-token-Ws5Kd8Fy2Mq7Zr4Xt1"
"""A secret the kernel does not know (no provider reads it): it stays in the environment."""
ALL_KEYS = {**KEYS, "typed at %agent key": TYPED_KEY}
PIECE = 8


def pieces(key: str) -> set[str]:
    return {key[i : i + PIECE] for i in range(len(key) - PIECE + 1)}


def leaks(data: bytes, keys: Iterable[str] = ALL_KEYS.values()) -> list[str]:
    """The 8-character pieces of ``keys`` found in ``data``."""
    return sorted(p for key in keys for p in pieces(key) if p.encode() in data)


@dataclass
class Rig:
    k: Kernel
    tmp: Path
    servers: dict[str, SseServer]
    """Provider id → the loopback server that is that provider's endpoint."""
    outputs: list[dict[str, Any]] = field(default_factory=list)

    @property
    def a(self) -> SseServer:
        return self.servers["openai-compatible"]

    def cell(self, code: str, *, timeout: float = 60) -> Execution:
        ex = self.k.execute(code, timeout=timeout)
        self.outputs.extend(ex.messages)
        return ex

    def reset(self) -> None:
        """Back to the start-up route and policy (each test stands alone, whatever ran before)."""
        assert self.cell("%agent provider openai-compatible").status == "ok"
        assert self.cell("%agent approve ask").status == "ok"

    def tools(self, *calls: Call) -> dict[str, str]:
        """The model (server A) calls ``calls``; returns what it was sent back, by call id."""
        self.a.push(tool_reply(*calls), text_reply("done"))
        ex = self.cell("Please look.")
        assert ex.status == "ok", ex.content
        ids = {c.id for c in calls}
        return {
            str(m["tool_call_id"]): str(m["content"])
            for m in self.a.requests[-1].json["messages"]
            if m.get("tool_call_id") in ids
        }


ALLOWED = {
    "openai-compatible": {KEYS["DSH_API_KEY"], TYPED_KEY},
    "openai": {KEYS["OPENAI_API_KEY"]},
    "anthropic": {KEYS["ANTHROPIC_API_KEY"]},
}


def assert_no_leak(rig: Rig) -> int:
    """No key, nor any 8-character piece of one, anywhere but the right provider's auth header.
    Returns how many files were scanned."""
    journal_of(rig.k)  # flush
    rig.k.python("get_ipython().history_manager.writeout_cache()")  # IPython's history, too
    (rig.tmp / "outputs.json").write_text(json.dumps(rig.outputs, default=str), encoding="utf-8")
    found: dict[str, list[str]] = {}
    files = [p for p in sorted(rig.tmp.rglob("*")) if p.is_file() and not p.is_symlink()]
    for path in files:
        hit = leaks(path.read_bytes())
        if hit:
            found[str(path.relative_to(rig.tmp))] = hit
    for provider, server in rig.servers.items():
        for n, r in enumerate(server.requests):
            auth = r.headers.get("authorization", r.headers.get("x-api-key", ""))
            key = auth.removeprefix("Bearer ")
            assert key in ALLOWED[provider], (
                f"request {n} to {provider}'s endpoint sent another key"
            )
            rest = {k: v for k, v in r.headers.items() if k not in ("authorization", "x-api-key")}
            hit = leaks(r.body + json.dumps(rest).encode())
            if hit:
                found[f"request {n} to {provider} ({r.path})"] = hit
    assert found == {}, f"pieces of keys were written: {found}"
    return len(files)


@pytest.fixture(scope="module")
def rig(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Rig]:
    tmp = tmp_path_factory.mktemp("secrets")
    with SseServer() as a, SseServer() as b, SseServer() as c:
        env = loopback_env(
            a,
            **KEYS,
            OPENAI_BASE_URL=b.url,
            ANTHROPIC_BASE_URL=c.url,
            JUPYTERHUB_API_TOKEN=HUB_TOKEN,
        )
        with launch(tmp, env=env) as k:
            yield Rig(k=k, tmp=tmp, servers={"openai-compatible": a, "openai": b, "anthropic": c})


# --- item 1: the read-only tools cannot reach a key ----------------------------------------------


def test_read_only_tools_and_unapproved_code_cannot_reach_a_key(rig: Rig, tmp_path: Path) -> None:
    rig.reset()
    setup = (  # the user's own variables: the host, and a key kept in a variable
        "%%python\nimport os\nh = get_ipython().kernel.host\n"
        "mykey = h.keys.get('OPENAI_API_KEY') or os.environ['OPENAI_API_KEY']"
    )
    assert rig.cell(setup).status == "ok"
    marker = tmp_path / "ran"
    steal = f"import os, pathlib\npathlib.Path({str(marker)!r}).write_text(repr(os.environ))"
    assert "never" in rig.cell("%agent approve never").stdout
    results = rig.tools(
        Call("inspect", {"name": "os.environ._data"}, "i1"),
        Call("inspect", {"name": "get_ipython.__self__"}, "i2"),
        Call("inspect", {"name": "h.keys._typed"}, "i3"),
        Call("inspect", {"name": "h.agent.provider._api_key"}, "i4"),
        Call("inspect", {"name": "os.environ"}, "i5"),
        Call("inspect", {"name": "h.keys"}, "i6"),
        Call("inspect", {"name": "mykey"}, "i7"),
        Call("inspect", {}, "i8"),
        Call("sql", {"sql": "SELECT getenv('DSH_API_KEY') AS k"}, "s1"),
        python_call(steal, "p1"),
    )
    for call in ("i1", "i2", "i3", "i4"):
        assert "private or special name" in results[call], results[call]
    assert results["i5"].startswith("os._Environ — the process environment")  # names only
    assert "DSH_API_KEY" in results["i6"]  # the store's repr names variables, never keys
    assert "never" in results["p1"] and not marker.exists()
    assert "[redacted]" in results["i7"] and "mykey | str" in results["i8"]  # described, scrubbed
    check = (
        "%%python\nimport hashlib\nfrom dsh_kernel import api_key\n"
        "print(sorted(n for n in os.environ if n.endswith('_API_KEY')))\n"
        "print(hashlib.sha256(api_key('anthropic').encode()).hexdigest())"
    )
    names, digest = rig.cell(check).stdout.split()[:2]
    assert names == "[]", "the provider keys are still in the kernel's environment"
    assert digest == hashlib.sha256(KEYS["ANTHROPIC_API_KEY"].encode()).hexdigest()
    assert_no_leak(rig)


def test_the_environment_shows_its_names_never_its_values(rig: Rig) -> None:
    # A secret the kernel does not know stays in os.environ: inspect (no approval) and a
    # $`os.environ` in a chat cell name it and never send its value.
    rig.reset()
    setup = "%%python\nimport os, posix\nenv = os.environ\nnested = {'env': os.environb}"
    assert rig.cell(setup).status == "ok"
    results = rig.tools(
        Call("inspect", {"name": "os.environ"}, "e1"),
        Call("inspect", {"name": "os.environb"}, "e2"),
        Call("inspect", {"name": "posix.environ"}, "e3"),
        Call("inspect", {"name": "env"}, "e4"),
        Call("inspect", {"name": "nested"}, "e5"),
        Call("inspect", {}, "e6"),
    )
    for call in ("e1", "e2", "e3", "e4"):
        assert "JUPYTERHUB_API_TOKEN" in results[call], results[call]
    assert "<the process environment: " in results["e5"] and "env | os._Environ" in results["e6"]
    rig.a.push(text_reply("Those are the names."))
    ex = rig.cell("Which of these is set? $`os.environ`")
    assert ex.status == "ok", ex.content
    message = [m for m in rig.a.requests[-1].json["messages"] if m["role"] == "user"][-1]
    assert "JUPYTERHUB_API_TOKEN" in str(message["content"])
    journal_of(rig.k)  # flush
    for path in (p for p in rig.tmp.rglob("*") if p.is_file() and not p.is_symlink()):
        assert not leaks(path.read_bytes(), [HUB_TOKEN]), path
    for r in rig.a.requests:
        assert not leaks(r.body, [HUB_TOKEN])
    assert_no_leak(rig)


# --- item 2: a key goes only to its own provider's endpoint --------------------------------------


def test_each_key_goes_only_to_its_own_providers_endpoint(rig: Rig) -> None:
    rig.reset()
    a, b, c = rig.a, rig.servers["openai"], rig.servers["anthropic"]
    before = {p: len(s.requests) for p, s in rig.servers.items()}

    def chat(server: SseServer, reply: Any) -> None:
        server.push(reply)
        ex = rig.cell("Say hello.")
        assert ex.status == "ok", ex.content

    chat(a, text_reply("from the local server"))
    assert b.url in rig.cell("%agent provider openai").stdout
    chat(b, text_reply("from OpenAI's endpoint"))
    assert c.url in rig.cell("%agent model anthropic:claude-test").stdout
    chat(c, sse_reply(anthropic_text("from Anthropic's endpoint")))
    out = rig.cell("%agent provider deepseek").stdout  # no DEEPSEEK_BASE_URL: its own endpoint
    assert "https://api.deepseek.com" in out and a.url not in out, out
    status = rig.cell("%agent status").stdout
    assert "provider: deepseek (https://api.deepseek.com" in status and a.url not in status
    assert a.url in rig.cell("%agent provider openai-compatible").stdout
    rig.cell("%agent model another-local-model")  # a model switch within the provider keeps it
    chat(a, text_reply("the local server again"))
    sent = {p: s.requests[before[p] :] for p, s in rig.servers.items()}
    assert [r.json["model"] for r in sent["openai-compatible"]] == [
        "loopback-model",
        "another-local-model",
    ]
    assert [r.headers["authorization"] for r in sent["openai"]] == [
        f"Bearer {KEYS['OPENAI_API_KEY']}"
    ]
    assert [(r.path, r.headers["x-api-key"]) for r in sent["anthropic"]] == [
        ("/v1/messages", KEYS["ANTHROPIC_API_KEY"])
    ]
    assert {r.headers["authorization"] for r in sent["openai-compatible"]} == {
        f"Bearer {KEYS['DSH_API_KEY']}"
    }
    assert_no_leak(rig)


# --- item 9: a key cut short by a server's truncated echo -----------------------------------------


def test_an_echo_cut_at_120_or_300_characters_leaves_no_piece_of_the_key(rig: Rig) -> None:
    rig.reset()
    key = KEYS["DSH_API_KEY"]  # what the server was sent (and echoes)
    head = "<html><body>"
    page = head + "x" * (300 - len(head) - len("Bearer ") - 14) + f"Bearer {key} rejected</body>"
    assert page[:300].endswith(key[:14])  # our error text keeps 300 characters: the cut is inside
    payload = "{broken " + "y" * (120 - 8 - 14) + key  # a malformed payload is quoted to 120
    assert payload[:120].endswith(key[:14])
    rig.a.push(json_reply(401, page.encode()))
    ex = rig.cell("First echo.")
    assert ex.content["ename"] == "AUTH" and "[redacted]" in ex.content["evalue"], ex.content
    rig.a.push(sse_reply(sse(payload)))
    ex = rig.cell("Second echo.")
    assert ex.content["ename"] == "MALFORMED_RESPONSE", ex.content
    assert "[redacted]" in ex.content["evalue"]
    whole = f"slow down, {key}"  # a whole echo in a retried 429: in the llm/retry event
    rig.a.push(json_reply(429, {"error": {"message": whole}}, headers={"retry-after": "0.01"}))
    rig.a.push(text_reply("fine again"))
    assert rig.cell("Still working?").status == "ok"
    assert_no_leak(rig)


# --- everything at once, and a key typed at %agent key --------------------------------------------

REVEAL = """
import json, os, urllib.parse
keys = get_ipython().kernel.host.keys
for name in ("DEEPSEEK_API_KEY", "OPENAI_API_KEY", "ANTHROPIC_API_KEY", "DSH_API_KEY"):
    key = keys.get(name) or os.environ.get(name, "")
    print(name, key, repr(key), json.dumps({"k": key}), urllib.parse.quote(key), key[:12], key[-10:])
"""
"""Code the user approved runs with the user's authority and can read a key: what it prints is still
redacted wherever the kernel writes it, in every form it printed it."""

LOG_A_KEY = """%%python
import logging
_k = get_ipython().kernel.host.keys.get("DSH_API_KEY")
get_ipython().kernel.log.warning("dsh: the server said %s", _k)
logging.getLogger("dsh_kernel.llm").warning("a provider echoed %r", _k)
"""
"""Stands for a kernel module that logs an echoed key: the kernel's log handlers redact it."""


def test_a_typed_key_and_keys_that_approved_code_prints_are_never_written(rig: Rig) -> None:
    rig.reset()
    ex = with_input(rig.k, "%agent key openai-compatible", TYPED_KEY)
    rig.outputs.extend(ex.messages)
    assert "set for this kernel" in json.dumps(ex.messages, default=str)
    rig.a.push(text_reply("typed key in use"))
    assert rig.cell("Which key now?").status == "ok"
    assert rig.a.requests[-1].headers["authorization"] == f"Bearer {TYPED_KEY}"
    assert rig.cell("%agent approve auto").status == "ok"
    results = rig.tools(
        python_call(REVEAL, "p2"),
        Call("sql", {"sql": "SELECT type, data FROM events ORDER BY seq DESC LIMIT 50"}, "s2"),
    )
    assert results["p2"].count("[redacted]") >= 4 * 6, results["p2"]
    assert rig.cell("%agent approve ask").status == "ok"
    for code in (
        LOG_A_KEY,
        "%%sql\nSELECT type, data FROM events",
        f"%agent export --md {rig.tmp / 'export.md'}",
        f"%agent export --parquet {rig.tmp / 'export-parquet'}",
        "%agent status",
        "%agent sessions",
        "%agent cost",
    ):
        assert rig.cell(code).status == "ok", code
    files = assert_no_leak(rig)
    kinds = {p.suffix for p in rig.tmp.rglob("*") if p.is_file()}
    assert {".jsonl", ".duckdb", ".md", ".parquet", ".log", ".sqlite", ".json"} <= kinds, kinds
    requests = sum(len(s.requests) for s in rig.servers.values())
    FIGURES.append(
        f"secrets: 5 fake keys, 0 pieces of 8+ characters in {files} files and {requests} requests"
    )


# --- item 5: a key with a newline in it ------------------------------------------------------------

NEWLINE_KEY = "sk-first-line-Hx4Kq8Vm2\nsk-second-line-Jp7Wz3Rn6"


def test_a_key_with_a_newline_is_refused_and_never_written(
    tmp_path: Path, server: SseServer
) -> None:
    env = loopback_env(server, DSH_API_KEY=NEWLINE_KEY)
    outputs: list[dict[str, Any]] = []
    with launch(tmp_path, env=env) as k:
        server.push(text_reply("unreachable"))
        chat = k.execute("Hello?", timeout=120)
        typed = with_input(k, "%agent key openai-compatible", "sk-typed-Mw3Xc8\nrest-Bq5Zn1Lt")
        outputs += chat.messages + typed.messages
        journal_of(k)
    (tmp_path / "outputs.json").write_text(json.dumps(outputs, default=str), encoding="utf-8")
    bad = [*NEWLINE_KEY.split("\n"), "sk-typed-Mw3Xc8", "rest-Bq5Zn1Lt"]
    found = {
        str(p.relative_to(tmp_path)): hit
        for p in tmp_path.rglob("*")
        if p.is_file() and (hit := leaks(p.read_bytes(), bad))
    }
    assert found == {}, found
    assert chat.content["ename"] == "INVALID_CREDENTIAL", chat.content
    assert "DSH_API_KEY contains a control character" in chat.content["evalue"]
    assert server.requests == [], "a request went out with the malformed key"
    assert "control character" in json.dumps(typed.messages, default=str)
    assert "DSH_API_KEY contains a control character" in (tmp_path / "kernel.log").read_text()


# --- item 7: credentials inside a base URL ---------------------------------------------------------


@pytest.mark.parametrize(
    "credentials",
    [
        pytest.param(("me:Vb8Lq3Zx6Tn1Wk4@", ""), id="userinfo"),
        pytest.param(("", "?api_key=Hd2Ry7Pm5Cs9Gu3"), id="query"),
    ],
)
def test_credentials_in_the_base_url_are_refused_and_never_printed(
    tmp_path: Path, server: SseServer, credentials: tuple[str, str]
) -> None:
    userinfo, query = credentials
    secret = (userinfo.split(":")[1].rstrip("@") if userinfo else query.split("=")[1]).encode()
    plain = server.url
    url = plain.replace("http://", f"http://{userinfo}") + "/" + query
    refused: list[Execution] = []
    with launch(tmp_path, env=loopback_env(server, DSH_BASE_URL=url)) as k:
        server.push(text_reply("sent to a URL with credentials"))
        for code in ("Hello?", "%agent status", "%agent provider openai-compatible"):
            refused.append(k.execute(code))
        sent = list(server.requests)
        # the kernel is fine: with the URL fixed, the agent works
        assert k.execute(f"%env DSH_BASE_URL={plain}").status == "ok"
        server.push(text_reply("now it works"))
        fixed = k.execute("Hello again?")
        journal_of(k)
    outputs = [m for ex in [*refused, fixed] for m in ex.messages]
    (tmp_path / "outputs.json").write_text(json.dumps(outputs, default=str), encoding="utf-8")
    found = [
        str(p.relative_to(tmp_path))
        for p in tmp_path.rglob("*")
        if p.is_file() and secret in p.read_bytes()
    ]
    assert found == [], f"the URL's credentials were written to {found}"
    assert sent == [], "a request went to a URL with credentials in it"
    for ex in refused:
        text = json.dumps(ex.messages, default=str)
        assert "has credentials in it" in text and "DSH_API_KEY" in text, text
        assert "Traceback" not in text
    assert fixed.status == "ok", fixed.content
    assert server.requests[-1].headers["authorization"].startswith("Bearer ")
