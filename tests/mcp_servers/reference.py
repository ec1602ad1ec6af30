"""The reference MCP servers' cache: three real MCP servers nobody on this project wrote.

``mcp-server-time``, ``mcp-server-git`` and ``mcp-server-fetch`` (the Model Context Protocol
project's reference servers, from the package index, ``PINS``) are installed with pip into a
virtualenv of their own, so they bring the ``mcp`` they declare whatever the kernel's venv holds.
``python -m tests.mcp_servers.reference`` (what ``make mcp-servers`` runs, and before it ``make
test`` and ``make test-fast``; standard library only, so any Python 3.11+ runs it) makes the cache
complete and verified and prints where everything is. The cache directory is
``$DSH_MCP_CACHE``, else ``$XDG_CACHE_HOME/dsh-kernel/mcp``, else ``~/.cache/dsh-kernel/mcp``::

    venv/        the three servers and their dependencies (about 100 MB)
    state.json   what was installed and verified: the pins, the venv's ``pip freeze``, and each
                 server's ``initialize`` answer and tools (name, input schema, annotations)
    .lock        held while a run checks or builds, so two runs never build at once

Contract:

- Idempotent and fast: with ``state.json`` naming the pinned versions, the venv's interpreter
  present, each console script there and each package's ``.dist-info`` of the pinned version in
  the venv, a run starts nothing and installs nothing (a few milliseconds). ``--verify`` starts
  each server again as after an install.
- After an install each server is started with its test arguments (``ReferenceServers.argv``)
  and must answer ``initialize`` and ``tools/list`` over stdio (newline-delimited JSON-RPC,
  spoken here with the standard library) with at least the tools of ``EXPECTED_TOOLS``; otherwise
  the run stops with one line and no ``state.json`` is written, so nothing half-verified is used.
- ``reference_servers()`` is the reader the tests use; it never installs, and when the cache is
  missing it raises ``CacheError`` naming the command that builds it.

What the servers need here, and what they offer (the versions of ``PINS``; all three are built on
the ``mcp`` SDK's ``MCPServer``, serve stdio only, and answer both the handshake era,
``initialize`` at 2025-11-25, and the 2026-07-28 era that ``mcp.Client``'s default ``mode="auto"``
negotiates; every tool's result is ``content`` text, and ``mcp-server-time``'s also carries
``structuredContent`` with an ``outputSchema``):

- ``mcp-server-time [--local-timezone IANA]``: no argument is required. Without
  ``--local-timezone`` it takes the machine's zone (tzlocal; ``Etc/UTC`` here) and only names it
  in the tools' argument descriptions; the tests pass ``--local-timezone UTC`` so the listing
  does not depend on the machine. An unknown zone exits at start with one line. Tools, both
  ``readOnlyHint: true``:
  ``get_current_time {timezone: str}`` (required; an IANA name; an unknown one is an
  ``isError`` result "Invalid timezone: …") → ``{timezone, datetime (ISO 8601, seconds),
  day_of_week, is_dst}``; ``convert_time {source_timezone: str, time: "HH:MM",
  target_timezone: str}`` (all required) → ``{source, target, time_difference}``.
- ``mcp-server-git [--repository PATH] [-v]``: ``--repository`` is optional and only confines
  the tools to that repository (a ``repo_path`` outside it is an ``isError`` result); every tool
  still takes ``repo_path: str`` (required). It needs the ``git`` program (GitPython). Tools:
  ``git_status``, ``git_diff_unstaged`` / ``git_diff_staged`` ``{repo_path, context_lines=3}``,
  ``git_diff {repo_path, target, context_lines=3}``, ``git_commit {repo_path, message}``,
  ``git_add {repo_path, files: [str] (≥1)}``, ``git_reset`` (``destructiveHint: true``),
  ``git_log {repo_path, max_count=10, start_timestamp?, end_timestamp?}`` → text
  ``"Commit history:\\n"`` then per commit ``Commit: <sha>``, ``Author:``, ``Date:``,
  ``Message: <message>`` (newest first), ``git_create_branch {repo_path, branch_name,
  base_branch?}``, ``git_checkout {repo_path, branch_name}``, ``git_show {repo_path, revision}``,
  ``git_branch {repo_path, branch_type: "local"|"remote"|"all", contains?, not_contains?}``.
  ``git_status``, the diffs, ``git_log``, ``git_show`` and ``git_branch`` are
  ``readOnlyHint: true``; the others false.
- ``mcp-server-fetch [--ignore-robots-txt] [--allow-private-ips] [--user-agent UA]
  [--proxy-url URL]``: by default it refuses any URL whose host resolves to a loopback, private,
  link-local or other special-purpose address (127.0.0.0/8 included), on the first request and on
  every redirect hop, with an ``isError`` result "Refused to fetch … Start the server with
  --allow-private-ips …"; ``--allow-private-ips`` lifts that, so a loopback page needs it. Without
  ``--ignore-robots-txt`` it first fetches the origin's ``/robots.txt`` (a 4xx other than 401/403
  allows the fetch). Its httpx client honours ``HTTP_PROXY``/``HTTPS_PROXY``/``ALL_PROXY`` from
  its environment. One tool, ``readOnlyHint: true``, ``openWorldHint: true``:
  ``fetch {url: str (uri), max_length: int = 5000 (1…999999), start_index: int = 0,
  raw: bool = false}`` → ``"Contents of <url>:\\n"`` and the page as Markdown (readability, then
  markdownify; ``raw`` gives the HTML), with a note to call again with a ``start_index`` when cut.
  It also has a ``fetch`` prompt.
"""

