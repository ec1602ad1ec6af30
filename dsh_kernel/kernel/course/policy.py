"""The AI policy in force for a notebook, and its enforcement.

**In force** is the stricter of the course's configuration (``kernel.course.config``: ``DSH_AI_POLICY``,
``c.DshKernel.ai_policy``) and the notebook's own metadata, ``metadata.dsh.ai_policy``, read from
the notebook file: the one jupyter-server names in ``JPY_SESSION_NAME``, or where the frontend
extension says it went since (``kernel.notebook.file``: a rename or move). A notebook can tighten
the policy, never loosen it. The file is read at every chat cell, ``%agent status`` and new
session — re-read only when its modification time or size changed, so a notebook saved while the
kernel runs takes effect at its next chat cell. A file that cannot be found (no server, a notebook
not saved yet, renamed without the extension) adds nothing of its own; one that cannot be read or
is not JSON (caught mid-save) keeps what was last read from it. A value that is not a policy reads
as the strictest, ``off``: chat cells are refused with ``AI_POLICY_INVALID`` naming the value
until the notebook is fixed (a course's restriction is never silently dropped).

**It only tightens while the kernel runs.** The strictest policy in force so far stays in force,
whatever the notebook says later — edited back, renamed where the kernel cannot follow, or gone: a
notebook that named ``off`` and is renamed stays ``off`` (``%agent status`` says it is kept, and
why). A restart of the kernel reads afresh. A value that is not a policy is not kept: it is
refused while it is there, and once fixed the policy it names (or the one kept) is in force.

**Enforcement**, per policy:

* ``full`` — today's behaviour: every tool.
* ``explain`` — only read-only tools are offered (``ToolDefinition.read_only``: ``inspect``,
  ``sql``, ``ask_user``; never ``python``), by a registry filter recomputed before every chat cell,
  and a registry guard denies a call to any other tool that reached the model some other way. A
  chat cell whose ``&`fn``` offers a tool that is not read-only is refused with
  ``AI_POLICY_EXPLAIN``. The system prompt gains a section telling the model to guide and explain,
  not to solve (``EXPLAIN_GUIDE``). ``notebook_read`` is read-only and offered; ``notebook_insert``
  is not. The notebook section of the prompt (``PolicyGate.notebook_guide``) describes exactly the
  tools offered, so under ``explain`` it names ``notebook_read`` (when something serves it) and
  neither ``python`` nor ``notebook_insert``.
* ``off`` — no tools; chat cells, ``%agent compact`` and ``%agent replay`` are refused with
  ``AI_POLICY_OFF`` (one line: the course has AI switched off; ``%%python`` cells, the DSH Python
  kernel and ``%%sql`` cells work). ``%agent status`` and the other commands still work.

**The header records the policy in force.** A new session (the kernel's first, ``%agent new``,
``fork``, ``replay``) is created with it. When the policy in force differs from the one on the
current session's header at a chat cell (the notebook was edited, or a session recorded under
another policy was resumed), a session that has no turns yet gets the new policy on its header; one
that has turns is forked at its last turn into a new session under the new policy (the conversation
goes on; the old session stays in the store), and the cell prints one line saying so.

This is a guard for a course, not a security boundary: the student's own Python runs in the same
process and can edit the notebook's metadata (``docs/course.md``).
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Final, Protocol, cast

from dsh_kernel.agent.system_prompt import PromptSection
from dsh_kernel.errors import DshError, UsageError
from dsh_kernel.kernel.course.config import (
    AiPolicy,
    CourseSettings,
    parse_ai_policy,
    stricter,
)
from dsh_kernel.kernel.notebook.file import NotebookFile
from dsh_kernel.tools.types import ToolCall, ToolDefinition

if TYPE_CHECKING:
    from dsh_kernel.agent.agent import Agent
    from dsh_kernel.session.log import Session

_log = logging.getLogger(__name__)

NOTEBOOK_ORIGIN: Final = "the notebook's metadata"

NOTEBOOK_GUIDE: Final = (
    "You work inside the user's Jupyter notebook. The `python` tool runs code in the notebook's "
    "own namespace: variables you create stay there for the user, and you can use theirs. "
    "Prefer short, inspectable steps. The user sees your answer rendered as Markdown and every tool "
    "call as a card."
)
NOTEBOOK_GUIDE_NO_CODE: Final = (
    "You work inside the user's Jupyter notebook; you run no code in it. The user sees your answer "
    "rendered as Markdown and every tool call as a card."
)
NOTEBOOK_READ_GUIDE: Final = (
    "`notebook_read` shows you the notebook's cells — markdown and cells not yet run included, and "
    "which cell the user is on; it changes nothing."
)
NOTEBOOK_INSERT_GUIDE: Final = (
    "`notebook_insert` adds new code or markdown cells below a cell; it never changes, runs or "
    "deletes one: the user reads your cells and decides whether to run them."
)
NOTEBOOK_TOOL_GUIDES: Final = (
    ("notebook_read", NOTEBOOK_READ_GUIDE),
    ("notebook_insert", NOTEBOOK_INSERT_GUIDE),
)
"""A notebook tool's sentence in the notebook section, given only while the tool is offered."""

