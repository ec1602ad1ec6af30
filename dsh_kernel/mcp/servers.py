"""``McpServers``: the kernel's MCP servers — configured, started, listed, and offered as tools.

Made once per kernel at start (``from_settings``): the configuration files are found
(``mcp.config``) and every server starts in the background (``McpServer``). A project's file — one
found in the notebook's directory or its parents — may come with a repository someone else wrote,
and a stdio server is a command: its servers start only once the user allows that file
(``%agent mcp allow``), remembered by the file's path and content hash in ``<store>/mcp/allowed.json``
(an edited file asks again). Files from the Jupyter config path, the file named by
``c.DshKernel.mcp_config`` and servers added with ``%agent mcp add`` are the user's own and start
at once.

``wait_ready(seconds)`` is what a chat cell awaits before its turn: the servers still starting, at
most that long; it returns the names not ready (the turn goes without their tools, and later
requests include them once they are). ``sync(agent, policy)`` makes ``agent``'s registry offer the
ready servers' tools (``mcp.tools``) — under ``explain`` only the read-only-hinted tools of servers
the course trusts (``trusted``), under ``off`` nothing — and is called again whenever a server's
state or tool list changes, so a step's request always carries the current set. A tool whose name or
input schema changed since this kernel last offered it loses an "Always allow" given to it.

``command(args)`` carries out ``%agent mcp [add|remove|reload|restart|allow] …``; ``lines()`` is the
listing (state, tools, last error, log file).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import os
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from dsh_kernel.errors import UsageError
from dsh_kernel.jsonvalue import JsonObject, JsonValue
from dsh_kernel.mcp.config import (
    REFERENCE,
    McpConfigError,
    ServerEntry,
    config_files,
    entry_from_text,
    load_servers,
)
from dsh_kernel.mcp.server import McpServer
from dsh_kernel.mcp.tools import CallLimits, fingerprint, tool_definitions
from dsh_kernel.runtime.image_reduce import ImageCaps
from dsh_kernel.tools.types import ToolDefinition

if TYPE_CHECKING:
    from dsh_kernel.agent.agent import Agent

MAX_TOOLS_PER_SERVER: Final = 128
"""The most tools one server may offer (more are listed, not offered; each is in every request)."""

USAGE: Final = (
    "usage: %agent mcp [add NAME <command> [args…] | add NAME <url> | add NAME <JSON> | "
    "remove NAME | reload | restart NAME | allow]"
)

_log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class _Waiting:
    """A project file not allowed yet: its entries and its content hash, as listed."""

    entries: list[ServerEntry]
    digest: str


@dataclass(slots=True)
class _Offer:
    """What one agent's registry carries of MCP now (its disposers) and what it was offered."""

    agent: Agent
    policy: Callable[[], str]
    images: ImageCaps
    disposers: list[Callable[[], None]] = field(default_factory=lambda: list[Callable[[], None]]())
    names: frozenset[str] = frozenset()
    by_server: dict[str, int] = field(default_factory=dict[str, int])
    """How many tools of each server are offered."""