from __future__ import annotations

import argparse
import fcntl
import json
import os
import queue
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

PINS: dict[str, tuple[str, str]] = {
    "time": ("mcp-server-time", "2026.10.19"),
    "git": ("mcp-server-git", "2026.10.19"),
    "fetch": ("mcp-server-fetch", "2026.10.24"),
}
"""Each server's key → (distribution, version): the newest on the package index when pinned.
Changing a version here rebuilds the cache on the next run."""

EXPECTED_TOOLS: dict[str, frozenset[str]] = {
    "time": frozenset({"get_current_time", "convert_time"}),
    "git": frozenset({"git_log", "git_status", "git_show"}),
    "fetch": frozenset({"fetch"}),
}
"""Tools a server must list for the cache to be trusted (it may list more)."""

PROTOCOL_VERSION = "2025-11-25"
"""What the verification's ``initialize`` offers: the newest handshake-era revision."""

START_TIMEOUT = 120.0
"""Seconds a server may take to answer each verification request (a loaded 2-core machine)."""


class CacheError(RuntimeError):
    """The cache cannot be made or trusted; the message is the one line to show."""


# ---------------------------------------------------------------------------------------------------
# Where things are


def cache_dir() -> Path:
    """``$DSH_MCP_CACHE``, else ``$XDG_CACHE_HOME/dsh-kernel/mcp``, else ``~/.cache/…``."""
    if explicit := os.environ.get("DSH_MCP_CACHE"):
        return Path(explicit).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base).expanduser() / "dsh-kernel" / "mcp"


BUILD_COMMAND = "make mcp-servers"
"""What a missing cache's message tells to run (``python -m tests.mcp_servers.reference`` too)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ReferenceServers:
    """The installed cache, as the tests use it: each server's console script and what it lists."""

    root: Path
    venv: Path
    time: Path
    """``<venv>/bin/mcp-server-time``."""
    git: Path
    """``<venv>/bin/mcp-server-git``."""
    fetch: Path
    """``<venv>/bin/mcp-server-fetch``."""
    versions: dict[str, str]
    """``"time"`` / ``"git"`` / ``"fetch"`` → the installed version."""
    tools: dict[str, tuple[str, ...]]
    """``"time"`` / ``"git"`` / ``"fetch"`` → the tool names the server listed when verified."""

    def time_argv(self, local_timezone: str = "UTC") -> list[str]:
        """``mcp-server-time --local-timezone ZONE``."""
        return [str(self.time), "--local-timezone", local_timezone]

    def git_argv(self, repository: Path | None = None) -> list[str]:
        """``mcp-server-git [--repository PATH]`` (the tools still take ``repo_path``)."""
        return [str(self.git), *(["--repository", str(repository)] if repository else [])]

    def fetch_argv(self) -> list[str]:
        """``mcp-server-fetch --ignore-robots-txt --allow-private-ips``: what a loopback page needs."""
        return [str(self.fetch), "--ignore-robots-txt", "--allow-private-ips"]

    def argv(self, key: str) -> list[str]:
        """The command line the tests run server ``key`` with (the one verified at install)."""
        if key == "time":
            return self.time_argv()
        if key == "git":
            return self.git_argv()
        if key == "fetch":
            return self.fetch_argv()
        raise KeyError(key)


