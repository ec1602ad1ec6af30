"""Where MCP servers are configured, and what an entry may say.

Files, nearer first (a server named in a nearer file replaces the whole entry of a farther one)::

    c.DshKernel.mcp_config / DSH_MCP_CONFIG     a file named explicitly (must exist)
    <notebook dir>/mcp.json, .mcp.json          then each parent directory up to the root (a project)
    <Jupyter config dir>/mcp.json               each directory of ``jupyter --paths`` config, in its
                                                order: the user's, then the environment's, then the
                                                system's (a course image puts one in /etc/jupyter)

A file is the ``mcpServers`` shape Claude Desktop, Cursor and Claude Code use (VS Code's ``servers``
key is read too)::

    {"mcpServers": {
        "time": {"command": "uvx", "args": ["mcp-server-time"]},
        "github": {"url": "https://example.org/mcp",
                   "headers": {"Authorization": "Bearer ${GITHUB_TOKEN}"},
                   "trust": "read-only-hints"}}}

An entry: ``command`` (+ ``args``, ``env``, ``cwd``: a stdio server) or ``url`` (+ ``headers``: a
streamable-HTTP server); ``type`` may say ``stdio`` or ``http`` (``streamable-http``); ``sse`` is not
supported (the deprecated transport) and says so. ``trust``: ``ask`` (default: every tool asks for
approval) or ``read-only-hints`` (a tool the server annotates ``readOnlyHint: true`` runs like our
read-only tools). ``disabled: true`` switches a farther file's server off. ``timeout``: seconds a call
may go without any message from the server (progress resets it; default the kernel's
``mcp_idle_timeout``). Other keys (``autoApprove``, ``alwaysAllow`` of other clients) are ignored:
nothing in a file approves a call.

Secrets are never written in a file: ``env`` and ``headers`` values refer to environment variables
with ``${NAME}`` (also ``${env:NAME}``, VS Code's spelling), anywhere in the value; they are resolved
when the server starts, from the kernel's environment, and every resolved value is added to the
redactor (``llm.secrets``). A value under a name that looks like a credential (``*KEY*``,
``*TOKEN*``, ``*SECRET*``, ``*PASSWORD*``, ``Authorization``, …) written literally is refused, and so
is a reference to a provider's key or endpoint variable (``llm.secrets.KEY_VARIABLES``,
``WATCHED_URLS``) and a ``url`` carrying a credential: the kernel never hands a server its keys.
Only absolute Jupyter config directories are read (``""`` or ``.`` in ``JUPYTER_CONFIG_PATH`` would
be the notebook's folder). A stdio server's environment is the SDK's small safe set (``PATH``,
``HOME``, …) plus its ``env`` — but it runs as the user, and can read what the user can.

Every problem is one line naming the file, the server and what to do (``McpConfigError``); a bad
entry spoils only its own server (``ServerEntry.problem``), a file that is not JSON spoils that file.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final, Literal

from dsh_kernel.errors import UsageError
from dsh_kernel.jsonvalue import JsonObject, JsonValue

Transport = Literal["stdio", "http"]
Trust = Literal["ask", "read-only-hints"]
TRUSTS: Final = ("ask", "read-only-hints")

FILE_NAMES: Final = ("mcp.json", ".mcp.json")
"""The names looked for in the notebook's directory and its parents (the first found in each)."""

MAX_FILE_BYTES: Final = 1_000_000
SERVER_NAME: Final = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,47}$")
REFERENCE: Final = re.compile(r"\$\{(?:env:)?([A-Za-z_][A-Za-z0-9_]*)\}")
CREDENTIAL_WORDS: Final = frozenset(
    {
        "KEY",
        "APIKEY",
        "TOKEN",
        "SECRET",
        "PASSWORD",
        "PASSWD",
        "PWD",
        "CREDENTIAL",
        "CREDENTIALS",
        "COOKIE",
        "AUTHORIZATION",
        "BEARER",
        "PAT",
    }
)
"""A name with one of these words (``GITHUB_TOKEN``, ``X-Api-Key``, ``Authorization``) holds a
credential; ``GIT_AUTHOR_NAME`` does not."""


