"""The kernel's settings, each declared once: ``SETTINGS``.

A ``Setting`` is one row: its name (the traitlet ``c.DshKernel.<name>`` and, for an agent setting,
the ``HostSettings`` field), its traitlet (type, default, help), its environment variable and the
parser that reads it, how the two combine, its ``%agent`` command and ``%agent status`` line, and
its row in docs/configuration.md. Everything else is generated from the table:

* ``traitlets()`` — the ``DshKernel`` class's configurable traits (``c.DshKernel.<name>``);
* ``settings_from_traits`` / ``settings_from_kernel`` — the ``HostSettings`` the agent runs with:
  each traitlet's value (checked, a bad one naming ``c.DshKernel.<name> = ``), then the environment
  over it where its variable is set (a bad one naming ``DSH_VISION=``), read when the agent is first
  built; the course's settings instead combine the two the stricter way (``kernel.course.config``),
  from the environment as it was at kernel start (``START_VARIABLES``, like the store's);
* ``status_lines`` — the settings' lines of ``%agent status`` (``label:  text``);
* ``render_table`` — the settings table of docs/configuration.md; ``python -m
  dsh_kernel.kernel.configuration [--check] [docs/configuration.md]`` rewrites it between its
  markers (or exits 1 when it is stale; the test suite checks it).

A bad value is a ``UsageError`` of one line naming where it came from; it surfaces when the agent is
first built (the first chat cell or ``%agent`` command), as the failure of that cell. The course's
settings fail closed instead (``course_settings_or_off``: chat is refused, the rest works).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, Literal

from traitlets import Bool, Enum, Float, HasTraits, Integer, TraitType, Unicode

if TYPE_CHECKING:
    from dsh_kernel.kernel.host.agent_host import AgentHost
    from dsh_kernel.kernel.host.settings import HostSettings
    from dsh_kernel.tools.approval import ApprovalPolicy

Combine = Literal["environment wins", "stricter", "lower"]
"""How a traitlet and its environment variable combine: the variable, when set, over the traitlet;
or, for a course's restrictions, the stricter policy / the lower budget of the two."""


@dataclass(frozen=True, slots=True, kw_only=True)
class StatusLine:
    """A setting's line in ``%agent status``: ``label`` and what it says now (``None``: no line)."""

    label: str
    text: Callable[[AgentHost], str | None]


@dataclass(frozen=True, slots=True, kw_only=True)
class Setting:
    """One setting (the module docstring)."""

    name: str
    """The traitlet ``c.DshKernel.<name>``; for an agent setting, the ``HostSettings`` field too."""
    what: str
    """What it is, in a few words: the docs table's first column."""
    trait: Callable[[], TraitType[Any, Any]]
    """Builds the traitlet, with its type and default (``help`` is added from ``help``)."""
    help: str
    """The traitlet's help (``--help-all``); the variable is named after it."""
    env: str | None = None
    """The ``DSH_*`` variable, if there is one."""
    parse: Callable[[str, str], object] | None = None
    """The variable's text (and where it came from, for the error) as the setting's value; ``None``:
    a text setting, taken without surrounding blanks."""
    check: Callable[[Any, str], object] | None = None
    """The traitlet's value (and ``c.DshKernel.<name> = ``) as the setting's value; ``None``: as is."""
    combine: Combine = "environment wins"
    host: bool = True
    """Whether the agent runs with it (a ``HostSettings`` field, or the course's settings)."""
    at_start: bool = False
    """Whether its variable is read when the kernel starts (not when the agent is first built)."""
    default: str
    """The default, as the docs say it."""
    command: str = "—"
    """The ``%agent`` command that changes it at run time (Markdown; ``—``: none)."""
    doc: str
    """Its meaning in docs/configuration.md (Markdown, one line)."""
    status: StatusLine | None = None

    def traitlet(self) -> TraitType[Any, Any]:
        """The ``DshKernel`` traitlet (configurable), its help naming the variable."""
        env = ""
        if self.env is not None:
            why = {
                "environment wins": "",
                "stricter": " (the stricter of the two wins)",
                "lower": " (the lower of the two wins)",
            }[self.combine]
            env = f" Env: {self.env}{why}."
        trait = self.trait()
        trait.help = self.help + env
        return trait.tag(config=True)

    def value(self, trait_value: object, env: Mapping[str, str]) -> object:
        """The setting in force: ``trait_value`` checked, then the variable's over it when set."""
        value = trait_value if self.check is None else self.check(trait_value, self.where_trait)
        raw = env.get(self.env, "") if self.env is not None else ""
        if raw.strip():
            value = raw.strip() if self.parse is None else self.parse(raw, f"{self.env}=")
        return value

    @property
    def where_trait(self) -> str:
        """How an error names the traitlet: ``c.DshKernel.<name> = ``."""
        return f"c.DshKernel.{self.name} = "