EXPLAIN_GUIDE: Final = (
    "The course's AI policy for this notebook is **explain**: you are a tutor, not a solver. You "
    "run no code and add no cells to the notebook; you may only read, with the tools you are "
    "offered. Guide the student to their own answer: explain the ideas, "
    "point at what to look at, ask a question that leads to the next step, give a hint or a small "
    "fragment that illustrates a point. Do not write the solution or the complete code of their "
    "task, even when asked; say that the course asks you to guide rather than solve."
)
"""Names no tool: which read-only tools are offered depends on ``%agent tools`` and on whether
anything serves ``notebook_read``, and a model told of a tool it lacks calls it."""


@dataclass(frozen=True, slots=True, kw_only=True)
class PolicyInForce:
    """The policy a chat cell gets, and why."""

    policy: AiPolicy
    origin: str
    """Where ``policy`` came from: ``"DSH_AI_POLICY"``, ``"c.DshKernel.ai_policy"``,
    ``NOTEBOOK_ORIGIN`` or ``"the default"``."""
    configured: AiPolicy
    notebook: AiPolicy | None = None
    """What the notebook's metadata asks for (``None``: nothing)."""
    note: str = ""
    """Why the notebook added nothing, or what it asked that did not win."""
    invalid: str | None = None
    """The refusal line for a metadata value that is not a policy (``policy`` is then ``off``)."""

    def text(self) -> str:
        """``%agent status``'s line: ``explain (the notebook's metadata; configured: full)``."""
        if self.invalid is not None:
            return f"off — {self.invalid}"
        where = [self.origin]
        if self.origin == NOTEBOOK_ORIGIN:
            where.append(f"configured: {self.configured}")
        elif self.notebook is not None:
            where.append(f"the notebook asks for {self.notebook}; the stricter wins")
        if self.note:
            where.append(self.note)
        return f"{self.policy} ({'; '.join(where)})"


# --- the notebook's metadata ------------------------------------------------------------------


def read_notebook_policy(text: str) -> AiPolicy | None:
    """``metadata.dsh.ai_policy`` of a notebook's JSON text; ``None`` when it sets none.
    ``ValueError`` for text that is not a notebook's JSON; ``UsageError`` for a value that is not
    a policy (naming it)."""
    doc: object = json.loads(text)
    if not isinstance(doc, dict):
        raise ValueError("not a notebook (its JSON is not an object)")
    metadata = cast("dict[str, object]", doc).get("metadata")
    dsh = cast("dict[str, object]", metadata).get("dsh") if isinstance(metadata, dict) else None
    if not isinstance(dsh, dict):
        return None
    raw = cast("dict[str, object]", dsh).get("ai_policy")
    if raw is None:
        return None
    if not isinstance(raw, str):
        raise UsageError(
            f"the notebook's metadata.dsh.ai_policy is {json.dumps(raw)}, not an AI policy: "
            "use full, explain or off"
        )
    return parse_ai_policy(raw, "the notebook's metadata.dsh.ai_policy = ")


@dataclass(frozen=True, slots=True)
class _Reading:
    stamp: tuple[str, int, int] | None
    """(path, mtime_ns, size) of what was read; ``None``: nothing was."""
    policy: AiPolicy | None = None
    invalid: str | None = None
    note: str = ""