class McpConfigError(UsageError):
    """A configuration file or entry that cannot be used (its one line says which and why)."""

    code = "MCP_CONFIG"


@dataclass(frozen=True, slots=True, kw_only=True)
class ServerEntry:
    """One configured server, as its file says it (references not yet resolved)."""

    name: str
    source: str
    """The file it came from (or ``%agent mcp add``)."""
    transport: Transport = "stdio"
    command: str = ""
    args: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict[str, str])
    cwd: str | None = None
    url: str = ""
    headers: Mapping[str, str] = field(default_factory=dict[str, str])
    trust: Trust = "ask"
    disabled: bool = False
    timeout_s: float | None = None
    problem: str | None = None
    """Why this entry cannot start (it is listed with this line and never started)."""

    def describe(self) -> str:
        """``stdio: uvx mcp-server-time`` / ``http: https://…`` (never a header's value)."""
        if self.transport == "http":
            return f"http: {self.url}"
        return "stdio: " + " ".join((self.command, *self.args))


@dataclass(frozen=True, slots=True, kw_only=True)
class Resolved:
    """An entry's environment and headers with every ``${NAME}`` replaced (secrets: never log)."""

    env: Mapping[str, str]
    headers: Mapping[str, str]
    secrets: tuple[str, ...]
    """Every value a reference supplied (the caller adds them to the redactor)."""


def config_files(
    notebook_dir: Path, jupyter_dirs: Sequence[Path], explicit: str = ""
) -> list[Path]:
    """The configuration files in force, nearest first (module docstring). An explicit file that
    does not exist is a ``McpConfigError``."""
    found: list[Path] = []
    if explicit.strip():
        path = Path(explicit.strip()).expanduser()
        if not path.is_file():
            raise McpConfigError(
                f"the MCP configuration {str(path)!r} (c.DshKernel.mcp_config or DSH_MCP_CONFIG) "
                "does not exist: create it or unset the setting"
            )
        found.append(path.resolve())
    here = notebook_dir.resolve()
    for directory in (here, *here.parents):
        for name in FILE_NAMES:
            candidate = directory / name
            if candidate.is_file():
                found.append(candidate)
                break
    for directory in jupyter_dirs:
        if not str(directory).strip() or not Path(directory).is_absolute():
            continue  # "" or "." in JUPYTER_CONFIG_PATH would make a project's file the user's
        candidate = Path(directory) / "mcp.json"
        if candidate.is_file():
            found.append(candidate)  # as named: a mounted file may be a symlink elsewhere
    unique: list[Path] = []
    for path in found:
        if path not in unique:
            unique.append(path)
    return unique


def load_servers(files: Iterable[Path]) -> tuple[dict[str, ServerEntry], list[str]]:
    """The merged servers of ``files`` (nearest first: the first entry of a name wins) and one line
    for each file that could not be read at all."""
    servers: dict[str, ServerEntry] = {}
    problems: list[str] = []
    for path in files:
        try:
            entries = read_file(path)
        except McpConfigError as exc:
            problems.append(exc.message)
            continue
        for entry in entries:
            servers.setdefault(entry.name, entry)
    return {n: e for n, e in servers.items() if not e.disabled}, problems


def read_file(path: Path) -> list[ServerEntry]:
    """The entries of one file; ``McpConfigError`` when the file is not a configuration at all."""
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise McpConfigError(f"{path}: cannot be read ({exc.strerror or exc})") from exc
    if len(raw) > MAX_FILE_BYTES:
        raise McpConfigError(f"{path}: {len(raw):,} bytes is too large for an MCP configuration")
    try:
        doc: JsonValue = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        raise McpConfigError(f"{path}: not JSON ({exc}); fix the file") from exc
    return parse_document(doc, str(path))