# The parsers and status texts, imported when a setting is first read: the kernel builds its
# traitlets from this table when it starts, and the agent stack would double its start-up time.


def _window(raw: str, where: str) -> int | None:
    from dsh_kernel.kernel.host.settings import parse_context_window

    return parse_context_window(raw, where)


def _switch(raw: str, where: str) -> bool:
    from dsh_kernel.kernel.host.settings import parse_compaction

    return parse_compaction(raw, where)


def _rewind(raw: str, where: str) -> bool:
    from dsh_kernel.kernel.host.settings import parse_rewind

    return parse_rewind(raw, where)


def _capsule(raw: str, where: str) -> bool:
    from dsh_kernel.kernel.host.settings import parse_capsule

    return parse_capsule(raw, where)


def _vision(raw: str, where: str) -> bool | None:
    from dsh_kernel.kernel.magic.vision import parse_vision

    return parse_vision(raw, where)


def _approval_timeout(raw: str, where: str) -> float | None:
    from dsh_kernel.kernel.host.settings import parse_approval_timeout

    return parse_approval_timeout(raw, where)


def _repeat_limit(raw: str, where: str) -> int:
    from dsh_kernel.kernel.host.settings import parse_repeat_limit

    return parse_repeat_limit(raw, where)


def _temperature(raw: str, where: str) -> float | None:
    from dsh_kernel.kernel.host.settings import parse_temperature

    return parse_temperature(raw, where)


def _seed(raw: str, where: str) -> int | None:
    from dsh_kernel.kernel.host.settings import parse_seed

    return parse_seed(raw, where)


def _sampling_text(host: AgentHost) -> str | None:
    """The ``%agent status`` line of the sampling settings, when either is set."""
    agent = host.agent
    parts = [
        f"{name} {value}"
        for name, value in (("temperature", agent.temperature), ("seed", agent.seed))
        if value is not None
    ]
    return ", ".join(parts) or None


def _seconds(raw: str, where: str) -> float:
    from dsh_kernel.kernel.host.settings import parse_seconds

    return parse_seconds(raw, where)


def _redraw_rate(raw: str, where: str) -> float:
    from dsh_kernel.kernel.host.settings import parse_redraw_rate

    return parse_redraw_rate(raw, where)


def _ai_policy(raw: str, where: str) -> str | None:
    from dsh_kernel.kernel.course.config import parse_ai_policy

    return parse_ai_policy(raw, where)


def _budget_tokens(raw: str, where: str) -> int | None:
    from dsh_kernel.kernel.course.config import parse_budget_tokens

    return parse_budget_tokens(raw, where)


def _budget_usd(raw: str, where: str) -> float | None:
    from dsh_kernel.kernel.course.config import parse_budget_usd

    return parse_budget_usd(raw, where)


def _window_text(host: AgentHost) -> str:
    from dsh_kernel.kernel.magic.context import window_text

    return window_text(host)


def _compaction_text(host: AgentHost) -> str:
    from dsh_kernel.kernel.magic.compact import compaction_text

    return compaction_text(host)


def _image(field: str, name: str, default: int) -> dict[str, Any]:
    """The traitlet, parser and check of the image limit ``field`` (``ImageCaps``; ``default`` is
    its default there, which a test pins)."""

    def parse(raw: str, where: str) -> int:
        from dsh_kernel.kernel.host.settings import parse_image_setting

        return parse_image_setting(field, raw, where)

    def check(value: int, where: str) -> int:
        from dsh_kernel.runtime.image_reduce import check_image_setting

        return check_image_setting(field, value, where)

    return {"name": name, "trait": lambda: Integer(default), "parse": parse, "check": check}


def _text_of(value: object) -> str:
    """A traitlet's value as its setting's text (``None``: not set)."""
    return "" if value is None else str(value)