class McpServers:
    """See the module docstring."""

    def __init__(
        self,
        *,
        notebook_dir: Path,
        jupyter_dirs: Sequence[Path],
        explicit: str,
        state_dir: Path,
        limits: CallLimits,
        trusted: frozenset[str] = frozenset(),
        add_secret: Callable[[str], None] = lambda _s: None,
    ) -> None:
        self.notebook_dir = notebook_dir
        self.jupyter_dirs = tuple(d for d in jupyter_dirs if str(d).strip() and d.is_absolute())
        """Only absolute ones: ``""`` or ``.`` in ``JUPYTER_CONFIG_PATH`` would make the notebook's
        folder (a project's file) the user's own."""
        self.explicit = explicit
        self.state_dir = state_dir
        self.limits = limits
        self.trusted = trusted
        self._add_secret = add_secret
        self.servers: dict[str, McpServer] = {}
        self.problems: list[str] = []
        """Files that could not be read at all (one line each)."""
        self.files: list[Path] = []
        self.waiting: dict[Path, _Waiting] = {}
        """Project files not allowed yet: what they say and their content hash when listed."""
        self.added: dict[str, ServerEntry] = {}
        """Servers added with ``%agent mcp add`` this session (kept over ``reload``)."""
        self.removed: set[str] = set()
        self._offer: _Offer | None = None
        self._fingerprints: dict[str, str] = {}
        self._made: dict[
            str, tuple[tuple[JsonObject, ...], ImageCaps, bool, list[ToolDefinition]]
        ] = {}

    # -- configuration ----------------------------------------------------------------------------

    def _entries(self) -> dict[str, ServerEntry]:
        self.problems = []
        self.waiting = {}
        try:
            files = config_files(self.notebook_dir, self.jupyter_dirs, self.explicit)
        except McpConfigError as exc:
            self.problems.append(exc.message)
            files = []
        self.files = files
        allowed = self._allowed()
        usable: list[Path] = []
        for path in files:
            digest = _digest(path)
            if self._is_project(path) and allowed.get(str(path)) != digest:
                try:
                    entries = list(load_servers([path])[0].values())
                except Exception:
                    entries = []
                if entries:
                    self.waiting[path] = _Waiting(entries=entries, digest=digest)
                continue
            usable.append(path)
        entries, problems = load_servers(usable)
        self.problems += problems
        for name in self.removed:
            entries.pop(name, None)
        entries.update(self.added)
        return entries

    def _is_project(self, path: Path) -> bool:
        """Found in the notebook's folder or a parent (and not the file named explicitly)."""
        if self.explicit.strip() and path == Path(self.explicit.strip()).expanduser().resolve():
            return False
        here = self.notebook_dir.resolve()
        return path.parent in (here, *here.parents) and not any(
            path.parent == Path(d).absolute() for d in self.jupyter_dirs
        )

    def _allowed(self) -> dict[str, str]:
        try:
            data: JsonValue = json.loads((self.state_dir / "allowed.json").read_text("utf-8"))
        except (OSError, ValueError):
            return {}
        return {k: str(v) for k, v in data.items()} if isinstance(data, dict) else {}

    def allow(self) -> list[Path]:
        """Allow the waiting project files as they were listed; ``command`` then starts them. A file
        changed since it was listed, or one another user could have written (not yours, or
        writable by others), is refused with its line (``McpConfigError``)."""
        for path, waiting in self.waiting.items():
            if _digest(path) != waiting.digest:
                raise McpConfigError(
                    f"{path} changed since it was listed; run `%agent mcp` to see it as it is now"
                )
            problem = _foreign(path)
            if problem:
                raise McpConfigError(f"{path} {problem}: not allowed (move or fix it first)")
        allowed = self._allowed()
        done = list(self.waiting)
        for path in done:
            allowed[str(path)] = self.waiting[path].digest
        self.state_dir.mkdir(parents=True, exist_ok=True)
        target = self.state_dir / "allowed.json"
        tmp = target.with_suffix(".tmp")
        tmp.write_text(json.dumps(allowed, indent=1, sort_keys=True), "utf-8")
        os.replace(tmp, target)
        return done

    # -- life -------------------------------------------------------------------------------------

    def start(self) -> None:
        """Read the configuration and start every usable server in the background."""
        for name, entry in self._entries().items():
            self._launch(name, entry)

    def _launch(self, name: str, entry: ServerEntry) -> McpServer:
        server = McpServer(
            entry,
            log_dir=self.state_dir / "logs",
            on_change=self._changed,
            add_secret=self._add_secret,
        )
        self.servers[name] = server
        server.start()
        return server

    async def stop(self) -> None:
        servers, self.servers = list(self.servers.values()), {}
        await asyncio.gather(*(s.stop() for s in servers), return_exceptions=True)

    @property
    def starting(self) -> list[str]:
        return [n for n, s in self.servers.items() if not s.settled.is_set()]

    async def wait_ready(self, seconds: float, stop: asyncio.Event | None = None) -> list[str]:
        """Wait (at most ``seconds``, or until ``stop`` is set) for the servers still starting;
        the names still not ready."""
        pending = [s.settled.wait() for s in self.servers.values() if not s.settled.is_set()]
        if pending:
            every = asyncio.gather(*pending)
            stopped = asyncio.ensure_future((stop or asyncio.Event()).wait())
            try:
                await asyncio.wait(
                    {every, stopped}, timeout=seconds, return_when=asyncio.FIRST_COMPLETED
                )
            finally:
                every.cancel()
                stopped.cancel()
        return self.starting

    # -- the agent's tools ------------------------------------------------------------------------

    def follow(self, agent: Agent, policy: Callable[[], str], images: ImageCaps) -> None:
        """Offer the MCP tools to ``agent`` from now on (the kernel's agent: one at a time), under
        the AI policy ``policy()`` says, with images reduced to ``images``."""
        old = self._offer
        if old is not None:
            for dispose in old.disposers:
                dispose()
        self._offer = _Offer(agent=agent, policy=policy, images=images)
        self.sync()

    def sync(self) -> None:
        """Make the followed agent's registry carry the current tools (module docstring)."""
        offer = self._offer
        if offer is None:
            return
        for dispose in offer.disposers:
            dispose()
        offer.disposers = []
        offer.by_server = {}
        policy = offer.policy()
        names: set[str] = set()
        if policy != "off":
            for server in self.servers.values():
                if server.state != "ready":
                    continue
                if policy == "explain":
                    # the course's trust is for its own configuration, not a notebook's folder
                    allowed = server.name in self.trusted and not self._is_project(
                        Path(server.entry.source)
                    )
                else:
                    allowed = server.entry.trust == "read-only-hints"
                try:
                    defns = self._definitions(server, offer.images, allowed)
                except Exception as exc:  # one server's odd listing spoils only that server
                    _log.warning(
                        "dsh: MCP server %s: tools not offered", server.name, exc_info=True
                    )
                    server.last_error = f"its tools could not be offered: {exc}"
                    continue
                for defn in defns:
                    if policy == "explain" and not defn.read_only:
                        continue
                    self._recheck(
                        offer.agent, defn.name, fingerprint(defn, server.entry.describe())
                    )
                    try:
                        offer.disposers.append(offer.agent.registry.register(defn))
                    except UsageError as exc:
                        server.last_error = f"tool {defn.name!r} not offered: {exc.message}"
                        continue
                    names.add(defn.name)
                    offer.by_server[server.name] = offer.by_server.get(server.name, 0) + 1
        offer.names = frozenset(names)

    def _definitions(
        self, server: McpServer, images: ImageCaps, allowed: bool
    ) -> list[ToolDefinition]:
        """``server``'s definitions, made once per listing (and per images/trust), the first
        ``MAX_TOOLS_PER_SERVER`` of them."""
        cached = self._made.get(server.name)
        if cached is not None and cached[0] is server.tools and cached[1:3] == (images, allowed):
            return cached[3]
        listed = server.tools
        if len(listed) > MAX_TOOLS_PER_SERVER:
            server.last_error = (
                f"it lists {len(listed)} tools; only the first {MAX_TOOLS_PER_SERVER} are offered"
            )
            server.tools = listed[:MAX_TOOLS_PER_SERVER]
        try:
            made = tool_definitions(
                server, images=images, limits=self.limits, read_only_allowed=allowed
            )
        finally:
            server.tools = listed
        self._made[server.name] = (listed, images, allowed, made)
        return made

    def _recheck(self, agent: Agent, name: str, print_: str) -> None:
        before = self._fingerprints.get(name)
        self._fingerprints[name] = print_
        if before not in (None, print_) and agent.approval_policy.tools.get(name) == "auto":
            agent.forget_approval(name, "mcp-tool-changed")
            _log.info("dsh: MCP tool %s changed; it asks for approval again", name)

    @property
    def offered(self) -> frozenset[str]:
        return self._offer.names if self._offer is not None else frozenset()

    def _changed(self, server: McpServer) -> None:
        if self.servers.get(server.name) is server:
            self.sync()

    # -- %agent mcp -------------------------------------------------------------------------------

    def command(self, args: list[str], rest: str = "") -> str | None:
        """``%agent mcp <args>`` (``rest``: the text after ``add NAME``); ``None``: the listing."""
        if not args:
            return None
        match args[0]:
            case "add" if len(args) >= 2:
                name = args[1]
                if self._offer is not None and self._offer.policy() in ("explain", "off"):
                    raise UsageError(
                        "the course's AI policy in force does not let a notebook add MCP servers "
                        "(the course configuration names them)"
                    )
                entry = entry_from_text(name, rest)
                self._replace(name, entry)
                self.added[name] = entry
                self.removed.discard(name)
                return f"MCP server {name} added for this session ({entry.describe()}); starting"
            case "remove" if len(args) == 2:
                name = args[1]
                server = self.servers.pop(name, None)
                if server is None:
                    raise self._unknown(name)
                _later(server.stop())
                self.added.pop(name, None)
                self.removed.add(name)
                self.sync()
                return (
                    f"MCP server {name} removed for this session (its tools are no longer offered)"
                )
            case "restart" if len(args) == 2:
                name = args[1]
                server = self.servers.get(name)
                if server is None:
                    raise self._unknown(name)
                self._replace(name, server.entry)
                return f"MCP server {name} restarting"
            case "reload" if len(args) == 1:
                self._stop_all()
                self.start()
                return f"MCP configuration read again: {len(self.servers)} server(s) starting"
            case "allow" if len(args) == 1:
                if not self.waiting:
                    return "no project MCP configuration is waiting to be allowed"
                files = self.allow()
                self._stop_all()
                self.start()
                return "allowed " + ", ".join(str(f) for f in files) + "; its servers are starting"
            case _:
                raise UsageError(USAGE)

    def _replace(self, name: str, entry: ServerEntry) -> None:
        old = self.servers.pop(name, None)
        if old is not None:
            _later(old.stop())
        self._launch(name, entry)
        self.sync()

    def _stop_all(self) -> None:
        servers, self.servers = list(self.servers.values()), {}
        for server in servers:
            _later(server.stop())
        self.sync()

    def _unknown(self, name: str) -> UsageError:
        for path, waiting in self.waiting.items():
            if any(e.name == name for e in waiting.entries):
                return UsageError(
                    f"MCP server {name!r} is in {path}, which waits for `%agent mcp allow`"
                )
        return UsageError(
            f"no MCP server named {name!r}; servers: " + (", ".join(sorted(self.servers)) or "none")
        )

    def lines(self) -> list[str]:
        """The listing of ``%agent mcp``."""
        out: list[str] = []
        if not self.servers and not self.waiting and not self.problems:
            where = ", ".join(str(Path(d) / "mcp.json") for d in self.jupyter_dirs[:1])
            out.append(
                "no MCP servers configured: put an mcp.json (the mcpServers shape) in the "
                f"notebook's folder or a parent, or in {where} — or `%agent mcp add NAME <command>` "
                "(docs/mcp.md)"
            )
        by_server = self._offer.by_server if self._offer is not None else {}
        for name in sorted(self.servers):
            s = self.servers[name]
            tools = [t.get("name") for t in s.tools]
            shown = by_server.get(name, 0)
            line = f"{name}: {s.state} — {s.entry.describe()}; trust {s.entry.trust}"
            if s.state == "ready":
                line += f"; {len(tools)} tool(s), {shown} offered: " + ", ".join(
                    str(t) for t in tools[:20]
                )
                if len(tools) > 20:
                    line += f", … ({len(tools) - 20} more)"
            if s.last_error:
                line += f"\n    last error: {s.last_error}"
            if s.entry.transport == "stdio":
                line += f"\n    log: {s.log_path}"
            line += f"\n    from: {s.entry.source}"
            out.append(line)
        for path, waiting in self.waiting.items():
            names = ", ".join(e.name for e in waiting.entries)
            lines = [
                f"{path} (a project file) names {names}: not started until you allow it — "
                "`%agent mcp allow` (a stdio server is a command run on this machine, as you):"
            ]
            for e in waiting.entries:
                refs = sorted(
                    {
                        r
                        for v in (*e.env.values(), *e.headers.values())
                        for r in REFERENCE.findall(v)
                    }
                )
                given = f"; gets ${{{'}, ${'.join(refs)}}}" if refs else ""
                lines.append(f"    {e.name}: {e.describe()}{given}")
            problem = _foreign(path)
            if problem:
                lines.append(f"    (cannot be allowed: {problem})")
            out.append("\n".join(lines))
        out += self.problems
        return out


_pending: set[asyncio.Future[None]] = set()


def _later(stopping: Coroutine[Any, Any, None]) -> None:
    """Run a server's stop in the background (a line magic cannot await it)."""
    task = asyncio.ensure_future(stopping)
    _pending.add(task)
    task.add_done_callback(_pending.discard)


def _foreign(path: Path) -> str | None:
    """Why a project file may be someone else's (not ours, or writable by others), else ``None``."""
    if not hasattr(os, "getuid"):
        return None  # Windows: no owner check here
    try:
        for target in (path, path.parent):
            st = target.stat()
            if st.st_uid != os.getuid():
                return f"({target} belongs to another user)"
            if target == path and st.st_mode & 0o022:
                return "is writable by other users"
    except OSError as exc:
        return f"cannot be checked ({exc.strerror})"
    return None


def _digest(path: Path) -> str:
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        return ""