def parse_document(doc: JsonValue, source: str) -> list[ServerEntry]:
    """The entries of a parsed file (``source`` names it in every line)."""
    if not isinstance(doc, dict):
        raise McpConfigError(f'{source}: expected an object with "mcpServers"')
    servers = doc.get("mcpServers", doc.get("servers"))
    if servers is None:
        raise McpConfigError(f'{source}: no "mcpServers" object')
    if not isinstance(servers, dict):
        raise McpConfigError(f'{source}: "mcpServers" must be an object of named servers')
    return [parse_entry(str(name), value, source) for name, value in servers.items()]


def parse_entry(name: str, value: JsonValue, source: str) -> ServerEntry:
    """One entry; a problem is kept on the entry (``problem``), never raised."""
    try:
        return _parse_entry(name, value, source)
    except McpConfigError as exc:
        return ServerEntry(name=name, source=source, problem=exc.message)


def _parse_entry(name: str, value: JsonValue, source: str) -> ServerEntry:
    where = f"{source}: server {name!r}"
    if not SERVER_NAME.match(name):
        raise McpConfigError(
            f"{where}: a server name is 1-48 letters, digits, '_', '-' or '.', starting with a "
            "letter or digit"
        )
    if not isinstance(value, dict):
        raise McpConfigError(f"{where}: expected an object with command or url")
    if value.get("disabled") is True:
        return ServerEntry(name=name, source=source, disabled=True)
    kind = value.get("type")
    url, command = value.get("url"), value.get("command")
    if kind in ("sse",):
        raise McpConfigError(
            f"{where}: the SSE transport is deprecated and not supported; use the server's "
            "streamable-HTTP endpoint (type http)"
        )
    if kind not in (None, "stdio", "http", "streamable-http", "streamableHttp"):
        raise McpConfigError(f"{where}: type {kind!r} is not stdio or http")
    trust = value.get("trust", "ask")
    if trust not in TRUSTS:
        raise McpConfigError(f"{where}: trust {trust!r} is not one of {', '.join(TRUSTS)}")
    timeout = value.get("timeout")
    if timeout is not None and (
        isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or timeout <= 0
    ):
        raise McpConfigError(f"{where}: timeout must be a positive number of seconds")
    common = {
        "name": name,
        "source": source,
        "trust": trust,
        "timeout_s": float(timeout) if timeout is not None else None,
    }
    if url is not None or kind in ("http", "streamable-http", "streamableHttp"):
        if not isinstance(url, str) or not url.startswith(("http://", "https://")):
            raise McpConfigError(f"{where}: url must be an http:// or https:// address")
        from dsh_kernel.llm.secrets import url_credentials

        if url_credentials(url):
            raise McpConfigError(
                f"{where}: the url carries a credential (a password or a token parameter); put it "
                'in a header that refers to an environment variable, e.g. "Authorization": '
                '"Bearer ${MY_TOKEN}"'
            )
        headers = _strings(value.get("headers"), f"{where}: headers")
        _no_literal_secrets(headers, f"{where}: headers")
        return ServerEntry(
            transport="http",
            url=url,
            headers=headers,
            **common,  # pyright: ignore[reportArgumentType]
        )
    if not isinstance(command, str) or not command.strip():
        raise McpConfigError(f"{where}: give a command (a stdio server) or a url (an HTTP server)")
    args = value.get("args", [])
    if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
        raise McpConfigError(f"{where}: args must be a list of strings")
    env = _strings(value.get("env"), f"{where}: env")
    _no_literal_secrets(env, f"{where}: env")
    cwd = value.get("cwd")
    if cwd is not None and not isinstance(cwd, str):
        raise McpConfigError(f"{where}: cwd must be a path")
    if cwd is not None and not Path(cwd).expanduser().is_absolute() and Path(source).is_file():
        cwd = str(Path(source).parent / cwd)
    return ServerEntry(
        transport="stdio",
        command=command.strip(),
        args=tuple(str(a) for a in args),
        env=env,
        cwd=cwd,
        **common,  # pyright: ignore[reportArgumentType]
    )


def _strings(value: JsonValue, where: str) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, dict) or not all(isinstance(v, str) for v in value.values()):
        raise McpConfigError(f"{where} must be an object of strings")
    return {str(k): str(v) for k, v in value.items()}