def approval_text(policy: ApprovalPolicy) -> str:
    """The approval policy in force, in one line (``%agent status``, ``%agent approve``)."""
    per = ", ".join(f"{k}={v}" for k, v in sorted(policy.tools.items()))
    return f"{policy.default} for tools that change things; read-only tools run" + (
        f"; per tool: {per}" if per else ""
    )


SETTINGS: Final[tuple[Setting, ...]] = (
    Setting(
        name="default_cell",
        what="what a plain cell is",
        trait=lambda: Enum(["chat", "python"], default_value="chat"),
        help="What a plain cell is: 'chat' (kernelspec dsh) or 'python' (kernelspec dsh-python).",
        host=False,
        default="`chat`",
        command="— (choose the kernel instead)",
        doc="`chat` (kernelspec `dsh`) or `python` (kernelspec `dsh-python`, which is `dsh` plus "
        "`--DshKernel.default_cell=python`)",
    ),
    Setting(
        name="provider",
        what="provider",
        trait=lambda: Unicode(""),
        help="Provider id: deepseek, openai, anthropic, openai-compatible or offline.",
        env="DSH_PROVIDER",
        default="choose by keys",
        command="`%agent provider <name>`, `%agent model <provider:id>`",
        doc="a provider id ([Providers](#providers)) or `offline`",
        status=StatusLine(label="provider", text=lambda host: host.provider_note),
    ),
    Setting(
        name="model",
        what="model",
        trait=lambda: Unicode(""),
        help="Model id, or provider:model.",
        env="DSH_MODEL",
        default="the provider's default",
        command="`%agent model <id>`",
        doc="a model id; `provider:model` also picks the provider "
        "(`DSH_MODEL=anthropic:claude-sonnet-5-5`) and must agree with `DSH_PROVIDER` if both are set",
        status=StatusLine(
            label="model", text=lambda host: f"{host.agent.provider.id}:{host.agent.model}"
        ),
    ),
    Setting(
        name="base_url",
        what="endpoint",
        trait=lambda: Unicode(""),
        help="Base URL of an OpenAI-compatible server.",
        env="DSH_BASE_URL",
        default="the provider's endpoint",
        command="`%env DSH_BASE_URL=…` then `%agent provider …` ([Precedence](#precedence))",
        doc="the endpoint of the provider `DSH_PROVIDER` (or the `DSH_MODEL` prefix) names; set "
        "alone, it selects `openai-compatible`. It never follows a switch to another provider. A "
        "URL with credentials in it is refused ([Keys and secrets](#keys-and-secrets))",
    ),
    Setting(
        name="reasoning",
        what="reasoning effort",
        trait=lambda: Unicode(""),
        help="Reasoning effort, one the model takes (e.g. off, low, high); empty: the model's default.",
        env="DSH_REASONING",
        default="the model's default",
        command="`%agent reasoning <effort>\\|default`",
        doc="a reasoning effort the model takes ([Reasoning effort](#reasoning-effort)); one it "
        "does not take fails the first chat cell with `UNSUPPORTED_REASONING_EFFORT` naming the "
        "setting",
        status=StatusLine(label="reasoning", text=lambda host: host.reasoning_text()),
    ),
    Setting(
        name="context_window",
        what="context window",
        trait=lambda: Integer(0),
        help="The model's context window in tokens (0: the catalogue's, else asked of the server, "
        "else 4096 assumed).",
        env="DSH_CONTEXT_WINDOW",
        parse=_window,
        check=lambda value, where: _window(str(value or ""), where),
        default="not set (`0`)",
        command="`%agent context <tokens>\\|default`",
        doc="the model's context window in tokens, a whole number from 512 to 100,000,000 "
        "(`8192`, `32_768`), or `default`; anything else fails the first chat cell with `USAGE` "
        "naming the setting and the range ([Context window](#context-window))",
        status=StatusLine(label="window", text=_window_text),
    ),
    Setting(
        name="compaction",
        what="automatic compaction",
        trait=lambda: Bool(True),
        help="Compact the history automatically: older turns are summarised when a request would "
        "fill 80% of the context window, or when the server refuses one as too long (on/off).",
        env="DSH_COMPACTION",
        parse=_switch,
        default="on",
        command="`%agent compact on\\|off` (`%agent compact`: now, by hand)",
        doc="`on`: older turns are summarised when a request would fill 80 % of the window, or "
        "when the server refuses one as too long; `off`: never automatically (`%agent compact` "
        "still does it by hand). Also `true`/`false`, `1`/`0`; anything else fails the first chat "
        "cell with `USAGE` naming the variable ([Compaction](#compaction))",
        status=StatusLine(label="compaction", text=_compaction_text),
    ),
    Setting(
        name="rewind",
        what="rewind by re-running chat cells",
        trait=lambda: Bool(True),
        help="A notebook's chat cells are the conversation: re-running or editing an earlier chat "
        "cell re-asks from there (a new branch), deleting one takes its turn out (on/off).",
        env="DSH_REWIND",
        parse=_rewind,
        default="on",
        status=StatusLine(
            label="rewind",
            text=lambda host: (
                "on (re-running a chat cell re-asks from there)"
                if host.settings.rewind
                else "off (every chat cell appends)"
            ),
        ),
        doc="`on`: in a notebook (a request carrying a cell id) the context of a chat cell's turn "
        "is the turns of the chat cells above it; re-running or editing an earlier chat cell "
        "re-asks from there on a new branch (a session forked before its turn), deleting one "
        "takes its turn out ([Rewind](rewind.md)); `off`: every chat cell appends. Also "
        "`true`/`false`, `1`/`0`; anything else fails the first chat cell with `USAGE` naming "
        "the variable",
    ),
    Setting(
        name="capsule",
        what="session capsules in saved notebooks",
        trait=lambda: Bool(True),
        help="A chat cell's saved output carries its turn's events (the session capsule), so a "
        "shared notebook carries its conversation (on/off).",
        env="DSH_CAPSULE",
        parse=_capsule,
        default="on",
        status=StatusLine(
            label="capsule",
            text=lambda host: (
                "on (saved chat outputs carry their turns)"
                if host.settings.capsule
                else "off (saved chat outputs are the rendering only)"
            ),
        ),
        doc="`on`: each chat cell's saved output carries its turn — the messages, tool calls and "
        "results, usage — in its metadata, so the notebook carries the conversation "
        "([Capsules](capsule.md)); `off`: only the rendering (`dsh-kernel strip` removes "
        "capsules already saved). Also `true`/`false`, `1`/`0`; anything else fails the first "
        "chat cell with `USAGE` naming the variable",
    ),
    Setting(
        name="repeat_limit",
        what="repeated-call guard",
        trait=lambda: Integer(2),
        help="How many identical tool calls (same tool, same arguments) with an identical result "
        "may run in a row before the next one is not run (0: no limit).",
        env="DSH_REPEAT_LIMIT",
        parse=_repeat_limit,
        check=lambda value, where: _repeat_limit(str(value), where),
        default="2",
        doc="how many identical tool calls (same tool, same arguments) with an identical result "
        "run in a row in one turn; the next is not run — the model is told it already has the "
        "result — and if it asks once more the turn ends with a notice instead of running to the "
        "step bound ([Repeated tool calls](#repeated-tool-calls)); `0` or `off`: no limit. "
        "Anything but a whole number from 0 to 1,000 fails the first chat cell with `USAGE`",
    ),
    Setting(
        name="temperature",
        what="sampling temperature",
        trait=lambda: Float(None, allow_none=True),
        help="The sampling temperature sent with every request, 0-2 (None: the server's default).",
        env="DSH_TEMPERATURE",
        parse=_temperature,
        check=lambda value, where: _temperature(_text_of(value), where),
        default="not set",
        doc="the sampling temperature sent with every request, from 0 (the most repeatable) to 2, "
        "or `default` (none sent: the server's own); anything else fails the first chat cell with "
        "`USAGE` naming the setting",
        status=StatusLine(label="sampling", text=_sampling_text),
    ),
    Setting(
        name="seed",
        what="sampling seed",
        trait=lambda: Integer(None, allow_none=True),
        help="A seed sent with every request so a server that honours it samples repeatably "
        "(None: none sent).",
        env="DSH_SEED",
        parse=_seed,
        check=lambda value, where: _seed(_text_of(value), where),
        default="not set",
        doc="a whole number sent as `seed` with every request to an OpenAI-compatible route, so a "
        "server that honours it (llama.cpp, vLLM, OpenAI) samples the same answer to the same "
        "request; the Anthropic API takes none, so it is not sent there. With temperature `0` it "
        "makes a local model's answers repeatable (the live tests pin both)",
    ),
    Setting(
        name="vision",
        what="images to the model",
        trait=lambda: Unicode(""),
        help="Whether images go to the model: on, off, or auto/empty (as the model catalogue "
        "says); for a vision model on a server the catalogue does not know.",
        env="DSH_VISION",
        parse=_vision,
        check=_vision,
        default="`auto`",
        doc="`on`: images (plots the `python` tool drew, images in a message) go to the model as "
        "images, for a vision model the catalogue does not know (an `openai-compatible` server); "
        "`off`: their text descriptions go instead, even to a vision model; `auto`: as the model "
        "catalogue says. Anything else fails the first chat cell with `USAGE` naming the accepted "
        "values ([Images](#images))",
        status=StatusLine(label="images", text=lambda host: host.vision_text()),
    ),
    Setting(
        name="approval",
        what="approval",
        trait=lambda: Unicode(""),
        help="Approval for tools that change things: ask, auto or never.",
        env="DSH_APPROVAL",
        default="`ask`",
        command="`%agent approve ask\\|auto\\|never [tool]`",
        doc="`ask`, `auto` or `never` for tools that are not read-only; read-only tools always run "
        "unless a tool has its own mode ([Approval](#approval))",
        status=StatusLine(
            label="approval", text=lambda host: approval_text(host.agent.approval_policy)
        ),
    ),
    Setting(
        name="approval_timeout",
        what="approval wait",
        trait=lambda: Float(300.0),
        help="Seconds an approval waits for a click before it is denied.",
        env="DSH_APPROVAL_TIMEOUT",
        parse=_approval_timeout,
        default="300",
        doc="seconds an approval waits for a click before it is denied (`timeout`); `none`, `inf` "
        "or `0` wait forever",
    ),
    Setting(
        name="headless_approval_timeout",
        what="headless approval wait",
        trait=lambda: Float(10.0),
        help="Seconds to wait for a frontend to show a turn before approvals are denied "
        "(headless runs).",
        env="DSH_HEADLESS_APPROVAL_TIMEOUT",
        parse=_seconds,
        default="10",
        doc="seconds to wait for a frontend to draw the turn before an approval is denied "
        "(`unavailable`): headless runs fail fast instead of hanging",
    ),
    Setting(
        name="redraw_rate",
        what="redraw rate",
        trait=lambda: Float(20.0),
        help="Redraws per second of a streaming answer (the widget view, a console's text) and "
        "of a running python call's output (0.01 to 100); an answer's first words, tool calls and "
        "the turn's end are drawn at once whatever the rate.",
        env="DSH_REDRAW_RATE",
        parse=_redraw_rate,
        check=lambda value, where: _redraw_rate(str(value), where),
        default="20",
        doc="how many times a second a streaming answer is redrawn, from 0.01 to 100: the widget "
        "view, the text a console is written, and a running `python` call's live output. The "
        "first words of each answer, reasoning or tool-call block, an approval and the turn's end "
        "are drawn at once whatever the rate; only their growth waits for it. Lower it for a slow "
        "link (each redraw sends the growing paragraph again). Anything else fails the first chat "
        "cell with `USAGE` naming the setting",
    ),
    Setting(
        name="mcp_config",
        what="MCP configuration file",
        trait=lambda: Unicode(""),
        help="An MCP configuration file (the mcpServers shape) read before every other.",
        env="DSH_MCP_CONFIG",
        host=False,
        at_start=True,
        default="none",
        command="`%agent mcp reload`",
        doc="an `mcp.json` read first, before the notebook folder's (and its parents') and the "
        "Jupyter config path's ([MCP](mcp.md)); its servers start at kernel start",
    ),
    Setting(
        name="mcp_trusted",
        what="MCP servers trusted by the course",
        trait=lambda: Unicode(""),
        help="MCP servers (comma-separated names) whose read-only-hinted tools are offered under "
        "the explain policy.",
        env="DSH_MCP_TRUSTED",
        host=False,
        at_start=True,
        default="none",
        doc="under the `explain` policy only these servers' tools annotated `readOnlyHint` are "
        "offered, and nothing else of MCP ([MCP](mcp.md#trust-and-approval))",
    ),
    Setting(
        name="mcp_wait",
        what="MCP start wait",
        trait=lambda: Float(5.0),
        help="Seconds a chat cell waits for MCP servers still starting before it goes without them.",
        env="DSH_MCP_WAIT",
        parse=_seconds,
        host=False,
        at_start=True,
        default="5",
        doc='seconds a chat cell waits for MCP servers still starting (the cell shows "starting '
        'MCP servers…"); later requests include them once they are ready',
    ),
    Setting(
        name="mcp_idle_timeout",
        what="MCP call idle timeout",
        trait=lambda: Float(120.0),
        help="Seconds an MCP tool call may go without a result or a progress notification.",
        env="DSH_MCP_IDLE_TIMEOUT",
        parse=_seconds,
        host=False,
        at_start=True,
        default="120",
        doc="seconds an MCP call may go with no message from its server (each progress "
        "notification starts it again); an entry's `timeout` overrides it; one hour in all at most",
    ),
    Setting(
        name="store",
        what="session store",
        trait=lambda: Unicode(""),
        help="The session store directory.",
        env="DSH_STORE",
        at_start=True,
        default="`$XDG_DATA_HOME/dsh-kernel`, else `~/.local/share/dsh-kernel`",
        doc="the session store: `journals/` and `sessions.duckdb`; read, and its writability "
        "checked, once, at kernel start (not writable: one line in the kernel log and in chat "
        "cells, and sessions are kept in memory only)",
        status=StatusLine(label="store", text=lambda host: host.store_description()),
    ),
    Setting(
        name="shared_store",
        what="shared store (PostgreSQL)",
        trait=lambda: Unicode(""),
        help="The shared store: a PostgreSQL libpq URL or service name, no password "
        "(docs/shared-store.md).",
        env="DSH_SHARED_STORE",
        at_start=True,
        default="not set",
        doc="the shared store every session is also shipped to ([The shared store]"
        "(shared-store.md)): a libpq URL (`postgresql://alice@hub/course`), libpq keywords "
        "(`host=hub dbname=course`) or a service name (`course`, from `pg_service.conf`). "
        "Credentials the libpq way only (service file, `PGPASSFILE`/`~/.pgpass`, `PGPASSWORD`); a "
        "password inside it switches shipping off with one line in the log and `%agent status`. "
        "Needs the `shared` extra (psycopg 3); without it the same one line says so. Never stops a "
        "kernel or a cell; read once, at kernel start",
        status=StatusLine(label="shared", text=lambda host: host.shared.text() or None),
    ),
    Setting(
        name="ai_policy",
        what="a course's AI policy",
        trait=lambda: Unicode(""),
        help="The course's AI policy: full (the agent may run code), explain (it reads and "
        "explains, runs no code) or off (chat cells are refused). A notebook's metadata may make "
        "it stricter, never looser.",
        env="DSH_AI_POLICY",
        parse=_ai_policy,
        combine="stricter",
        at_start=True,
        default="`full`",
        doc="`full`, `explain` or `off` ([The AI policy](course.md#the-ai-policy)); a notebook's "
        "`metadata.dsh.ai_policy` may make it stricter still, never looser (and the policy in "
        "force only tightens until the kernel restarts); anything else switches the AI off: every "
        "chat cell fails with `AI_POLICY_INVALID` naming the setting (Python, SQL and `%agent "
        "status` work)",
        status=StatusLine(
            label="ai policy", text=lambda host: host.policy.apply(host.agent).text()
        ),
    ),
    Setting(
        name="budget_tokens",
        what="a course's daily token budget",
        trait=lambda: Integer(None, allow_none=True),
        help="Tokens each user may use per UTC day, across all their sessions (None: no limit).",
        env="DSH_BUDGET_TOKENS",
        parse=_budget_tokens,
        combine="lower",
        at_start=True,
        default="none",
        command="— (`%agent status` shows what is left)",
        doc="tokens (input, cached and output) each user may use per UTC day, across all their "
        "sessions in the store, a whole number of at most 9,007,199,254,740,992 (2^53, the "
        "largest whole number the session log keeps exactly), or `none` ([Budgets]"
        "(course.md#budgets)); anything else refuses chat with one line naming it "
        "(`AI_POLICY_INVALID`: the course's configuration is fixed); a request that would pass it "
        "is not sent (`BUDGET_EXCEEDED`), a retry included, one that fits gets its output cap "
        "lowered to what is left; an attempt that failed mid-answer counts its input and what "
        "streamed ([What a failed attempt costs](course.md#budgets))",
        status=StatusLine(label="budget", text=lambda host: host.budgets.status_text() or None),
    ),
    Setting(
        name="budget_usd",
        what="a course's daily budget in US dollars",
        trait=lambda: Float(None, allow_none=True),
        help="US dollars each user may spend per UTC day, across all their sessions (None: no "
        "limit).",
        env="DSH_BUDGET_USD",
        parse=_budget_usd,
        combine="lower",
        at_start=True,
        default="none",
        command="— (`%agent status` shows what is left)",
        doc="US dollars each user may spend per UTC day (`2`, `0.50`, `$1.25`), or `none`, "
        "enforced the same way, at the catalogue's list price (a `set_price` price counts only "
        "where it is higher); a model with no list price is refused (`BUDGET_UNPRICED`)",
    ),
    Setting(
        **_image("max_side", "image_max_side", 1024),
        what="image size",
        help="Images sent to the model are downscaled to this longest side in pixels (64-8192).",
        env="DSH_IMAGE_MAX_SIDE",
        default="1024",
        doc="the longest side of an image sent to the model, in pixels, 64–8,192 "
        "([Images](#images))",
    ),
    Setting(
        **_image("per_call", "images_per_call", 4),
        what="images per call",
        help="At most this many images per python call or chat message go to the model (0-50).",
        env="DSH_IMAGES_PER_CALL",
        default="4",
        doc="images per `python` call (or chat message) sent to the model, 0–50",
    ),
    Setting(
        **_image("max_bytes", "image_max_bytes", 512 * 1024),
        what="image bytes",
        help="Bytes per image sent to the model after reduction (8 KiB-20 MiB).",
        env="DSH_IMAGE_MAX_BYTES",
        default="`512k` (524288)",
        doc="bytes per image after reduction, 8,192–20,971,520; `k` and `M` count 1,024 and "
        "1,048,576 (`256k`, `2M`). A value out of range or not a whole number fails the first chat "
        "cell with `USAGE` naming the setting and the range, for all three image limits",
    ),
    Setting(
        name="system_prompt",
        what="persona",
        trait=lambda: Unicode(""),
        help="The persona part of the system prompt.",
        default='`""`',
        doc="the persona part of the system prompt (the notebook guide and runtime context are "
        "added to it)",
    ),
)
"""Every setting, in the order of docs/configuration.md."""