def _scripts(venv: Path) -> dict[str, Path]:
    return {key: venv / "bin" / dist for key, (dist, _) in PINS.items()}


def _installed(venv: Path) -> bool:
    """The venv's interpreter runs (its symlink resolves), each console script is there, and each
    pinned version's ``.dist-info`` is in its site-packages."""
    if not (venv / "bin" / "python").exists():
        return False
    if not all(p.exists() for p in _scripts(venv).values()):
        return False
    site = list((venv / "lib").glob("python3*/site-packages"))
    return len(site) == 1 and all(
        (site[0] / f"{dist.replace('-', '_')}-{version}.dist-info").is_dir()
        for dist, version in PINS.values()
    )


def _wanted() -> dict[str, str]:
    return {dist: version for dist, version in PINS.values()}


def reference_servers(root: Path | None = None) -> ReferenceServers:
    """The cache if it was installed and verified; raises ``CacheError`` naming the command that
    builds it. Never installs."""
    root = root or cache_dir()
    state = _read_state(root)
    venv = root / "venv"
    if state is None or state.get("pins") != _wanted() or not _installed(venv):
        raise CacheError(
            f"the reference MCP servers are not installed at {root} (or not the pinned versions): "
            f"run `{BUILD_COMMAND}` (or `python -m tests.mcp_servers.reference`) first"
        )
    scripts = _scripts(venv)
    servers = state.get("servers")
    listed = servers if isinstance(servers, dict) else {}
    return ReferenceServers(
        root=root,
        venv=venv,
        time=scripts["time"],
        git=scripts["git"],
        fetch=scripts["fetch"],
        versions={key: version for key, (_, version) in PINS.items()},
        tools={key: tuple(sorted(listed.get(key, {}).get("tools", {}))) for key in PINS},
    )


# ---------------------------------------------------------------------------------------------------
# Speaking MCP over stdio, with the standard library


class _StdioPeer:
    """A server process spoken to in newline-delimited JSON-RPC (MCP's stdio transport)."""

    def __init__(self, argv: list[str], stderr: IO[bytes]) -> None:
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
        self.argv = argv
        self.proc = subprocess.Popen(
            argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr, env=env
        )
        self.lines: queue.Queue[bytes] = queue.Queue()
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line)
        self.lines.put(b"")

    def send(self, message: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(message).encode() + b"\n")
        self.proc.stdin.flush()

    def request(self, request_id: int, method: str, params: dict[str, Any]) -> dict[str, Any]:
        """Send a request and return its ``result``; other messages in between are skipped."""
        self.send({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params})
        deadline = time.monotonic() + START_TIMEOUT
        while True:
            try:
                line = self.lines.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                raise CacheError(f"{method}: no answer within {START_TIMEOUT:.0f} s") from None
            if not line:
                raise CacheError(f"{method}: the server exited ({self.proc.wait()}) first")
            try:
                message = json.loads(line)
            except ValueError:
                raise CacheError(f"{method}: not JSON-RPC on stdout: {line[:200]!r}") from None
            if isinstance(message, dict) and message.get("id") == request_id:
                if "error" in message:
                    raise CacheError(f"{method}: the server answered an error: {message['error']}")
                result = message.get("result")
                if not isinstance(result, dict):
                    raise CacheError(f"{method}: the answer has no result object: {message}")
                return result

    def close(self) -> None:
        """Close stdin (how an MCP stdio server is told to stop), then wait; kill if it lingers."""
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        try:
            self.proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=15)


def handshake(argv: list[str]) -> dict[str, Any]:
    """Start the server ``argv``, do the MCP handshake and list its tools; returns what it said:
    ``protocolVersion``, ``serverInfo`` and ``tools`` (name → input schema and annotations)."""
    with tempfile.TemporaryFile() as stderr:
        peer = _StdioPeer(argv, stderr)
        try:
            init = peer.request(
                1,
                "initialize",
                {
                    "protocolVersion": PROTOCOL_VERSION,
                    "capabilities": {},
                    "clientInfo": {"name": "dsh-kernel-tests", "version": "0"},
                },
            )
            peer.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
            tools: dict[str, Any] = {}
            cursor: str | None = None
            for request_id in range(2, 22):  # a paginated listing, at most 20 pages
                page = peer.request(request_id, "tools/list", {"cursor": cursor} if cursor else {})
                for tool in page.get("tools", []):
                    tools[tool["name"]] = {
                        "inputSchema": tool.get("inputSchema"),
                        "annotations": tool.get("annotations"),
                        "hasOutputSchema": "outputSchema" in tool,
                    }
                cursor = page.get("nextCursor")
                if not cursor:
                    break
        except CacheError as e:
            stderr.seek(0)
            tail = " | ".join(stderr.read().decode(errors="replace").strip().splitlines()[-5:])
            raise CacheError(f"{Path(argv[0]).name}: {e}; its stderr: {tail or '(empty)'}") from e
        finally:
            peer.close()
    return {
        "protocolVersion": init.get("protocolVersion"),
        "serverInfo": init.get("serverInfo"),
        "tools": tools,
    }