def _no_literal_secrets(values: Mapping[str, str], where: str) -> None:
    from dsh_kernel.llm.secrets import KEY_VARIABLES, WATCHED_URLS

    for key, text in values.items():
        for ref in REFERENCE.findall(text):
            if ref in KEY_VARIABLES.values() or ref in WATCHED_URLS:
                raise McpConfigError(
                    f"{where}.{key} refers to {ref}, a model provider's API key or endpoint: an MCP "
                    "server is never given the kernel's keys; give it its own variable"
                )
        if _credential_name(key) and text.strip() and not REFERENCE.search(text):
            raise McpConfigError(
                f"{where}.{key} is written in the file; refer to an environment variable "
                f'instead, e.g. "{key}": "${{{_variable_for(key)}}}" (secrets never go in mcp.json)'
            )


def _credential_name(key: str) -> bool:
    spaced = re.sub(r"([a-z0-9])([A-Z])", r"\1 \2", key)
    return any(w.upper() in CREDENTIAL_WORDS for w in re.split(r"[^A-Za-z0-9]+", spaced) if w)


def _variable_for(key: str) -> str:
    return re.sub(r"[^A-Za-z0-9]+", "_", key).strip("_").upper() or "TOKEN"


def resolve(entry: ServerEntry, environ: Mapping[str, str] | None = None) -> Resolved:
    """``entry``'s env and headers with every ``${NAME}`` replaced from ``environ`` (default
    ``os.environ``); a variable that is not set is a ``McpConfigError`` naming it."""
    environ = os.environ if environ is None else environ
    secrets: list[str] = []

    def one(text: str, where: str) -> str:
        def sub(match: re.Match[str]) -> str:
            name = match.group(1)
            value = environ.get(name)
            if value is None:
                raise McpConfigError(
                    f"{entry.source}: server {entry.name!r}: {where} needs the environment "
                    f"variable {name}, which is not set: set it before starting Jupyter"
                )
            secrets.append(value)
            return value

        return REFERENCE.sub(sub, text)

    env = {k: one(v, f"env.{k}") for k, v in entry.env.items()}
    headers = {k: one(v, f"headers.{k}") for k, v in entry.headers.items()}
    return Resolved(env=env, headers=headers, secrets=tuple(secrets))


def entry_from_text(name: str, text: str) -> ServerEntry:
    """``%agent mcp add NAME <json>`` or ``%agent mcp add NAME <command> [args…]`` / ``<url>``."""
    text = text.strip()
    source = "%agent mcp add"
    if not text:
        raise McpConfigError("usage: %agent mcp add NAME <command> [args…] | <url> | <JSON entry>")
    if text.startswith("{"):
        try:
            value = json.loads(text)
        except ValueError as exc:
            raise McpConfigError(f"the entry for {name!r} is not JSON ({exc})") from exc
        entry = parse_entry(name, value, source)
    elif text.startswith(("http://", "https://")):
        entry = parse_entry(name, {"url": text}, source)
    else:
        import shlex

        try:
            words = shlex.split(text)
        except ValueError as exc:
            raise McpConfigError(f"the command line for {name!r}: {exc}") from exc
        args: list[JsonValue] = list(words[1:])
        entry = parse_entry(name, {"command": words[0], "args": args}, source)
    if entry.problem is not None:
        raise McpConfigError(entry.problem)
    return entry


def as_json(entry: ServerEntry) -> JsonObject:
    """The entry as a file would say it (references unresolved: safe to show)."""
    out: JsonObject = {}
    if entry.transport == "http":
        out["url"] = entry.url
        if entry.headers:
            out["headers"] = dict(entry.headers)
    else:
        out["command"] = entry.command
        if entry.args:
            out["args"] = list(entry.args)
        if entry.env:
            out["env"] = dict(entry.env)
        if entry.cwd:
            out["cwd"] = entry.cwd
    if entry.trust != "ask":
        out["trust"] = entry.trust
    return out