BY_NAME: Final = {s.name: s for s in SETTINGS}

USER_VARIABLES: Final = ("JUPYTERHUB_USER", "USER")
"""Who the kernel's sessions are for (``kernel.course.config.current_user``), read at start too: a
notebook that sets ``os.environ['USER']`` does not become another student."""

START_VARIABLES: Final = tuple(s.env for s in SETTINGS if s.at_start and s.env) + USER_VARIABLES
"""The variables read once, when the kernel starts (``start_environment``)."""


def traitlets() -> dict[str, TraitType[Any, Any]]:
    """The ``DshKernel`` traitlets, by name (a fresh set: a traitlet belongs to one class)."""
    return {s.name: s.traitlet() for s in SETTINGS}


def start_environment(env: Mapping[str, str] | None = None) -> dict[str, str]:
    """``START_VARIABLES`` as they are now (``env``: default ``os.environ``), kept by the kernel."""
    env = os.environ if env is None else env
    return {k: env[k] for k in START_VARIABLES if k in env}


def environment(
    at_start: Mapping[str, str], now: Mapping[str, str] | None = None
) -> dict[str, str]:
    """The environment settings are read from: ``now`` (default ``os.environ``) for the variables
    read when the agent is built, ``at_start`` for ``START_VARIABLES``."""
    now = os.environ if now is None else now
    env = {k: v for k, v in now.items() if k not in START_VARIABLES}
    env.update(at_start)
    return env


