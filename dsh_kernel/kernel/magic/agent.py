"""``%agent``: the one line magic for the agent.

Every subcommand is logged as ``command/run`` + ``command/done`` (standalone events; never sent to
the model). Keys typed at ``%agent key`` go to an in-memory store only: never to the log, the store,
the notebook or the kernel's log. What a subcommand prints, and the error of a failed one, pass
through the redactor (``dsh_kernel.llm.secrets``), as the log does.

**A failed command fails its cell** (so Run All stops there, before a chat cell could reach the
wrong model): the magic raises a ``CommandError`` whose ``ename`` is the stable code —
``UNKNOWN_COMMAND``, ``USAGE``, the store's ``SESSION_NOT_FOUND`` / ``SESSION_AMBIGUOUS`` /
``SESSION_LIVE``, ``OS_ERROR`` for a file that cannot be written, ``INTERNAL`` for a bug of ours —
and whose ``evalue`` is ``%agent <subcommand>: <what was wrong and what to do>``; the traceback is
that one line.

**Session ids** are taken whole or as a unique prefix (the 8 characters a footer shows; the store's
``find_journal``); a prefix two sessions share fails with ``SESSION_AMBIGUOUS``. ``%agent resume``
with no id resumes this notebook's most recently active session with a turn.

**Arguments** are split by ``kernel.magic.args.split_args`` (shell-like, but forgiving of free text).

``%agent compact`` waits for a model's summary, which a line magic cannot: the kernel runs a cell
that is exactly that line itself (``kernel.magic.compact``); the magic takes ``%agent compact on|off``.
"""

from __future__ import annotations

import getpass
import logging
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from IPython.core.error import StdinNotImplementedError
from IPython.core.magic import Magics, line_magic, magics_class

from dsh_kernel.errors import DshError, StoreError, UsageError, command_error
from dsh_kernel.ids import new_command_id
from dsh_kernel.kernel.magic.args import split_args
from dsh_kernel.llm.secrets import redact
from dsh_kernel.session.payloads import CommandDone, CommandRun, payload_of

if TYPE_CHECKING:
    from dsh_kernel.kernel.host.agent_host import AgentHost
    from dsh_kernel.store.layout import Store

_log = logging.getLogger(__name__)

_HINTS = {
    "SESSION_NOT_FOUND": "`%agent sessions` lists the stored sessions",
    "SESSION_AMBIGUOUS": "give more of the id (`%agent sessions` lists them)",
}
"""What to do, added to a failed command's message by its code."""

HELP = """\
%agent — control the notebook agent

  %agent status                  provider, model, session, tokens, images, approval policy, store,
                                 the AI policy in force and where it came from, and whether
                                 this cell's frontend has the notebook extension
  %agent model <id|provider:id>  switch the model (and provider) for the next request
  %agent provider <name>         switch provider: deepseek, openai, anthropic, openai-compatible, offline
  %agent reasoning [<effort>|default]
                                 the reasoning effort (off, low, high, … as the model takes);
                                 with none, the effort in force and the model's choices
  %agent context [N|default]     the model's context window in tokens (none: it and its source)
  %agent compact [on|off]        summarise older turns now (in a cell of its own), or switch
                                 the automatic compaction when the window fills up
  %agent key <provider>          type an API key (hidden; kept in memory only)
  %agent approve ask|auto|never [tool]
                                 approval for tools that change things (default: ask)
  %agent tools                   the tools the agent can call, with their approval mode
  %agent tools off|on <name>     stop offering a tool to the agent (or offer it again)
  %agent tools lean|full|auto    the tool descriptions' form (auto: lean for windows under 16k)
  %agent mcp                     the MCP servers: state, tools, last error, log file
  %agent mcp add NAME <command> [args…] | <url> | <JSON entry>
                                 add an MCP server for this session (docs/mcp.md)
  %agent mcp remove|restart NAME stop offering a server's tools, or start it again
  %agent mcp reload|allow        read the mcp.json files again; start a project file's servers
  %agent new                     start a new session (the old one stays in the store)
  %agent sessions                sessions in the store (title, created, notebook, turns, tokens, cost)
  %agent resume [session-id]     continue a stored session (an id or its first characters;
                                 with none, this notebook's latest session)
  %agent fork <turn>             a new session with this session's turns up to <turn>
  %agent history                 the current branch, turn by turn: its cell and prompt
                                 (re-running a chat cell branches: docs/rewind.md)
  %agent replay <session-id>|<notebook.ipynb>
                                 answer from a recorded session (deterministic, offline; an id
                                 or its first characters, or the conversation a notebook carries)
  %agent search <text>           search messages, tool arguments and results in the store
  %agent export [--parquet|--md] [--force] [path]
                                 export sessions as Parquet, or this session as Markdown
                                 (--force replaces an earlier export at that path)
  %agent title <text>            name this session
  %agent cost                    tokens and cost of this session
  %agent help                    this text

Cells: in a DSH Agent notebook a plain cell is a message; %%python (or %%py) runs Python and
%%sql queries the session store. In a DSH Python notebook a plain cell is Python and %%chat
sends a message. In a message, $`x` inserts a description of the variable x and &`f` offers
the function f to the agent as a tool.
"""