class NotebookPolicy:
    """The policy a notebook's metadata asks for, re-read only when its file changed."""

    def __init__(self, where: NotebookFile) -> None:
        self.where = where
        self._last = _Reading(stamp=None)

    def read(self) -> _Reading:
        name = self.where.name
        if name is None:
            return _Reading(stamp=None)  # no server told the kernel its notebook: nothing to add
        path = self.where.find()
        if path is None:
            return _Reading(stamp=None, note=f"the notebook file {name} was not found")
        try:
            st = path.stat()
            stamp = (str(path), st.st_mtime_ns, st.st_size)
            if stamp == self._last.stamp:
                return self._last
            text = path.read_text(encoding="utf-8")
        except OSError as exc:
            return self._kept(f"{path} could not be read ({exc.strerror or exc})")
        try:
            reading = _Reading(stamp=stamp, policy=read_notebook_policy(text))
        except UsageError as exc:
            reading = _Reading(stamp=stamp, invalid=exc.message)
        except ValueError as exc:  # JSON caught mid-save, or not a notebook
            return self._kept(f"{path} is not a notebook's JSON ({exc})")
        self._last = reading
        return reading

    def _kept(self, why: str) -> _Reading:
        _log.warning("dsh: the AI policy of the notebook: %s", why)
        return replace(self._last, note=f"{why}; kept what was read before")


# --- the gate ---------------------------------------------------------------------------------


class PolicyGate:
    """The policy in force for one kernel (module docstring), and what it does to an agent."""

    def __init__(self, course: CourseSettings, notebook: NotebookFile) -> None:
        self.course = course
        self.notebook = NotebookPolicy(notebook)
        self._undo: Callable[[], None] | None = None
        """Removes the filter ``apply`` put on the agent (only the host's current one matters)."""
        self._kept: PolicyInForce | None = None
        """The strictest valid policy in force so far (module docstring: it only tightens)."""

    def in_force(self) -> PolicyInForce:
        now = self._read()
        if now.invalid is not None:
            return now  # off while it is there, never kept
        kept = self._kept
        if kept is not None and stricter(kept.policy, now.policy) != now.policy:
            why = f"kept: {kept.policy} was in force earlier in this kernel's life"
            if now.notebook is not None:
                why += f" (the notebook now asks for {now.notebook})"
            return replace(
                kept,
                notebook=now.notebook,
                note="; ".join(
                    p for p in (now.note, why, "restart the kernel to read it afresh") if p
                ),
            )
        self._kept = now
        return now

    def _read(self) -> PolicyInForce:
        """The policy the configuration and the notebook ask for now (module docstring)."""
        configured = self.course.ai_policy
        origin = self.course.origin.get("ai_policy", "the default")
        if self.course.problem is not None:  # a setting that did not parse: closed, for chat
            return PolicyInForce(
                policy="off", origin=origin, configured="off", invalid=self.course.problem
            )
        reading = self.notebook.read()
        if reading.invalid is not None:
            return PolicyInForce(
                policy="off",
                origin=NOTEBOOK_ORIGIN,
                configured=configured,
                invalid=reading.invalid,
            )
        asked = reading.policy
        if asked is not None and stricter(asked, configured) != configured:
            return PolicyInForce(
                policy=asked,
                origin=NOTEBOOK_ORIGIN,
                configured=configured,
                notebook=asked,
                note=reading.note,
            )
        return PolicyInForce(
            policy=configured,
            origin=origin,
            configured=configured,
            notebook=asked,
            note=reading.note,
        )

    def install(self, agent: Agent) -> None:
        """Once per agent: the explain section of the system prompt, the guard on its tool calls,
        and the tools the policy in force offers."""
        agent.system_prompt.add(
            PromptSection(name="ai policy", order=55, text=lambda: self._guide(agent))
        )
        agent.registry.guard(lambda call, _args: self._denial(agent, call))
        self.apply(agent)

    def apply(self, agent: Agent, now: PolicyInForce | None = None) -> PolicyInForce:
        """Offer ``agent`` the tools the policy in force allows (replacing the earlier filter)."""
        now = now or self.in_force()
        if self._undo is not None:
            self._undo()
            self._undo = None
        if now.policy == "off":
            self._undo = agent.registry.restrict(allow=())
        elif now.policy == "explain":
            changing = [d.name for d in agent.registry.definitions() if not d.read_only]
            self._undo = agent.registry.restrict(deny=changing)
        return now

    def notebook_guide(self, agent: Agent) -> str:
        """The system prompt's notebook section, from the tools ``agent`` offers when the prompt is
        rendered (after the policy's filter, ``%agent tools`` and the notebook desk's ``offer``):
        ``NOTEBOOK_GUIDE`` when ``python`` is offered, else ``NOTEBOOK_GUIDE_NO_CODE``; then the
        sentence of each notebook tool offered (``NOTEBOOK_TOOL_GUIDES``). A model is told of every
        notebook tool it has and of none it lacks (it calls a tool it was told of)."""
        offered = set(agent.registry.names())
        parts = [NOTEBOOK_GUIDE if "python" in offered else NOTEBOOK_GUIDE_NO_CODE]
        parts += [text for name, text in NOTEBOOK_TOOL_GUIDES if name in offered]
        return " ".join(parts)

    def _guide(self, agent: Agent) -> str:
        header = agent.session.header
        return EXPLAIN_GUIDE if header.ai_policy == "explain" else ""

    def _denial(self, agent: Agent, call: ToolCall) -> str | None:
        policy = agent.session.header.ai_policy
        if policy not in ("explain", "off"):
            return None
        defn = agent.registry.get(call.name)
        if policy == "explain" and defn is not None and defn.read_only:
            return None
        allowed = "read-only tools only" if policy == "explain" else "no tools"
        return f"the course's AI policy is {policy} ({allowed}): {call.name!r} is not allowed"