def setting_value(name: str, traits: Mapping[str, object], env: Mapping[str, str]) -> object:
    """One setting in force (an ``environment wins`` one), from the traitlets' values and ``env``."""
    setting = BY_NAME[name]
    return setting.value(traits.get(name, setting.trait().default_value), env)


def trait_values(kernel: HasTraits) -> dict[str, object]:
    """Every setting's traitlet value on ``kernel``, by name."""
    return {s.name: getattr(kernel, s.name) for s in SETTINGS}


def settings_from_traits(
    traits: Mapping[str, object], env: Mapping[str, str] | None = None
) -> HostSettings:
    """The ``HostSettings`` in force for the traitlets' values ``traits`` (a name left out: its
    default) and the environment ``env`` (default ``os.environ``). Raises the first bad value's
    ``UsageError``; the course's settings fail closed instead."""
    from dsh_kernel.kernel.course.config import course_settings_or_off
    from dsh_kernel.kernel.host.settings import HostSettings, base_url_owner

    env = os.environ if env is None else env
    values: dict[str, Any] = {
        s.name: setting_value(s.name, traits, env)
        for s in SETTINGS
        if s.host and s.combine == "environment wins"
    }
    course = course_settings_or_off(
        **{
            s.name: _text_of(traits.get(s.name))
            for s in SETTINGS
            if s.host and s.combine != "environment wins"
        },
        env=env,
    )
    settings = HostSettings(**values, course=course)
    if settings.base_url:
        settings = replace(
            settings, base_url_provider=base_url_owner(settings.provider, settings.model)
        )
    return settings