# ---------------------------------------------------------------------------------------------------
# Installing


def _log(msg: str) -> None:
    print(f"[mcp-servers] {msg}", file=sys.stderr, flush=True)


def _run(cmd: list[str], *, what: str) -> str:
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        tail = "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-15:])
        raise CacheError(f"{what} failed (exit {proc.returncode}): {tail}")
    return proc.stdout


def _read_state(root: Path) -> dict[str, Any] | None:
    try:
        state = json.loads((root / "state.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return state if isinstance(state, dict) else None


@contextmanager
def _locked(root: Path) -> Iterator[None]:
    with (root / ".lock").open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _install(root: Path) -> None:
    venv = root / "venv"
    shutil.rmtree(venv, ignore_errors=True)
    _log(f"creating the venv at {venv}")
    _run([sys.executable, "-m", "venv", str(venv)], what="python -m venv")
    specs = [f"{dist}=={version}" for dist, version in PINS.values()]
    _log(f"installing {' '.join(specs)}")
    started = time.monotonic()
    _run(
        [str(venv / "bin" / "python"), "-m", "pip", "install", "-q", *specs],
        what="pip install " + " ".join(specs),
    )
    _log(f"installed in {time.monotonic() - started:.0f} s")
    if not _installed(venv):
        raise CacheError(f"pip install finished but {venv} lacks a pinned server or its script")


def _verify(root: Path) -> dict[str, Any]:
    """Handshake with each server; returns what each said (``handshake``)."""
    scripts = _scripts(root / "venv")
    paths = ReferenceServers(
        root=root,
        venv=root / "venv",
        time=scripts["time"],
        git=scripts["git"],
        fetch=scripts["fetch"],
        versions={},
        tools={},
    )
    said: dict[str, Any] = {}
    for key in PINS:
        _log(f"checking {PINS[key][0]} speaks MCP")
        said[key] = handshake(paths.argv(key))
        if missing := EXPECTED_TOOLS[key] - set(said[key]["tools"]):
            raise CacheError(
                f"{PINS[key][0]} does not list {', '.join(sorted(missing))} "
                f"(it lists {', '.join(sorted(said[key]['tools']))})"
            )
    return said


def ensure(root: Path | None = None, *, verify: bool = False) -> ReferenceServers:
    """Make the cache complete and verified (see the module docstring); returns the reader's view."""
    root = root or cache_dir()
    root.mkdir(parents=True, exist_ok=True)
    with _locked(root):
        state = _read_state(root)
        current = state is not None and state.get("pins") == _wanted()
        if current and _installed(root / "venv") and not verify:
            return reference_servers(root)
        (root / "state.json").unlink(missing_ok=True)
        if not (current and _installed(root / "venv")):
            _install(root)
        servers = _verify(root)
        python = root / "venv" / "bin" / "python"
        state = {
            "pins": _wanted(),
            "python": _run(
                [str(python), "-c", "import sys; print(sys.version.split()[0])"], what="python"
            ).strip(),
            "packages": sorted(
                _run([str(python), "-m", "pip", "freeze"], what="pip freeze").splitlines()
            ),
            "servers": servers,
            "verified": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        }
        partial = root / "state.json.part"
        partial.write_text(json.dumps(state, indent=2) + "\n", encoding="utf-8")
        partial.replace(root / "state.json")
    return reference_servers(root)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n", 1)[0])
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--check", action="store_true", help="only report; install nothing")
    mode.add_argument(
        "--verify", action="store_true", help="start each server again even if the cache is there"
    )
    args = parser.parse_args(argv)
    try:
        servers = reference_servers() if args.check else ensure(verify=args.verify)
    except CacheError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    print(
        json.dumps(
            {
                "root": str(servers.root),
                "commands": {key: servers.argv(key) for key in PINS},
                "versions": servers.versions,
                "tools": servers.tools,
            },
            indent=2,
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