STATUS_ORDER = (
    "provider",
    "model",
    "context_window",
    "session",
    "context",
    "compaction",
    "rewind",
    "capsule",
    "reasoning",
    "temperature",
    "vision",
    "approval",
    "tools",
    "mcp",
    "store",
    "ai_policy",
    "notebook",
    "budget_tokens",
    "shared_store",
    "warning",
)
"""The lines of ``%agent status``, in order: a setting's by its name (``kernel.configuration``), the
others by their label."""


@magics_class
class AgentMagics(Magics):
    """The ``%agent`` line magic and its subcommands, over the kernel's agent host."""

    def __init__(
        self,
        shell: Any,
        *,
        host: Callable[[], AgentHost],
        client_session: Callable[[], str | None] = lambda: None,
    ) -> None:
        """``host``: the kernel's agent host, built on first use (it raises ``DshError`` for a
        configuration it refuses). ``client_session``: the running request's client session (its
        header's ``session``), for ``%agent status``'s ``notebook:`` line."""
        super().__init__(shell)
        self._host = host
        self._client_session = client_session
        self._line = ""
        """The running command's line as typed (``%agent mcp add`` takes JSON or a command)."""

    @line_magic
    def agent(self, line: str) -> None:
        """Control the notebook agent. `%agent help` lists the subcommands."""
        words = split_args(line)
        self._line = line
        if not words or words[0] in ("help", "-h", "--help"):
            print(HELP)
            return
        name, args = words[0], words[1:]
        handler: Callable[[list[str]], str] | None = getattr(self, f"_cmd_{name}", None)
        if handler is None:
            raise command_error(
                "UNKNOWN_COMMAND",
                f"%agent: unknown subcommand {name!r}; the subcommands are "
                f"{', '.join(subcommands())} (`%agent help` explains them)",
            )
        try:
            host = self._host()
        except DshError as exc:  # the configuration was refused: its one line fails the cell
            raise command_error(exc.code, redact(f"%agent {name}: {exc.message}")) from exc
        agent = host.agent
        command_id = new_command_id()
        run = CommandRun(commandId=command_id, name=name, source={"kind": "user"})
        if args and name != "key":
            run["args"] = " ".join(args)
        logged = agent.status == "idle"
        if logged:
            agent.session.append("command/run", run)
        try:
            text = handler(args)
        except Exception as exc:
            code, message = _failure(exc)
            if not isinstance(exc, DshError | OSError | StdinNotImplementedError):
                _log.exception("dsh: %%agent %s failed", name)
            if logged and host.agent is agent:
                self._done(command_id, "error", message)
            message = message.removeprefix(f"{name}: ")  # the store's errors name the command too
            hint = _HINTS.get(code)
            if hint and hint not in message:
                message = f"{message}; {hint}"
            raise command_error(code, redact(f"%agent {name}: {message}")) from exc
        if logged and host.agent is agent:
            self._done(command_id, "success", text)
        if text:
            print(redact(text))

    def _done(self, command_id: str, kind: str, text: str) -> None:
        data = CommandDone(commandId=command_id, kind=kind)
        if text:
            data["text"] = text[:2000]
        self._host().agent.session.append("command/done", data)

    # --- subcommands ------------------------------------------------------------------------------

    def _cmd_status(self, args: list[str]) -> str:
        from dsh_kernel.kernel.configuration import status_line, status_lines
        from dsh_kernel.kernel.magic.context import context_text

        host = self._host()
        agent = host.agent
        turns = agent.session.last_turn
        # The settings' lines first: the AI policy's re-reads the policy, which the tools line shows.
        lines = status_lines(host)
        lines["session"] = status_line(
            "session",
            f"{agent.session.id} ({turns} turn{'s' if turns != 1 else ''}, "
            f"{len(agent.session.events)} events)",
        )
        lines["context"] = status_line("context", context_text(host))
        lines["tools"] = status_line(
            "tools",
            f"{', '.join(agent.registry.names()) or 'none'}; "
            f"descriptions {host.toolset.form_text(agent)}",
        )
        from dsh_kernel.kernel.mcp import status_text

        mcp = status_text(host.mcp)
        if mcp:
            lines["mcp"] = status_line("mcp", mcp)
        if host.desk is not None:
            lines["notebook"] = status_line(
                "notebook", host.desk.status_text(self._client_session())
            )
        if host.store_warning:
            lines["warning"] = status_line("warning", host.store_warning)
        return "\n".join(lines[name] for name in STATUS_ORDER if name in lines)

    def _cmd_model(self, args: list[str]) -> str:
        if len(args) != 1:
            raise UsageError("usage: %agent model <model-id> or <provider>:<model-id>")
        spec = args[0]
        provider, sep, model = spec.partition(":")
        from dsh_kernel.llm.config import BUILTIN_PROVIDERS  # lazy: kernel start-up

        if sep and (provider in BUILTIN_PROVIDERS or provider == "offline"):
            return "now using " + self._host().switch_provider(provider, model)
        return "now using " + self._host().switch_model(spec)

    def _cmd_reasoning(self, args: list[str]) -> str:
        host = self._host()
        if not args:
            return "reasoning: " + host.reasoning_text()
        if len(args) != 1:
            raise UsageError(
                "usage: %agent reasoning [<effort>|default] (`%agent reasoning` lists the efforts "
                "this model takes)"
            )
        effort = None if args[0] == "default" else args[0]
        return "reasoning: " + host.set_reasoning(effort)

    def _cmd_context(self, args: list[str]) -> str:
        from dsh_kernel.kernel.magic.context import context_command

        return context_command(self._host(), args)

    def _cmd_compact(self, args: list[str]) -> str:
        from dsh_kernel.kernel.magic.compact import compact_command

        return compact_command(self._host(), args)

    def _cmd_provider(self, args: list[str]) -> str:
        if len(args) != 1:
            raise UsageError(
                "usage: %agent provider <deepseek|openai|anthropic|openai-compatible|offline>"
            )
        return "now using " + self._host().switch_provider(args[0])

    def _cmd_key(self, args: list[str]) -> str:
        from dsh_kernel.llm.config import BUILTIN_PROVIDERS  # lazy: kernel start-up

        if len(args) != 1 or args[0] not in BUILTIN_PROVIDERS:
            raise UsageError(f"usage: %agent key <{'|'.join(sorted(BUILTIN_PROVIDERS))}>")
        config = BUILTIN_PROVIDERS[args[0]]
        env = config.api_key_env or ""
        key = getpass.getpass(f"API key for {args[0]} ({env}; kept in memory only): ").strip()
        if not key:
            raise UsageError("no key entered; nothing changed")
        self._host().keys.set(env, key)
        return f"key for {args[0]} set for this kernel (memory only; `%agent provider {args[0]}` to use it)"

    def _cmd_approve(self, args: list[str]) -> str:
        if not args or args[0] not in ("ask", "auto", "never") or len(args) > 2:
            raise UsageError("usage: %agent approve ask|auto|never [tool]")
        mode = args[0]
        tool = args[1] if len(args) == 2 else None
        host = self._host()
        if tool is not None and host.agent.registry.get(tool) is None:
            raise UsageError(
                f"no tool named {tool!r}; tools: {', '.join(host.agent.registry.names())}"
            )
        host.set_approval(mode, tool)
        from dsh_kernel.kernel.configuration import approval_text

        return "approval: " + approval_text(host.agent.approval_policy)

    def _cmd_tools(self, args: list[str]) -> str:
        host = self._host()
        agent = host.agent
        done = host.toolset.command(agent, args)
        if done is not None:
            return done
        rows: list[str] = []
        for defn in agent.registry.definitions():
            mode = agent.approval_policy.mode_for(defn.name, read_only=defn.read_only)
            first = defn.description.strip().splitlines()[0] if defn.description.strip() else ""
            rows.append(f"  {defn.name:<12} {mode:<6} {first}")
        off = sorted(host.toolset.off)
        return (
            "tools (name, approval, description):\n"
            + "\n".join(rows)
            + (f"\nswitched off: {', '.join(off)} (`%agent tools on <name>`)" if off else "")
            + f"\ndescriptions: {host.toolset.form_text(agent)}"
            + host.toolset.named_only_text(agent)
        )

    def _cmd_mcp(self, args: list[str]) -> str:
        import re

        mcp = self._host().mcp
        if mcp is None:
            raise UsageError("MCP is not available in this kernel (the kernel log says why)")
        rest = ""
        if args[:1] == ["add"]:
            found = re.match(r"\s*mcp\s+add\s+\S+\s*(.*)$", self._line, re.DOTALL)
            rest = found.group(1) if found else ""
        done = mcp.command(args, rest)
        return done if done is not None else "\n".join(mcp.lines())

    def _cmd_new(self, args: list[str]) -> str:
        agent = self._host().new_session()
        return f"new session {agent.session.id}"

    # --- the store ----------------------------------------------------------------------------------

    def _store(self) -> Store:
        host = self._host()
        if host.store is None:
            raise UsageError(host.store_warning or "no session store is configured (set DSH_STORE)")
        host.flush()
        return host.store

    def _cmd_sessions(self, args: list[str]) -> str:
        from dsh_kernel.store.sessions import list_sessions

        host = self._host()
        rows = list_sessions(self._store(), live=[host.journal] if host.journal else [])
        if not rows:
            return "no sessions in the store yet"
        lines = [
            f"{'session':<36}  {'created (UTC)':<16}  turns  tokens    cost      title · notebook"
        ]
        for r in rows:
            cost = f"${r.cost:.4f}" if r.cost is not None else "-"
            where = " · ".join(part for part in (r.title, r.notebook) if part)
            mark = " (this session)" if r.id == host.agent.session.id else ""
            lines.append(
                f"{r.id:<36}  {r.created:%Y-%m-%d %H:%M}  {r.turns:>5}  {r.total_tokens:>8,}  "
                f"{cost:<8}  {where}{mark}"
            )
        return "\n".join(lines)

    def _cmd_resume(self, args: list[str]) -> str:
        from dsh_kernel.store.sessions import latest_notebook_session, resume

        if len(args) > 1:
            raise UsageError(
                "usage: %agent resume [session-id] (an id or its first characters, see %agent "
                "sessions; with none, this notebook's latest session)"
            )
        host = self._host()
        current = host.agent.session.id
        store = self._store()
        if not args:
            if host.notebook is None:
                raise UsageError(
                    "this kernel was not told its notebook's path (JPY_SESSION_NAME is unset), so "
                    "give a session id: %agent resume <id> (see %agent sessions)"
                )
            live = [host.journal] if host.journal else []
            latest = latest_notebook_session(store, host.notebook, exclude=current, live=live)
            if latest is None:
                raise StoreError(
                    f"resume: no earlier session of {host.notebook} with a turn in the store",
                    code="SESSION_NOT_FOUND",
                )
            session_id = latest.id
        elif current.startswith(args[0]) and not _names_other(store, args[0], current):
            # Its journal is held open by this kernel; loading it again would look like another
            # process holding it. Nothing to do: new messages already continue it.
            return (
                f"session {current} is this kernel's current session already; new messages "
                "continue it"
            )
        else:
            session_id = store.resolve_id(args[0])
        session = resume(store, session_id)
        agent = host.new_session(session)
        return (
            f"resumed session {agent.session.id}: {agent.session.last_turn} turns; new messages "
            "continue it"
        )

    def _cmd_fork(self, args: list[str]) -> str:
        from dsh_kernel.store.sessions import fork

        if len(args) != 1 or not args[0].isdigit():
            raise UsageError(
                "usage: %agent fork <turn> (a new session with turns 1..turn of this one)"
            )
        host = self._host()
        old = host.agent.session
        session = fork(
            old.header,
            list(old.events),
            int(args[0]),
            user=host.settings.course.user,
            ai_policy=host.policy.in_force().policy,
        )
        agent = host.new_session(session)
        return f"forked session {agent.session.id} from {old.id} at turn {args[0]}"

    def _cmd_history(self, args: list[str]) -> str:
        from dsh_kernel.kernel.rewind import history_text

        if args:
            raise UsageError("usage: %agent history (the current branch, turn by turn)")
        return history_text(self._host().agent.session)

    def _cmd_replay(self, args: list[str]) -> str:
        from dsh_kernel.kernel.course.policy import refuse_if_off
        from dsh_kernel.store.replay import ReplayProvider

        if len(args) != 1:
            raise UsageError("usage: %agent replay <session-id>|<notebook.ipynb>")
        host = self._host()
        refuse_if_off(host, advise=True)
        if args[0].endswith(".ipynb"):  # the conversation a notebook file's capsules carry
            return self._replay_notebook(host, Path(args[0]).expanduser())
        store = self._store()
        try:
            recorded = store.resolve_id(args[0])
        except StoreError as exc:
            from dsh_kernel.kernel.capsules import replay_from_notebook

            found = replay_from_notebook(host, args[0]) if exc.code == "SESSION_NOT_FOUND" else None
            if found is None:
                raise
            provider, recorded, model = found  # the notebook's own capsules carry it
        else:
            provider = ReplayProvider.from_store(store, recorded)
            model = _recorded_model(store, recorded) or "replay"
        agent = host.new_session()
        agent.set_route(provider=provider, model=model)
        host.provider_note = (
            f"replay of session {recorded} ({len(provider.attempts)} recorded model calls)"
        )
        # The new session's id is left out: it changes on every run, and a replayed notebook must
        # save the same output every time (``%agent status`` names it).
        return (
            f"answering from the recording of {recorded} in a new session (`%agent status` "
            "shows its id); run the notebook's chat cells in order"
        )

    def _replay_notebook(self, host: AgentHost, path: Path) -> str:
        """``%agent replay NOTEBOOK.ipynb``: answer from the conversation its capsules carry."""
        from dsh_kernel.kernel.capsules import replay_from_notebook

        if not path.is_file():
            raise UsageError(f"no notebook at {path}: name a saved .ipynb (or a session id)")
        found = replay_from_notebook(host, None, path)
        if found is None:
            raise UsageError(
                f"{path} carries no conversation to replay: its chat cells' outputs hold no "
                "capsules (saved with DSH_CAPSULE=off, stripped, or cleared)"
            )
        provider, recorded, model = found
        agent = host.new_session()
        agent.set_route(provider=provider, model=model)
        host.provider_note = (
            f"replay of session {recorded} from {path.name} "
            f"({len(provider.attempts)} recorded model calls)"
        )
        return (
            f"answering from the recording of {recorded} that {path.name} carries, in a new "
            "session (`%agent status` shows its id); run the notebook's chat cells in order"
        )

    def _cmd_search(self, args: list[str]) -> str:
        from dsh_kernel.store.sessions import search

        if not args:
            raise UsageError("usage: %agent search <text>")
        host = self._host()
        result = search(self._store(), " ".join(args), live=[host.journal] if host.journal else [])
        return result.to_text(limit=50)

    def _cmd_export(self, args: list[str]) -> str:
        from dsh_kernel.store.sessions import export_parquet, write_markdown

        usage = "usage: %agent export [--parquet|--md] [--force] [path]"
        host = self._host()
        flags = [a for a in args if a.startswith("--")]
        rest = [a for a in args if not a.startswith("--")]
        unknown = [f for f in flags if f not in ("--md", "--parquet", "--force")]
        if unknown or len(rest) > 1 or ("--md" in flags and "--parquet" in flags):
            raise UsageError(usage)
        force = "--force" in flags
        if "--parquet" in flags:
            out = export_parquet(self._store(), rest[0] if rest else "dsh-export", force=force)
            return (
                f"exported every session as Parquet under {out} (partitioned by date and session)"
            )
        session = host.agent.session
        path = rest[0] if rest else f"dsh-session-{session.id[:8]}.md"
        written = write_markdown(path, list(session.events), session.header, force=force)
        return f"wrote this session's transcript to {written.describe()}"

    def _cmd_title(self, args: list[str]) -> str:
        from dsh_kernel.store.sessions import set_title

        if not args:
            raise UsageError("usage: %agent title <text>")
        set_title(self._host().agent.session, " ".join(args))
        return f"title set: {' '.join(args)}"

    def _cmd_cost(self, args: list[str]) -> str:
        from dsh_kernel.session.usage import usage_totals

        host = self._host()
        agent = host.agent
        info = host.model_info(agent.provider.id, agent.model)
        return "this session: " + usage_totals(agent.session.events).describe(info)