def settings_from_kernel(kernel: HasTraits, at_start: Mapping[str, str]) -> HostSettings:
    """``settings_from_traits`` for ``kernel``'s traitlets, with the environment it kept at start."""
    return settings_from_traits(trait_values(kernel), environment(at_start))


def status_lines(host: AgentHost) -> dict[str, str]:
    """Each setting's ``%agent status`` line that has something to say, by setting name."""
    lines: dict[str, str] = {}
    for s in SETTINGS:
        if s.status is None:
            continue
        text = s.status.text(host)
        if text is not None:
            lines[s.name] = status_line(s.status.label, text)
    return lines


def status_line(label: str, text: str) -> str:
    """One ``%agent status`` line: the label and its colon in nine columns, a space, the text."""
    return f"{label + ':':<9} {text}"


# --- docs/configuration.md ---------------------------------------------------------------------

DOC_PATH: Final = "docs/configuration.md"
BEGIN: Final = (
    "<!-- The settings table: generated by `python -m dsh_kernel.kernel.configuration` from "
    "dsh_kernel/kernel/configuration.py (SETTINGS). Do not edit by hand. -->"
)
END: Final = "<!-- End of the generated settings table. -->"


def render_table() -> str:
    """The settings table of docs/configuration.md (Markdown, between ``BEGIN`` and ``END``)."""
    rows = [
        "| setting | Jupyter config traitlet | environment variable | default | at run time | meaning |",
        "|---|---|---|---|---|---|",
    ]
    for s in SETTINGS:
        env = f"`{s.env}`" if s.env else "—"
        if s.env and s.combine != "environment wins":
            env += f" ({s.combine} wins{'; read at kernel start' if s.at_start else ''})"
        rows.append(
            f"| {s.what} | `c.DshKernel.{s.name}` | {env} | {s.default} | {s.command} | {s.doc} |"
        )
    return "\n".join([BEGIN, *rows, END])


def rewrite(text: str) -> str:
    """``text`` (docs/configuration.md) with its settings table regenerated."""
    if BEGIN not in text or END not in text:
        raise ValueError(f"{DOC_PATH} has no settings table markers ({BEGIN!r} … {END!r})")
    head, rest = text.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    return head + render_table() + tail


def main(argv: Sequence[str] | None = None) -> int:
    """Rewrite the settings table of docs/configuration.md, or with ``--check`` exit 1 when stale."""
    args = list(sys.argv[1:] if argv is None else argv)
    check = "--check" in args
    paths = [a for a in args if a != "--check"]
    path = Path(paths[0] if paths else DOC_PATH)
    text = path.read_text(encoding="utf-8")
    fresh = rewrite(text)
    if check:
        if fresh != text:
            print(
                f"{path} is stale: run python -m dsh_kernel.kernel.configuration", file=sys.stderr
            )
            return 1
        return 0
    path.write_text(fresh, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
