"""``AgentHost``: the kernel's agent, its provider, tools, store and the view of the running turn.

One host per kernel process, run with resolved settings (``HostSettings``: the kernel's
``kernel.configuration`` builds them from its traitlets and ``DSH_*`` environment variables) and
the store the kernel opened at start (``Store.open``; opened here when none is given). It chooses
the provider (the settings' route, else the first provider whose key is present, else the clearly
labelled ``offline`` demo model), builds the agent with the notebook tools (``python``, ``inspect``,
``ask_user``, ``sql``; ``notebook_read``/``notebook_insert`` from the kernel's ``desk``), attaches
the session journal to the store (and to the shared store's shipper, ``kernel.shared``), and carries
out the ``%agent`` commands that change the route (provider, model, reasoning effort, approval).
Approvals and questions go to the view of the cell that is running (``kernel.host.bridge.ViewBridge``;
they fail closed).

Keys follow their provider. A base URL belongs to the provider it was configured for
(``DSH_PROVIDER``/``c.DshKernel.provider``, or the ``DSH_MODEL`` prefix; with neither, to
``openai-compatible``). ``switch_provider`` keeps it only when the switch lands on that provider —
otherwise the target uses its own endpoint (its ``<PROVIDER>_BASE_URL`` variable or the built-in
one) — and the key sent is always the target's own (``llm/config.py``). A model switch within one
provider changes nothing else; the model configured at start (``DSH_MODEL``) likewise comes back only
with the provider the kernel started with. The host's keys are the process's ``KEYS`` unless it is given a store.

The context window (``agent.request.window``) is the host's, shared by every session of the kernel: the
configured one (``DSH_CONTEXT_WINDOW``, ``c.DshKernel.context_window``, ``%agent context``) stays
until cleared, and a window the server reported is asked once per route. The lookup starts in the
background as soon as a route is chosen (a new session, a model or provider switch), so the first
message seldom waits for it (``kernel.magic.context`` has ``%agent context``). Automatic compaction
is the host's setting too (``DSH_COMPACTION``, ``c.DshKernel.compaction``, ``%agent compact on|off``):
every agent it builds gets it (``kernel.magic.compact``).

The AI policy in force (``kernel.course.policy``) decides which tools each agent is offered; headers record it.

Sessions know their notebook: a new session's header carries the path jupyter-server gives the kernel
in ``JPY_SESSION_NAME`` (``notebook_path``), so the store can find a notebook's sessions again.

No empty sessions. A new session's journal is attached when its first turn starts (the agent's
``session_start`` hook, emitted before ``turn/start``); until then the session lives in memory only,
with the ``command/run``/``command/done`` events of the ``%agent`` commands run before it (and a
``%agent title``). The journal writer then writes them first, in order, with the turn. A kernel that
never chats therefore leaves no journal and no ``sessions`` row. A resumed or forked session already
has events and is journaled at once.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from dsh_kernel.abort import USER_CANCEL
from dsh_kernel.agent.agent import Agent
from dsh_kernel.agent.compaction.run import CompactionSettings
from dsh_kernel.agent.request.window import ContextWindows
from dsh_kernel.agent.system_prompt import PromptContext, PromptSection
from dsh_kernel.errors import DshError, LlmError, StoreError, UsageError
from dsh_kernel.ids import new_session_id
from dsh_kernel.kernel.chat_input import variables_context
from dsh_kernel.kernel.course.budgets import KernelBudgets
from dsh_kernel.kernel.course.policy import PolicyGate
from dsh_kernel.kernel.host.bridge import ViewBridge
from dsh_kernel.kernel.host.settings import HostSettings, base_url_owner, choose_provider
from dsh_kernel.kernel.magic.vision import vision_text
from dsh_kernel.kernel.notebook.file import NotebookFile, notebook_path
from dsh_kernel.kernel.shared import SharedLink
from dsh_kernel.kernel.toolbox import builtin_tools
from dsh_kernel.kernel.toolbox.toolset import ToolSet
from dsh_kernel.llm.calibration import Calibrations
from dsh_kernel.llm.config import (
    BUILTIN_PROVIDERS,
    KEYS,
    KeyStore,
)
from dsh_kernel.llm.secrets import redact
from dsh_kernel.llm.types import ModelInfo
from dsh_kernel.session.events import SessionHeader
from dsh_kernel.session.log import Session, wall_clock_ms
from dsh_kernel.store.ingest.incremental import read_prices
from dsh_kernel.store.journal import JournalWriter, attach_journal
from dsh_kernel.store.layout import Store
from dsh_kernel.store.prices import UserPrice, priced
from dsh_kernel.store.prices import generation as price_generation
from dsh_kernel.tools.approval import ApprovalMode, ApprovalPolicy

if TYPE_CHECKING:
    from dsh_kernel.kernel.toolbox.notebook import NotebookDesk
    from dsh_kernel.kernel.toolbox.python import LiveTap
    from dsh_kernel.mcp.servers import McpServers
    from dsh_kernel.views.turn import TurnView

_log = logging.getLogger(__name__)


class AgentHost:
    """See the module docstring."""

    def __init__(
        self,
        settings: HostSettings,
        *,
        namespace: dict[str, object],
        shell: object | None = None,
        keys: KeyStore | None = None,
        desk: NotebookDesk | None = None,
        store: Store | StoreError | None = None,
        mcp: McpServers | None = None,
    ) -> None:
        """``store``: the store the kernel opened (or why it could not); ``None``: open
        ``settings.store`` here. ``mcp``: the kernel's MCP servers, whose tools every agent is
        offered (``mcp.servers``)."""
        self.settings = settings
        self.mcp = mcp
        self.desk = desk
        """The notebook tools and the running cell they serve (``kernel.toolbox.notebook``)."""
        self._configured = self.settings
        """The configuration at start: where each base URL came from (``switch_provider``)."""
        self.namespace = namespace
        self.shell = shell
        self.keys = KEYS if keys is None else keys
        self.bridge = ViewBridge(lambda: self.settings)
        self.store_warning: str | None = None
        self.store: Store | None = None
        self._prices: dict[tuple[str, str], UserPrice] = {}
        self._prices_generation = -1
        self.journal: JournalWriter | None = None
        self.provider_note = ""
        self.notebook = notebook_path()
        where = desk.comms.notebook if desk is not None else NotebookFile(self.notebook, Path.cwd())
        self.policy = PolicyGate(self.settings.course, where)
        """The AI policy in force: the configuration's, or the notebook's stricter (``kernel.course.policy``)."""
        self._hinted = False
        self.session_chosen = False
        """A session other than the kernel's first was taken (``%agent new|resume|fork|replay``,
        a rewind, an import): the notebook's capsules are not imported then (``kernel.capsules``)."""
        """Whether this kernel already had its chance to say an earlier session exists."""
        self.windows = ContextWindows(configured=self.settings.context_window)
        self.calibrations = Calibrations()
        """What each route's server counts against the token estimate, learned across this
        kernel's sessions (``llm.calibration``)."""
        self.toolset = ToolSet(after=self.policy.apply)
        """``%agent tools``: kept for every session of this kernel."""
        self._open_store(store)
        self.shared = SharedLink(self.settings.shared_store)
        self.budgets = KernelBudgets(self.settings.course, self.store, self.user_price)
        self.agent = self._build_agent()
        self._started_with = self.agent.provider.id
        """The provider chosen at start: the configured model is its model (``switch_provider``)."""

    # --- construction ---------------------------------------------------------------------------

    def _policy(self) -> ApprovalPolicy:
        mode = self.settings.approval or "ask"
        if mode not in ("ask", "auto", "never"):
            raise UsageError(f"DSH_APPROVAL={mode!r}: use ask, auto or never")
        policy = ApprovalPolicy()
        if mode != "ask":
            policy.set(None, mode)
        return policy

    def _build_agent(self, session: Session | None = None) -> Agent:
        provider, model, note = choose_provider(self.settings, self.keys)
        self.provider_note = note
        if session is None:
            session = Session(
                header=SessionHeader(
                    id=new_session_id(),
                    created_at=wall_clock_ms(),
                    cwd=os.getcwd(),
                    notebook=self.notebook,
                    user=self.settings.course.user,
                    ai_policy=self.policy.in_force().policy,
                )
            )
        agent = Agent(
            provider=provider,
            model=model,
            system=self.settings.system_prompt or None,
            session=session,
            approval_policy=self._policy(),
            answerer=self.bridge.answer_approval,
            approval_timeout_s=None,
            context_windows=self.windows,
            token_calibrations=self.calibrations,
            compaction=CompactionSettings(auto=self.settings.compaction),
            repeat_limit=self.settings.repeat_limit,
            temperature=self.settings.temperature,
            seed=self.settings.seed,
        )
        agent.images = self.settings.vision  # DSH_VISION / c.DshKernel.vision (kernel.vision)
        agent.spend = self.budgets.gate(agent)  # the course's budgets (kernel.budgets)
        if self.settings.reasoning:
            try:
                agent.set_reasoning(self.settings.reasoning)
            except LlmError as exc:
                raise LlmError(
                    replace(
                        exc.failure,
                        message=f"the configured reasoning effort (DSH_REASONING or "
                        f"c.DshKernel.reasoning): {exc.failure.message}",
                    )
                ) from exc
        guide = self.policy.notebook_guide
        agent.system_prompt.add(PromptSection(name="notebook", order=50, text=lambda: guide(agent)))
        agent.runtime_context.add(lambda: variables_context(self.namespace, self.shell))
        agent.runtime_context.add(self._approval_context(agent))
        self._install_tools(agent)
        self.toolset.apply(agent)
        self.policy.install(agent)
        self._attach_journal(agent)
        self.windows.forget_failures()
        self.windows.prefetch(agent.provider, agent.model)
        return agent

    # --- the store --------------------------------------------------------------------------------

    def _open_store(self, store: Store | StoreError | None) -> None:
        if store is None:
            try:
                store = Store.open(self.settings.store)
            except StoreError as exc:
                store = exc
        if isinstance(store, StoreError):
            self._warn_store(store.message)
            return
        self.store = store

    def _attach_journal(self, agent: Agent) -> None:
        """Journal ``agent``'s session: at once when it has events (resumed, forked), else when its
        first turn starts (see "No empty sessions" in the module docstring)."""
        if self.journal is not None:
            with contextlib.suppress(Exception):
                self.journal.close()
            self.journal = None
        if self.store is None:
            return
        if not agent.session.events:
            agent.hooks.session_start.on(lambda _start: self._first_turn(agent))
            return
        self._journal_now(agent)

    def _first_turn(self, agent: Agent) -> None:
        if agent is self.agent and self.journal is None:
            self._journal_now(agent)

    def _journal_now(self, agent: Agent) -> None:
        if self.store is None:
            return
        try:
            self.journal = attach_journal(agent, self.store)
            self.shared.follow(self.journal, agent.hooks)
        except (OSError, DshError) as exc:
            self._warn_store(f"the session journal could not be opened ({exc}); in memory only")

    def _warn_store(self, text: str) -> None:
        """Say that sessions are kept in memory only: in the kernel's log and, as it happens during
        the cell that first needs the store, in that cell's output (stderr)."""
        import sys

        self.store_warning = text
        _log.warning("%s", text)
        with contextlib.suppress(Exception):
            print(redact(text), file=sys.stderr)

    def store_description(self) -> str:
        if self.store is None:
            return "none (in memory only)"
        journal = (
            f"; journal {self.journal.path}"
            if self.journal is not None
            else "; this session is written at its first turn"
        )
        return f"{self.store.root}{journal}"

    def earlier_session_hint(self) -> str | None:
        """Once per kernel, for its first chat cell: one line saying this notebook has an earlier
        session and how to continue it — when this session is the kernel's first (no turns, and no
        ``%agent new|resume|fork|replay`` ran),
        the kernel knows its notebook, and the provider is not ``replay`` (a replayed notebook must
        read the same every run). ``None`` otherwise, and on any store failure (a hint never fails
        a cell)."""
        if self._hinted:
            return None
        self._hinted = True
        agent = self.agent
        store, notebook = self.store, self.notebook
        if (
            store is None
            or notebook is None
            or agent.session.last_turn
            or agent.provider.id == "replay"
        ):
            return None
        from dsh_kernel.store.sessions import latest_notebook_session

        try:
            earlier = latest_notebook_session(store, notebook, exclude=agent.session.id)
        except (DshError, OSError) as exc:
            _log.warning("dsh: could not look for this notebook's earlier sessions: %s", exc)
            return None
        if earlier is None:
            return None
        turns = f"{earlier.turns} turn{'s' if earlier.turns != 1 else ''}"
        return (
            f"This notebook has an earlier session {earlier.id[:8]} ({turns}); this cell starts a "
            "new one — run `%agent resume` to continue the earlier one instead."
        )

    def flush(self) -> None:
        if self.journal is not None:
            self.journal.flush()

    def shutdown(self) -> None:
        try:
            if self.journal is not None:
                self.journal.close()
                self.journal = None
        finally:
            self.shared.close()

    def _install_tools(self, agent: Agent) -> None:
        for definition in builtin_tools(
            agent,
            namespace=self.namespace,
            shell=self.shell,
            images=self.settings.images,
            on_interrupt=lambda: agent.cancel(USER_CANCEL),
            ask=self.bridge.ask_user,
            desk=self.desk,
            store=self.store,
            live=lambda: [self.journal] if self.journal is not None else [],
            live_output=self._live_output,
        ):
            agent.registry.register(definition)
        if self.desk is not None:
            self.desk.offer(agent)
        if self.mcp is not None:
            self.mcp.follow(
                agent, lambda: agent.session.header.ai_policy or "full", self.settings.images
            )

    def _approval_context(self, agent: Agent) -> Callable[[], PromptContext | None]:
        def ctx() -> PromptContext | None:
            policy = agent.approval_policy
            tools = ", ".join(f"{k}={v}" for k, v in sorted(policy.tools.items()))
            text = f"default for tools that change things: {policy.default}" + (
                f"; per tool: {tools}" if tools else ""
            )
            return PromptContext(name="approval policy", order=20, text=text)

        return ctx

    # --- the view of the running cell ----------------------------------------------------------

    @property
    def view(self) -> TurnView | None:
        """The running chat cell's view, where approvals and questions go (``kernel.host.bridge``)."""
        return self.bridge.view

    @view.setter
    def view(self, view: TurnView | None) -> None:
        self.bridge.view = view

    def resolve_approval(self, request_id: str, outcome: str) -> None:
        self.bridge.resolve_approval(request_id, outcome)

    def _live_output(self, call_id: str) -> LiveTap | None:
        """Where a ``python`` call shows its output while it runs: its card in the running view."""
        view = self.view
        return view.live_output(call_id) if view is not None else None

    # --- prices -----------------------------------------------------------------------------------

    def model_info(self, provider: str, model: str) -> ModelInfo | None:
        """The provider's metadata for ``model`` with the one price source laid over it: a price set
        with ``set_price`` (the store's ``prices`` table), else the catalogue's list price."""
        p = self.agent.providers.get(provider)
        if p is None:
            return None
        return priced(p.model_info(model), self._user_prices().get((provider, model)))

    def user_price(self, provider: str, model: str) -> UserPrice | None:
        """The price set with ``set_price`` for ``model`` of ``provider``, if any."""
        return self._user_prices().get((provider, model))

    def _user_prices(self) -> dict[tuple[str, str], UserPrice]:
        """The ``prices`` table, re-read after a ``set_price`` in this process (kept on a failure)."""
        gen = price_generation()
        if self.store is None or gen == self._prices_generation:
            return self._prices
        try:
            self._prices = read_prices(self.store)
        except Exception:  # a busy or unreadable store: keep the prices already known
            _log.warning("could not read the prices table", exc_info=True)
            return self._prices
        self._prices_generation = gen
        return self._prices

    # --- commands ---------------------------------------------------------------------------------

    def set_approval(self, mode: ApprovalMode, tool: str | None = None) -> None:
        self.agent.set_approval(mode, tool)

    def set_reasoning(self, effort: str | None) -> str:
        """Set the effort of the next requests (``None``: the model's default); it stays for later
        sessions of this kernel (``%agent new``, ``resume``) while their model takes it."""
        self.agent.set_reasoning(effort)
        self.settings = replace(self.settings, reasoning=effort or "")
        return self.reasoning_text()

    def reasoning_text(self) -> str:
        """The effort the next request sends, and what the model takes (``%agent status``)."""
        agent = self.agent
        info = agent.model_info
        try:
            effort, default = agent.effective_reasoning()
        except LlmError as exc:
            return f"{agent.reasoning_effort} — {exc.failure.message}"
        if effort is None:
            text = "not sent (the model's own default applies)"
        else:
            why = "the model's default" if default else "set"
            text = f"{effort} ({why})"
        if info.reasoning_efforts:
            text += f"; {agent.model} takes {', '.join(info.reasoning_efforts)}"
        elif info.label is None:  # not the offline demo model, which does not reason
            text += f"; efforts are passed to {agent.provider.id} as given"
        if info.reasoning_note:
            text += f" — {info.reasoning_note}"
        return text

    def vision_text(self) -> str:
        """Whether the next request sends images, and why (``%agent status``)."""
        return vision_text(self.agent)

    def _keep_reasoning(self) -> str:
        """After a route change the effort set stays if the new model takes it, else the model's
        default applies; the returned note says so (``""`` when nothing changed)."""
        effort = self.agent.reasoning_effort
        if effort is None:
            return ""
        try:
            self.agent.set_reasoning(effort)
        except LlmError:
            self.agent.reasoning_effort = None
            self.settings = replace(self.settings, reasoning="")
            now, _ = self.agent.effective_reasoning()
            return (
                f" (it does not take reasoning effort {effort!r}: its default applies, "
                f"{now or 'none sent'})"
            )
        return ""

    def switch_model(self, model: str) -> str:
        """A model of the current provider for the next request, kept for later sessions."""
        agent = self.agent
        agent.set_route(model=model)
        self.windows.prefetch(agent.provider, model)
        if agent.provider.id in BUILTIN_PROVIDERS:
            self.settings = replace(self.settings, model=f"{agent.provider.id}:{model}")
        return f"{agent.provider.id}:{model}" + self._keep_reasoning()

    def switch_provider(self, provider: str | None = None, model: str | None = None) -> str:
        if provider is not None and provider != "offline" and provider not in BUILTIN_PROVIDERS:
            raise UsageError(
                f"unknown provider {provider!r}; choose one of offline, {', '.join(sorted(BUILTIN_PROVIDERS))}"
            )
        target = provider if provider is not None else self.settings.provider
        base_url = self._base_url_for(target)
        if model is None and provider is None:
            model = self.settings.model
        elif model is None:  # the model configured at start belongs to the provider it started with
            model = self._configured.model if target == self._started_with else ""
        settings = replace(
            self.settings,
            provider=target,
            model=model,
            base_url=base_url,
            base_url_provider=target if base_url else "",
        )
        new_provider, new_model, note = choose_provider(settings, self.keys)
        self.settings = settings
        self.agent.set_route(provider=new_provider, model=new_model)
        self.windows.prefetch(new_provider, new_model)
        self.provider_note = note
        return note + self._keep_reasoning()

    def _base_url_for(self, provider: str) -> str:
        """The base URL configured for ``provider``: the one given at start, else a ``DSH_BASE_URL``
        set since (``%env``) when it belongs to ``provider``; ``""`` when neither does."""
        start = self._configured
        if start.base_url and start.base_url_provider == provider:
            return start.base_url
        env = os.environ
        url = env.get("DSH_BASE_URL", "").strip()
        owner = base_url_owner(
            env.get("DSH_PROVIDER", "").strip(), env.get("DSH_MODEL", "").strip()
        )
        return url if url and owner == provider else ""

    def new_session(self, session: Session | None = None) -> Agent:
        self._hinted = True  # the user chose a session (new, resume, fork, replay): no hint
        self.session_chosen = True
        self.agent = self._build_agent(session)
        return self.agent

    def branch(self, session: Session) -> Agent:
        """Go on with ``session``, a branch of the current conversation (``kernel.rewind``): its
        agent keeps the current one's route (provider and model: ``%agent model`` holds across a
        rewind) and the user's approval decisions."""
        old = self.agent
        agent = self.new_session(session)
        agent.set_route(provider=old.provider, model=old.model)
        agent.adopt_approval(old.approval_policy, "rewind")
        return agent