def subcommands() -> list[str]:
    """The subcommand names (every ``_cmd_<name>`` handler, and ``help``), sorted."""
    return sorted(
        [n.removeprefix("_cmd_") for n in dir(AgentMagics) if n.startswith("_cmd_")] + ["help"]
    )


def _failure(exc: Exception) -> tuple[str, str]:
    """The code and message a failed subcommand reports."""
    if isinstance(exc, DshError):
        return exc.code, exc.message
    if isinstance(exc, StdinNotImplementedError):
        return "USAGE", (
            "this frontend cannot ask for input (a headless run?); set the key's environment "
            "variable before starting Jupyter instead"
        )
    if isinstance(exc, OSError):
        where = f": {exc.filename}" if exc.filename else ""
        return "OS_ERROR", f"{exc.strerror or exc}{where}"
    return "INTERNAL", (
        f"dsh-kernel failed ({type(exc).__name__}: {exc}); the kernel log has the traceback — "
        "please report it"
    )


def _names_other(store: Store, prefix: str, current: str) -> bool:
    """Whether ``prefix`` also names a stored session other than ``current`` (the current session
    may have no journal yet; it is written at its first turn)."""
    try:
        return store.resolve_id(prefix) != current
    except StoreError as exc:
        return exc.code == "SESSION_AMBIGUOUS"


def _recorded_model(store: Store, session_id: str) -> str | None:
    """The model the recording talked to (its first ``request/context``), for the footer."""
    from dsh_kernel.store.journal import read_session

    for ev in read_session(store.find_journal(session_id)).events:
        if ev.type == "request/context":
            return payload_of(ev, "request/context")["model"]
    return None