# --- the kernel's checks ----------------------------------------------------------------------


class PolicyHost(Protocol):
    """What the checks use of ``kernel.host.agent_host.AgentHost`` (which imports this module)."""

    policy: PolicyGate
    agent: Agent
    provider_note: str

    @property
    def journal(self) -> object | None: ...

    def new_session(self, session: Session | None = None) -> Agent: ...


def refuse_if_off(host: PolicyHost, *, advise: bool = False) -> PolicyInForce:
    """Raise ``AI_POLICY_OFF`` (or ``AI_POLICY_INVALID``) when the policy in force does not let
    anything talk to the model; else return it. ``advise``: the line says what still works (for an
    ``%agent`` command, whose error carries no advice of its own)."""
    from dsh_kernel.failures import advice

    now = host.policy.in_force()
    code = "AI_POLICY_INVALID" if now.invalid is not None else "AI_POLICY_OFF"
    if now.invalid is not None:
        fixed = "the notebook" if now.origin == NOTEBOOK_ORIGIN else "the kernel's configuration"
        message = f"{now.invalid}; until {fixed} is fixed, chat is refused"
    elif now.policy == "off":
        message = (
            f"the course has AI switched off for this notebook (AI policy off, from {now.origin})"
        )
    else:
        return now
    raise DshError(f"{message}; {advice(code)}" if advise else message, code=code)


def before_chat(host: PolicyHost) -> str | None:
    """Before a chat cell sends anything: refuse it under ``off``; settle the session's header on
    the policy in force (module docstring); offer the agent the policy's tools. Returns the line
    to print when the session was forked for a new policy."""
    now = refuse_if_off(host)
    line = _settle(host, now)
    host.policy.apply(host.agent, now)
    return line


def check_offered(host: PolicyHost, tools: Sequence[ToolDefinition]) -> None:
    """Under ``explain``, refuse a chat cell whose ``&`fn``` offers a tool that is not read-only."""
    if host.agent.session.header.ai_policy != "explain":
        return
    changing = [t.name for t in tools if not t.read_only]
    if changing:
        names = ", ".join(f"`{n}`" for n in changing)
        raise DshError(
            f"this cell offers {names} as a tool, which is not read-only, and the course's AI "
            "policy is explain (the agent reads and explains; it runs nothing that changes things)",
            code="AI_POLICY_EXPLAIN",
        )


def _settle(host: PolicyHost, now: PolicyInForce) -> str | None:
    agent = host.agent
    session = agent.session
    recorded = session.header.ai_policy
    if recorded == now.policy or (recorded is None and now.policy == "full"):
        return None
    if session.last_turn == 0 and host.journal is None:  # nothing of it is stored yet
        session.header = replace(session.header, ai_policy=now.policy, user=host.policy.course.user)
        return None
    from dsh_kernel.store.sessions import fork

    old_id = session.id
    try:
        forked = fork(
            session.header,
            list(session.events),
            session.last_turn,
            cwd=os.getcwd(),
            user=host.policy.course.user,
            ai_policy=now.policy,
            kind="policy",
        )
    except UsageError:  # its last turn never ended: start afresh rather than send under the old
        forked = None
    provider, model, note = agent.provider, agent.model, host.provider_note
    new = host.new_session(forked)
    if provider.id == "replay":  # a replay goes on answering from its recording
        new.set_route(provider=provider, model=model)
        host.provider_note = note
    how = f"forked at turn {session.last_turn}" if forked is not None else "started afresh"
    return (
        f"The AI policy in force is now {now.policy} (from {now.origin}); session {old_id[:8]} "
        f"was {recorded or 'not recorded'}, so this cell goes on in a new session "
        f"{new.session.id[:8]} ({how}); the earlier one stays in the store."
    )
