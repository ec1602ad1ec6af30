"""``DshKernel``: the IPython kernel with an agent. Overrides ``do_*`` only.

* Python cells go to ``IPythonKernel.do_execute`` unchanged (completion, inspection, rich display,
  widgets, magics and tracebacks behave as in the stock kernel).
* Chat cells expand ``$`x``` / ``&`fn``` references, send the message to the agent
  (``followup``), show a live view of the turn, and *await* the turn on the kernel's own event loop
  — ipykernel keeps processing widget comm messages meanwhile, so Stop, the steer box and the
  approval buttons work mid-turn. While the turn runs the kernel installs its own SIGINT handler
  (``loop.add_signal_handler``): the Jupyter interrupt cancels the turn at once instead of killing
  the process. At the end the view's output is updated with a static Markdown/HTML rendering so a
  saved notebook reads well without a kernel.
* ``%%sql`` cells query the session store.
* A frontend that renders no widgets (``jupyter console``, qtconsole, a ``jupyter_client`` script)
  gets the turn as ``stream`` text instead of the widget view (``kernel.host.frontends`` decides,
  ``kernel.host.viewing`` shows); on the ``dsh`` kernel a console's ``exit`` and ``quit``
  (``EXIT_CELLS``) run as Python, so the console leaves.
* A cell that is exactly ``%agent compact`` is awaited here too (``kernel.magic.compact``): it may wait for
  a model's summary, which IPython's line magics cannot; the interrupt stops it.

A failed cell of ours replies ``status: error`` with ``ename`` = the stable failure code (UPPER_SNAKE,
see ``dsh_kernel.errors``: ``AUTH``, ``INVALID_PROMPT``, ``ABORTED`` for a stopped turn, ``INTERNAL``)
and ``evalue`` = what happened and what to do; our own tracebacks are never shown. A failed
``%agent`` command fails its cell the same way (``magics``), through IPython.

Secrets (``_protect_secrets``, at start): the redactor learns the provider keys and the credentials
of configured base URLs, then the keys move out of ``os.environ`` into the process's key store (so
no tool, subprocess or ``repr(os.environ)`` finds them; ``dsh_kernel.api_key`` gives them to code of
your own), and so does the shared store's ``PGPASSWORD`` (given to libpq explicitly by the
shipper), and the kernel's log handlers get the redacting filter. Every error the kernel replies
with is redacted too.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Any, assert_never, cast

from ipykernel.ipkernel import IPythonKernel

from dsh_kernel import __version__
from dsh_kernel.abort import USER_CANCEL
from dsh_kernel.errors import DshError
from dsh_kernel.failures import describe_failure
from dsh_kernel.kernel._ipy import user_namespace
from dsh_kernel.kernel.cells import Cell, classify
from dsh_kernel.kernel.configuration import START_VARIABLES, traitlets
from dsh_kernel.kernel.interrupts import sigint_calls
from dsh_kernel.kernel.magic.compact import is_compact_cell

if TYPE_CHECKING:
    # Imported when first used: the agent stack doubles the kernel's start-up time otherwise.
    from dsh_kernel.errors import StoreError
    from dsh_kernel.kernel.host.agent_host import AgentHost
    from dsh_kernel.kernel.toolbox.notebook import NotebookDesk
    from dsh_kernel.llm.types import Message
    from dsh_kernel.mcp.servers import McpServers
    from dsh_kernel.store.layout import Store


class DshKernel(IPythonKernel):
    """The DSH Agent kernel: IPython with chat, ``%%sql`` and ``%agent`` cells (``do_*`` overrides only)."""

    implementation = "dsh-kernel"
    implementation_version = __version__

    @property
    def banner(self) -> str:
        return f"DSH Agent {__version__}: an LLM agent in your notebook (IPython inside)"

    # The configurable traitlets (``c.DshKernel.<name>``), one per row of the settings table.
    vars().update(traitlets())

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)  # pyright: ignore[reportUnknownMemberType]
        self._host: AgentHost | None = None
        self._awaiting: dict[str, Any] | None = None
        """The ``execute_request`` of the chat, ``%%sql`` or compact cell that is awaiting, if any
        (``_publish_status``)."""
        from dsh_kernel.kernel.notebook.comm import NotebookComms

        self.notebook_comms = NotebookComms()
        """The ``dsh.notebook`` comms of the frontends (``kernel.notebook.comm``), kept from start."""
        manager = getattr(self, "comm_manager", None)
        if manager is not None:
            self.notebook_comms.register(manager)
        from dsh_kernel.kernel.host.frontends import WidgetClients

        self.widget_clients = WidgetClients()
        """The client sessions whose widget manager opened ``jupyter.widget.control``
        (``kernel.host.frontends``): they render the widget view."""
        self.widget_clients.ensure(manager)
        self._chat_cells = getattr(self, "default_cell") == "chat"  # noqa: B009 (a generated trait)
        if self._chat_cells and self.shell is not None:
            # IPython runs (and records in its history) a %%python cell as typed; this drops the
            # routing line before IPython parses it (its own %%python magic runs a subprocess).
            self.shell.input_transformers_cleanup.insert(0, python_cell_lines)
        import os

        self._start_env = {k: os.environ[k] for k in START_VARIABLES if k in os.environ}
        """The variables read at kernel start (``kernel.configuration``: the store's, the course's,
        who the user is): later changes to ``os.environ`` from the notebook change nothing."""
        self._protect_secrets()
        self._log_to_kernel_log()
        self._store = self._open_store()
        self.mcp: McpServers | None = None
        """The MCP servers (``kernel.mcp``), made and started in ``start``."""
        self._capsules_read = False
        """The first chat cell looked for a conversation in the notebook's capsules."""
        self._deleted_cells: set[str] = set()
        """Cells a frontend reported deleted, for the next chat cell (``kernel.rewind``)."""

    def _protect_secrets(self) -> None:
        """See the module docstring (light imports only: this runs at kernel start)."""
        from dsh_kernel.kernel.shared import take_password
        from dsh_kernel.llm.keys import KEYS
        from dsh_kernel.llm.secrets import REDACTOR, install_log_filter

        REDACTOR.refresh()
        REDACTOR.add_url(str(getattr(self, "base_url")))  # noqa: B009
        install_log_filter(self.log)
        for warning in KEYS.take_environment():
            self.log.warning("dsh: %s", warning)
        take_password(self.log)

    def _log_to_kernel_log(self) -> None:
        """The package's warnings (``logging.getLogger("dsh_kernel.…")``) go where the kernel's own
        log goes (Jupyter's terminal), redacted — not to ``logging.lastResort``, whose
        ``sys.stderr`` is the notebook's stream inside a kernel."""
        import logging

        from dsh_kernel.llm.secrets import install_log_filter

        package = logging.getLogger("dsh_kernel")
        if package.handlers:
            return
        handlers = list(getattr(self.log, "handlers", []))
        for handler in handlers:
            package.addHandler(handler)
        if handlers:
            package.propagate = False
        install_log_filter(package)

    def _open_store(self) -> Store | StoreError:
        """Open the store once, at start: when it cannot be written say so in the kernel log (where
        Jupyter's terminal shows it) — chat cells then warn again and keep the session in memory —
        and when a configured shared store is off (``%agent status`` says it again)."""
        from dsh_kernel.errors import StoreError
        from dsh_kernel.kernel.configuration import environment, setting_value, trait_values
        from dsh_kernel.kernel.shared import check_at_start
        from dsh_kernel.store.layout import Store

        traits, env = trait_values(self), environment(self._start_env)
        try:
            store: Store | StoreError = Store.open(str(setting_value("store", traits, env)))
        except StoreError as exc:
            self.log.warning("dsh: %s", exc.message)
            store = exc
        check_at_start(str(setting_value("shared_store", traits, env)), self.log)
        return store

    def start(self) -> None:
        super().start()
        self._start_mcp()

    def _start_mcp(self) -> None:
        """Make the MCP servers and start them in the background: never a failure of the kernel."""
        from dsh_kernel.errors import StoreError
        from dsh_kernel.kernel.configuration import environment, trait_values
        from dsh_kernel.kernel.mcp import start_servers

        root = None if isinstance(self._store, StoreError) else self._store.root
        try:
            self.mcp = start_servers(trait_values(self), environment(self._start_env), root)
        except Exception as exc:  # a bad setting: said in the kernel log and by `%agent mcp`
            self.log.warning("dsh: MCP servers not started: %s", exc)

    # --- the agent host (created lazily, on the first chat cell or %agent command) -------------

    @property
    def host(self) -> AgentHost:
        if self._host is None:
            from dsh_kernel.kernel.configuration import settings_from_kernel
            from dsh_kernel.kernel.host.agent_host import AgentHost

            assert self.shell is not None
            self._host = AgentHost(
                settings_from_kernel(self, self._start_env),
                store=self._store,
                namespace=user_namespace(self.shell),
                shell=self.shell,
                desk=self._desk(),
                mcp=self.mcp,
            )
        return self._host

    def _desk(self) -> NotebookDesk:
        from dsh_kernel.kernel.notebook.file import notebook_path
        from dsh_kernel.kernel.toolbox.notebook import NotebookDesk

        assert self.shell is not None
        return NotebookDesk(
            self.notebook_comms,
            namespace=user_namespace(self.shell),
            notebook_name=notebook_path(),
            python_cells=self._chat_cells,
        )

    def init_magics(self) -> None:
        from dsh_kernel.kernel.magic.agent import AgentMagics

        assert self.shell is not None
        self.shell.register_magics(
            AgentMagics(self.shell, host=lambda: self.host, client_session=self._client_session)
        )

    # --- execution -------------------------------------------------------------------------------

    async def do_execute(
        self,
        code: str,
        silent: bool,
        store_history: bool = True,
        user_expressions: dict[str, Any] | None = None,
        allow_stdin: bool = False,
        *,
        cell_meta: dict[str, Any] | None = None,
        cell_id: str | None = None,
    ) -> dict[str, Any]:
        if not getattr(self, "_dsh_magics", False):
            self._dsh_magics = True
            self.init_magics()
        # A request that is silent or keeps no history is a frontend's own machinery, never a
        # person's message: VS Code runs its start-up code (which sets __vsc_ipynb_file__) and its
        # variable viewer with store_history=False. Python, unless it starts with %%chat.
        machinery = silent or not store_history
        self._note_deleted_cells()
        typed_exit = not cell_id and allow_stdin and code.strip() in EXIT_CELLS
        chat_default = self._chat_cells and not machinery and not typed_exit
        cell = classify(code, "chat" if chat_default else "python")
        what = "%agent compact" if cell.kind == "python" and is_compact_cell(code) else cell.kind
        if what == "python":
            return await super().do_execute(  # pyright: ignore[reportUnknownMemberType]
                code,
                silent,
                store_history,
                user_expressions,
                allow_stdin,
                cell_meta=cell_meta,
                cell_id=cell_id,
            )
        count = self._count(code, store_history)
        self._awaiting = self.get_parent("shell")  # pyright: ignore[reportUnknownMemberType]
        try:
            if cell.kind == "chat":
                return await self._execute_chat(cell, count, silent, cell_id, allow_stdin)
            if cell.kind == "sql":
                return await self._execute_sql(cell, count)
            return await self._execute_compact(count)
        except DshError as exc:
            return self.error_reply(count, exc.code, describe_failure(exc.code, exc.message))
        except (
            Exception
        ) as exc:  # a bug of ours: never a traceback in the notebook, never a dead kernel
            self.log.exception("dsh: a %s cell failed", what)
            return self.error_reply(
                count,
                "INTERNAL",
                f"dsh-kernel failed on this {what} cell ({type(exc).__name__}: {exc}); the "
                "kernel log has the traceback — please report it",
            )
        finally:
            self._awaiting = None

    def _publish_status(
        self, status: str, channel: str, parent: dict[str, Any] | None = None
    ) -> None:
        """Keep the kernel *busy* while one of our cells awaits (a chat turn waiting for a click).

        While a turn runs the kernel answers other requests — JupyterLab ≥ 4.4 asks for a comm
        subshell on the control channel as the view's widgets arrive, and sends widget messages on
        it — and ipykernel 7 ends each answer with its own ``idle``. Lab's status bar shows the last
        status whatever its parent, so a turn waiting for approval read "Idle". Each ``idle`` of
        another request published while our cell awaits is followed here by a ``busy`` whose parent
        is that cell's ``execute_request``: the other request is still answered at once (with its
        own idle, which ipywidgets' message throttle waits for), and the status ends where the
        kernel really is."""
        super()._publish_status(status, channel, parent)  # pyright: ignore[reportUnknownMemberType]
        awaiting = self._awaiting
        if status != "idle" or not awaiting:
            return
        this: dict[str, Any] = parent or self.get_parent(channel)  # pyright: ignore[reportUnknownMemberType]
        if _msg_id(this) != _msg_id(awaiting):
            super()._publish_status("busy", channel, awaiting)  # pyright: ignore[reportUnknownMemberType]

    def _count(self, code: str, store_history: bool) -> int:
        shell = self.shell
        assert shell is not None
        count = shell.execution_count
        if store_history:
            with contextlib.suppress(Exception):
                shell.history_manager.store_inputs(count, code)  # type: ignore[union-attr]
            shell.execution_count += 1
        return count

    def ok_reply(self, count: int, payload: list[dict[str, Any]] | None = None) -> dict[str, Any]:
        """``payload``: a chat cell's ``set_next_input`` (``kernel.toolbox.notebook``)."""
        return {
            "status": "ok",
            "execution_count": count,
            "payload": payload or [],
            "user_expressions": {},
        }

    def error_reply(
        self, count: int, ename: str, evalue: str, payload: list[dict[str, Any]] | None = None
    ) -> dict[str, Any]:
        from dsh_kernel.llm.secrets import redact

        evalue = redact(evalue)
        content = {"ename": ename, "evalue": evalue, "traceback": [f"{ename}: {evalue}"]}
        self.send_response(self.iopub_socket, "error", content)  # pyright: ignore[reportUnknownMemberType]
        extra = {"payload": payload} if payload else {}
        return {"status": "error", "execution_count": count, **content, **extra}

    async def _execute_chat(
        self,
        cell: Cell,
        count: int,
        silent: bool,
        cell_id: str | None = None,
        allow_stdin: bool = False,
    ) -> dict[str, Any]:
        from dsh_kernel.kernel.course.policy import before_chat, check_offered
        from dsh_kernel.kernel.host.viewing import open_view
        from dsh_kernel.kernel.rewind import notebook_cell_id
        from dsh_kernel.transcript.turn import turn_end

        host = self.host
        # The AI policy (``kernel.course.policy``): AI_POLICY_OFF, or a new session for a new policy.
        notice = before_chat(host) if cell.body.strip() else None
        if notice is not None and not silent:
            print(notice)
        agent = host.agent
        assert self.shell is not None
        from dsh_kernel.kernel.chat_input import PromptError, expand_prompt
        from dsh_kernel.kernel.magic.vision import sends_images

        try:
            prompt = expand_prompt(
                cell.body,
                user_namespace(self.shell),
                images=host.settings.images,
                sends_images=sends_images(agent),
            )
        except PromptError as exc:
            return self.error_reply(count, "INVALID_PROMPT", str(exc))
        if prompt is None:
            return self.ok_reply(count)  # an empty chat cell is a no-op, like an empty code cell
        cell_id = notebook_cell_id(cell_id)
        if cell_id and not silent and self._import_capsules(host):
            agent = host.agent  # the conversation the notebook carries (``kernel.capsules``)
        if cell_id and not silent:  # a notebook's cell: it owns its turn (``kernel.rewind``)
            prompt = replace(prompt, message=await self._rewind(cell_id, prompt.message))
            agent = host.agent  # a rewind goes on with a new branch's agent
        check_offered(host, prompt.tools)  # explain: no &`fn` that is not read-only
        disposers: list[Callable[[], None]] = []
        try:
            disposers = [agent.registry.register(d) for d in prompt.tools]
        except DshError as exc:
            for dispose in disposers:
                dispose()
            return self.error_reply(
                count, "INVALID_PROMPT", f"cannot offer that function: {exc.message}"
            )
        write = self._text_writer() if self._wants_text(cell_id, allow_stdin) else None
        if self.mcp is not None:
            late = await self._wait_for_mcp(self.mcp, silent=silent, write=write)
            if late and not silent:
                (write or print)(late + ("\n" if write else ""))
            self.mcp.sync()  # what the policy in force (maybe changed by this cell) allows
        view = open_view(host, prompt.message.id, silent=silent, kernel=self, write=write)
        desk = host.desk  # the notebook tools serve this cell's frontend (kernel.notebook.tools)
        if desk is not None:
            parent: dict[str, Any] = self.get_parent("shell")  # pyright: ignore[reportUnknownMemberType]
            desk.begin_cell(
                agent, session=self._client_session(), cell_id=cell_id, meta=parent.get("metadata")
            )
        payload: list[dict[str, Any]] = []
        try:
            agent.followup(prompt.message)
            with sigint_calls(lambda: agent.cancel(USER_CANCEL)):
                await agent.when_idle()
        finally:
            for dispose in disposers:
                dispose()
            host.view = None
            view.close()
            if desk is not None:
                payload = desk.end_cell()
        journal = host.journal
        if journal is not None and journal.last_error is not None:
            # The agent cannot fail a turn that already ended; its last flush did, so say so.
            err = journal.last_error
            return self.error_reply(
                count, err.code, describe_failure(err.code, err.message), payload
            )
        end = turn_end(agent.session.events, prompt.message.id)
        if end is None:
            return self.ok_reply(count, payload)
        match end["kind"]:
            case "error":
                err = end.get("error")
                code = (err["code"] if err is not None else "") or "UNKNOWN"
                message = err["message"] if err is not None else ""
                detail = err.get("detail") if err is not None else None
                evalue = describe_failure(code, message, detail)
                return self.error_reply(count, code, evalue, payload)
            case "aborted":
                return self.error_reply(
                    count, "ABORTED", "the turn was stopped; what streamed so far is kept", payload
                )
            case "completed" | "blocked" | "max-steps" | "max-tokens" | "interrupted":
                return self.ok_reply(count, payload)
            case _:
                assert_never(end)

    def _import_capsules(self, host: AgentHost) -> bool:
        """At the first chat cell, the conversation the notebook's capsules carry, if this store
        does not hold it (``kernel.capsules``): whether the agent changed. A bad capsule raises
        ``CapsuleError`` (the cell fails in one line, before anything is sent; so does every chat
        cell after it until the notebook's file changes)."""
        if (
            self._capsules_read
            or not host.settings.capsule
            or host.session_chosen  # e.g. %agent replay: the user chose what to continue
            or host.agent.session.last_turn
        ):
            return False
        from dsh_kernel.kernel.capsules import import_notebook

        before = host.agent
        note = import_notebook(host)
        self._capsules_read = True
        if note is not None:
            print(note)
        return host.agent is not before

    def _note_deleted_cells(self) -> None:
        """Keep the ids of the cells a notebook frontend says were deleted (JupyterLab sends
        ``metadata.deletedCells`` with the next ``execute_request`` of any cell) for the next chat
        cell, which takes their turns out of the context (``kernel.rewind``)."""
        parent: dict[str, Any] = self.get_parent("shell")  # pyright: ignore[reportUnknownMemberType]
        meta: object = parent.get("metadata")
        raw = (
            cast("dict[str, object]", meta).get("deletedCells") if isinstance(meta, dict) else None
        )
        if isinstance(raw, list):
            from dsh_kernel.kernel.rewind import notebook_cell_id

            cells = (notebook_cell_id(c) for c in cast("list[object]", raw)[:10_000])
            self._deleted_cells.update(c for c in cells if c)

    async def _rewind(self, cell_id: str, message: Message) -> Message:
        """``message`` recording its cell, after shaping the context for it (``kernel.rewind``)."""
        from dsh_kernel.kernel.rewind import notebook_order, rewind, with_cell

        host = self.host
        deleted, self._deleted_cells = self._deleted_cells, set()
        if not host.settings.rewind:  # strict appending; the log still says which cell asked
            return with_cell(message, cell_id, None)
        import asyncio

        # An interrupt while the notebook is asked for its order ends the wait (the run order
        # stands in), never the kernel: an await with no SIGINT handler would kill it.
        asking = asyncio.ensure_future(notebook_order(self.notebook_comms, self._client_session()))

        def stop() -> None:
            asking.cancel()

        with sigint_calls(stop):
            try:
                order = await asking
            except asyncio.CancelledError:
                if not asking.cancelled():
                    raise
                order = None
        context = rewind(host, cell_id, deleted=deleted, order=order)
        return with_cell(message, cell_id, context)

    async def _wait_for_mcp(
        self, mcp: McpServers, *, silent: bool, write: Callable[[str], None] | None
    ) -> str | None:
        """Give MCP servers still starting a few seconds before the turn (``kernel.mcp``)."""
        import asyncio
        import uuid

        from dsh_kernel.kernel._ipy import display_raw, update_raw
        from dsh_kernel.kernel.configuration import environment, setting_value, trait_values
        from dsh_kernel.kernel.mcp import before_turn

        wait = setting_value("mcp_wait", trait_values(self), environment(self._start_env))
        display_id = uuid.uuid4().hex
        shown = [False]

        def show(text: str | None) -> None:
            if silent:
                return
            if write is not None:
                if text:
                    write(text + "\n")
                return
            if text:
                display_raw({"text/plain": text}, display_id=display_id)
                shown[0] = True
            elif shown[0]:
                update_raw({"text/plain": ""}, display_id=display_id)

        seconds = float(wait) if isinstance(wait, (int, float)) else 5.0
        interrupted = asyncio.Event()  # an interrupt ends the wait; the turn goes on without them
        with sigint_calls(interrupted.set):
            return await before_turn(mcp, seconds, show, interrupted)

    def _wants_text(self, cell_id: str | None, allow_stdin: bool) -> bool:
        """Whether this request's frontend gets the turn as text (``kernel.host.frontends``)."""
        from dsh_kernel.kernel.host.frontends import wants_text

        self.widget_clients.ensure(getattr(self, "comm_manager", None))
        session = self._client_session()
        notebooks = {fe.session for fe in self.notebook_comms.open()}
        return wants_text(
            cell_id=cell_id,
            allow_stdin=allow_stdin,
            session=session,
            widget_sessions=self.widget_clients.sessions | notebooks,
        )

    def _text_writer(self) -> Callable[[str], None]:
        """Writes ``stream`` (stdout) text under the running request, whatever message the kernel
        handles meanwhile (a comm message of another client changes the shell parent)."""
        import sys

        parent: dict[str, Any] = self.get_parent("shell")  # pyright: ignore[reportUnknownMemberType]
        session: Any = self.session
        socket: Any = self.iopub_socket
        topic: bytes = self._topic("stream")  # pyright: ignore[reportUnknownMemberType]

        def write(text: str) -> None:
            for stream in (sys.stdout, sys.stderr):  # what the cell printed comes first
                with contextlib.suppress(Exception):
                    stream.flush()
            content = {"name": "stdout", "text": text}
            session.send(socket, "stream", content, parent=parent, ident=topic)

        return write

    def _client_session(self) -> str | None:
        """The client session (header ``session``) of the running ``execute_request``."""
        from dsh_kernel.kernel.notebook.comm import client_session

        return client_session(self.get_parent("shell"))  # pyright: ignore[reportUnknownMemberType]

    async def _execute_compact(self, count: int) -> dict[str, Any]:
        """The ``%agent compact`` cell (``kernel.magic.compact``): its line, or its failure's."""
        import asyncio

        from dsh_kernel.kernel.course.policy import refuse_if_off
        from dsh_kernel.kernel.magic.compact import compact_cell
        from dsh_kernel.llm.secrets import redact

        refuse_if_off(self.host)
        task = asyncio.ensure_future(compact_cell(self.host))
        interrupted: list[bool] = []

        def stop() -> None:
            interrupted.append(True)
            task.cancel()

        try:
            with sigint_calls(stop):
                text = await task
        except asyncio.CancelledError:
            if not interrupted:
                raise  # the kernel itself is being stopped, not this cell
            return self.error_reply(
                count, "ABORTED", "%agent compact: stopped; the history is unchanged"
            )
        except DshError as exc:
            return self.error_reply(count, exc.code, f"%agent compact: {exc.message}")
        print(redact(text))
        return self.ok_reply(count)

    async def _execute_sql(self, cell: Cell, count: int) -> dict[str, Any]:
        from dsh_kernel.kernel.sqlcell import run_sql_cell

        assert self.shell is not None
        failure = await run_sql_cell(self.host, user_namespace(self.shell), cell)
        return self.ok_reply(count) if failure is None else self.error_reply(count, *failure)

    # --- lifecycle -------------------------------------------------------------------------------

    async def do_shutdown(self, restart: bool) -> dict[str, Any]:  # pyright: ignore[reportIncompatibleMethodOverride]
        if self.mcp is not None:
            # stdio servers run in their own process group: end them (the SDK escalates to a kill)
            import asyncio

            try:
                async with asyncio.timeout(10):
                    await self.mcp.stop()
            except Exception as exc:
                self.log.warning("dsh: MCP servers not all stopped at shutdown: %s", exc)
        if self._host is not None:
            try:
                self._host.shutdown()
            except Exception as exc:  # the journal's last flush failed: say so in the kernel log
                self.log.warning(
                    "dsh: the session journal could not be flushed at shutdown: %s", exc
                )
        return super().do_shutdown(restart)  # pyright: ignore[reportUnknownMemberType]


def _msg_id(message: dict[str, Any]) -> object:
    header: object = message.get("header")
    return cast("dict[str, object]", header).get("msg_id") if isinstance(header, dict) else None


EXIT_CELLS: frozenset[str] = frozenset({"exit", "quit", "exit()", "quit()"})
"""Cells that run as Python on the ``dsh`` kernel when the request names no cell and allows stdin (a
console: ``kernel.host.frontends``), instead of being a chat message: IPython's ``exit`` returns the
``ask_exit`` payload the console leaves on (and stops the kernel, as in any IPython kernel). A
notebook's cell (it has an id) or a headless run (no stdin) still sends them to the agent."""


def python_cell_lines(lines: list[str]) -> list[str]:
    """IPython cleanup transform (kernelspec ``dsh``): a ``%%python`` / ``%%py`` cell's body."""
    code = "".join(lines)
    cell = classify(code, "chat")
    if cell.kind != "python" or cell.body == code:
        return lines
    return cell.body.splitlines(keepends=True)
