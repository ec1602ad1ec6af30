"""The ``dsh.notebook`` comm: the kernel's end of the link to the notebook frontend.

The contract is ``docs/dev/notebook-comm.md``; this module is its kernel side. It owns

* **the target**. ``NotebookComms.register(comm_manager)`` registers ``dsh.notebook`` (both kernels,
  at start). The frontend extension opens one comm per notebook panel and kernel connection; the
  kernel never opens one.
* **the registry** of open comms, keyed by the client session (the ``session`` field of the
  ``comm_open``'s header) that opened them. A ``comm_close`` (or a failed send) removes one.
* **where the notebook is** (``notebook``, a ``kernel.notebook.file.NotebookFile`` from
  ``JPY_SESSION_NAME``): the path a ``hello`` names, and every ``{"event": "path", "path"}``
  message (the notebook was renamed or moved), move it and the comm's ``path``. No reply is sent.
* **the choice of frontend** for a running cell (``frontend_for(session)``): the comm opened by the
  same client session as the cell's ``execute_request``. None → ``None`` (the tools fall back:
  ``kernel.toolbox.notebook``); several naming one notebook path (JupyterLab's "New View for
  Notebook": views share one model) → the most recently opened; several naming different paths
  (or an unknown one) → ``NOTEBOOK_AMBIGUOUS``, saying why, rather than guess.
* **threads**. JupyterLab ≥ 4.4 sends comm messages on a kernel subshell (ipykernel 7), so the
  handlers may run on another thread than the awaiting cell: a reply resolves its future with
  ``call_soon_threadsafe`` and readers of the registry take a copy (``open``).
* **requests**. ``request(frontend, body)`` sends ``{"id", **body}`` as a ``comm_msg`` and waits
  (on the kernel's loop, while the chat cell awaits: ipykernel 7 handles comm messages meanwhile)
  for the one reply whose ``reply_to`` is that id, at most ``timeout_s`` seconds
  (``NOTEBOOK_TIMEOUT``; the message says what the user can do: ``TIMEOUT_ADVICE``). A timed-out
  ``read`` did nothing; a timed-out ``insert`` may still land (the frontend applies it late), so
  its message says the cells may or may not have been added and to read before inserting again.
  A comm closed while a request waits fails it at once with ``NOTEBOOK_CLOSED``. A reply with ``ok: false`` raises its ``error.code`` (e.g.
  ``NOTEBOOK_ANCHOR_GONE``) with the frontend's message. Replies nobody waits for (late, or for an
  id we never sent) are dropped and logged.

**Caps.** Everything the frontend sends is text a page wrote, logged and resent to the model, so
it is capped where it enters (``frontend_text``, ``textcap.cap_echo``: a cut says how much):
a path at ``MAX_PATH_CHARS``, a cell id at ``MAX_ID_CHARS`` (nbformat's own limit is 64),
the frontend's name and version at ``textcap.ECHO_CHARS``, a refusal's message at
``MAX_MESSAGE_BYTES``; an error ``code`` that is not
UPPER_SNAKE of at most ``MAX_CODE_CHARS`` becomes ``NOTEBOOK_INSERT_FAILED``; an ``insert``
reply's ids are read for at most as many cells as were sent (``inserted_ids``).

Every failure is a ``ToolError`` with a stable code, so the tool pipeline turns it into a result the
model reads; nothing here can fail the kernel. A bad ``comm_open`` (no session, a ``hello`` that is
not an object) is kept with what could be read: the protocol field is only recorded, because a
frontend newer than this kernel still answers ``read`` and ``insert`` of protocol 1.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final, Protocol, cast

from dsh_kernel.errors import ToolError
from dsh_kernel.jsonvalue import JsonObject, JsonValue
from dsh_kernel.kernel.notebook.file import NotebookFile, notebook_path
from dsh_kernel.textcap import ECHO_CHARS, cap_echo, cap_text

_log = logging.getLogger(__name__)

TARGET: Final = "dsh.notebook"
PROTOCOL: Final = 1
REPLY_TIMEOUT_S: Final = 10.0

TIMEOUT_ADVICE: Final = (
    "The page's dsh-kernel notebook extension may be outdated or have failed, or the browser tab "
    "is frozen or asleep: ask the user to reload the page (`%agent status` shows, on its "
    "`notebook:` line, whether this cell's frontend has the extension; after a dsh-kernel upgrade "
    "restart Jupyter too) and to run the cell again; read the notebook before trying again"
)
"""What a ``NOTEBOOK_TIMEOUT`` tells the model to pass on: the user can act on it, the model can't."""

MAX_PATH_CHARS: Final = 1_000
"""A notebook path a frontend names (hello, replies, path updates)."""
MAX_ID_CHARS: Final = 64
"""A cell id a frontend names (nbformat 4.5: 1 to 64 characters)."""
MAX_CODE_CHARS: Final = 64
"""An error code a frontend's refusal carries."""
MAX_MESSAGE_BYTES: Final = 4_000
"""A frontend's refusal message (``textcap.cap_text``: head and tail)."""

NOTEBOOK_AMBIGUOUS: Final = "NOTEBOOK_AMBIGUOUS"
NOTEBOOK_TIMEOUT: Final = "NOTEBOOK_TIMEOUT"
NOTEBOOK_CLOSED: Final = "NOTEBOOK_CLOSED"
NOTEBOOK_INSERT_FAILED: Final = "NOTEBOOK_INSERT_FAILED"
NOTEBOOK_BAD_REPLY: Final = "NOTEBOOK_BAD_REPLY"


class CommLike(Protocol):
    """What this module uses of an ipykernel ``Comm`` (``comm.base_comm.BaseComm``)."""

    comm_id: str

    def send(self, data: JsonValue = None) -> None: ...

    def on_msg(self, callback: Callable[[dict[str, object]], None] | None) -> None: ...

    def on_close(self, callback: Callable[[dict[str, object]], None] | None) -> None: ...


class CommManagerLike(Protocol):
    """What this module uses of ipykernel's ``CommManager``."""

    def register_target(self, target_name: str, f: Callable[..., object]) -> None: ...


@dataclass(slots=True, kw_only=True)
class Frontend:
    """One open ``dsh.notebook`` comm: the notebook panel of one client session."""

    comm: CommLike
    session: str
    """The client session of its ``comm_open`` (header ``session``)."""
    path: str | None = None
    """The notebook's path relative to the server root, as its ``hello`` or a later ``path``
    message said."""
    hello_path: str | None = None
    """The path its ``hello`` said (with ``JPY_SESSION_NAME``, it tells the server root)."""
    frontend: str = ""
    version: str = ""
    protocol: int | None = None
    waiting: dict[str, asyncio.Future[JsonObject]] = field(
        default_factory=lambda: dict[str, "asyncio.Future[JsonObject]"]()
    )
    """Requests sent on this comm that wait for their reply, by id."""

    @property
    def comm_id(self) -> str:
        return self.comm.comm_id

    def describe(self) -> str:
        """``jupyterlab 0.1.0 (work/a.ipynb)``: for messages that name a frontend."""
        name = " ".join(p for p in (self.frontend or "a frontend", self.version) if p)
        return f"{name} ({self.path or 'path unknown'})"


def _obj(value: object) -> dict[str, object]:
    return cast("dict[str, object]", value) if isinstance(value, dict) else {}


def frontend_text(value: object, max_chars: int) -> str | None:
    """A string the frontend sent, capped at ``max_chars`` (one line; module docstring);
    ``None`` when it is not a non-empty string."""
    if not isinstance(value, str) or not value:
        return None
    return cap_echo(value, max_chars)


def inserted_ids(raw: object, sent: int) -> list[str]:
    """An ``insert`` reply's ``inserted``: the first ``sent`` ids (one per cell sent), each
    capped at ``MAX_ID_CHARS`` — what the ``notebook/insert`` event records."""
    items = cast("list[object]", raw) if isinstance(raw, list) else []
    ids = (frontend_text(i, MAX_ID_CHARS) for i in items[:sent])
    return [i for i in ids if i is not None]


def client_session(msg: object) -> str | None:
    """The client session (header ``session``) of a Jupyter message: the same for every message
    one kernel connection sends (a ``comm_open`` and the ``execute_request`` of its notebook)."""
    session = _obj(_obj(msg).get("header")).get("session")
    return session if isinstance(session, str) else None


class NotebookComms:
    """The registry and the requests (module docstring). One per kernel."""

    def __init__(
        self, *, timeout_s: float = REPLY_TIMEOUT_S, notebook: NotebookFile | None = None
    ) -> None:
        self.timeout_s = timeout_s
        self.notebook = notebook or NotebookFile(notebook_path(), Path.cwd())
        """Where the kernel's notebook file is, as the frontends say (module docstring)."""
        self.frontends: dict[str, Frontend] = {}
        """Open comms by comm id."""
        self._ids = itertools.count(1)

    # --- the target -----------------------------------------------------------------------------

    def register(self, manager: CommManagerLike) -> None:
        manager.register_target(TARGET, self.opened)

    def opened(self, comm: CommLike, msg: dict[str, object]) -> None:
        """The target's handler: keep the comm, keyed by the session that opened it."""
        hello = _obj(_obj(msg.get("content")).get("data"))
        session = client_session(msg)
        protocol = hello.get("protocol")
        path = frontend_text(hello.get("path"), MAX_PATH_CHARS)
        fe = Frontend(
            comm=comm,
            session=session or "",
            path=path,
            hello_path=path,
            frontend=frontend_text(hello.get("frontend"), ECHO_CHARS) or "",
            version=frontend_text(hello.get("version"), ECHO_CHARS) or "",
            protocol=protocol if isinstance(protocol, int) else None,
        )
        self.frontends[comm.comm_id] = fe
        comm.on_msg(lambda m: self._message(fe, m))
        comm.on_close(lambda _m: self.closed(fe))
        _log.info("dsh.notebook: %s opened by session %s", fe.describe(), fe.session or "?")
        if path is not None:
            self.notebook.named(path, path)

    def closed(self, fe: Frontend) -> None:
        """``comm_close`` (or a comm that cannot be written): forget it; fail what waits on it."""
        self.frontends.pop(fe.comm_id, None)
        for future in list(fe.waiting.values()):
            _settle(
                future,
                ToolError(
                    f"the notebook frontend {fe.describe()} closed its connection before it "
                    "answered (the notebook was closed, or its kernel changed); nothing is assumed "
                    "done — read the notebook again before retrying",
                    code=NOTEBOOK_CLOSED,
                ),
            )
        fe.waiting.clear()

    def _message(self, fe: Frontend, msg: dict[str, object]) -> None:
        data = _obj(_obj(msg.get("content")).get("data"))
        if data.get("event") == "path":
            self._moved(fe, data.get("path"))
            return
        reply_to = data.get("reply_to")
        future = fe.waiting.pop(reply_to, None) if isinstance(reply_to, str) else None
        if future is None:
            _log.warning("dsh.notebook: a message nobody waits for (reply_to=%r) dropped", reply_to)
            return
        _settle(future, cast("JsonObject", data))

    def _moved(self, fe: Frontend, raw: object) -> None:
        """The frontend says its notebook is now at ``raw`` (renamed or moved)."""
        path = frontend_text(raw, MAX_PATH_CHARS)
        if path is None:
            _log.warning(
                "dsh.notebook: a path message without a path from %s dropped", fe.describe()
            )
            return
        _log.info("dsh.notebook: %s is now %s", fe.describe(), path)
        fe.path = path
        self.notebook.named(path, fe.hello_path)

    # --- which frontend serves a cell -------------------------------------------------------------

    def open(self) -> list[Frontend]:
        """The open comms, copied: JupyterLab ≥ 4.4 may send comm messages on a kernel subshell,
        so ``opened``/``closed`` can run on another thread than the cell that reads this."""
        return list(self.frontends.copy().values())

    def frontend_for(self, session: str | None) -> Frontend | None:
        """The frontend of the client session ``session`` (module docstring): ``None`` when it has
        none; ``NOTEBOOK_AMBIGUOUS`` when it has several."""
        if not session:
            return None
        mine = [fe for fe in self.open() if fe.session == session]
        if (
            len(mine) > 1
            and mine[0].path is not None
            and all(fe.path == mine[0].path for fe in mine)
        ):
            return mine[-1]  # views of one notebook share its model: the most recently opened
        if len(mine) > 1:
            where = "; ".join(fe.describe() for fe in mine)
            raise ToolError(
                f"this cell's frontend has {len(mine)} notebook connections open to this kernel "
                f"({where}), so the kernel cannot tell which notebook is meant and does not "
                "guess; close the other notebook views of this kernel (or reload the page) and "
                "run the cell again",
                code=NOTEBOOK_AMBIGUOUS,
            )
        return mine[0] if mine else None

    # --- requests ---------------------------------------------------------------------------------

    async def request(self, fe: Frontend, body: JsonObject) -> JsonObject:
        """Send ``body`` with a fresh id and return the frontend's ``ok`` reply (module docstring)."""
        request_id = f"{body.get('request', 'r')}{next(self._ids)}"
        loop = asyncio.get_running_loop()
        future: asyncio.Future[JsonObject] = loop.create_future()
        fe.waiting[request_id] = future
        try:
            fe.comm.send({"id": request_id, **body})
        except Exception as exc:  # a closed socket, a comm already gone
            fe.waiting.pop(request_id, None)
            self.closed(fe)
            raise ToolError(
                f"could not send to the notebook frontend {fe.describe()} ({exc}); nothing was done",
                code=NOTEBOOK_CLOSED,
            ) from exc
        try:
            async with asyncio.timeout(self.timeout_s):
                reply = await future
        except TimeoutError as exc:
            kind = body.get("request")
            outcome = (
                "the cells may or may not have been added (a late insert still lands): call "
                "notebook_read to check before inserting again"
                if kind == "insert"
                else "nothing is assumed done"
            )
            raise ToolError(
                f"the notebook frontend {fe.describe()} did not answer the {kind} request within "
                f"{self.timeout_s:g} s; {outcome}. {TIMEOUT_ADVICE}",
                code=NOTEBOOK_TIMEOUT,
            ) from exc
        finally:
            fe.waiting.pop(request_id, None)
        return _checked(fe, reply)


def _settle(future: asyncio.Future[JsonObject], outcome: JsonObject | ToolError) -> None:
    """Resolve ``future`` on its own loop (comm handlers run there in ipykernel 7; be safe anyway)."""

    def apply() -> None:
        if future.done():
            return
        if isinstance(outcome, ToolError):
            future.set_exception(outcome)
        else:
            future.set_result(outcome)

    loop = future.get_loop()
    if loop.is_closed():
        return
    loop.call_soon_threadsafe(apply)


def _checked(fe: Frontend, reply: JsonObject) -> JsonObject:
    """The reply when ``ok``; its error (code and message) as a ``ToolError`` otherwise."""
    if reply.get("ok") is True:
        return reply
    error = reply.get("error")
    err = _obj(error)
    code = err.get("code")
    message = err.get("message")
    if reply.get("ok") is not False or not isinstance(code, str) or not code:
        raise ToolError(
            f"the notebook frontend {fe.describe()} sent a reply this kernel cannot read "
            f"(no ok/error): {str(reply)[:200]}",
            code=NOTEBOOK_BAD_REPLY,
        )
    said = cap_echo(code, MAX_CODE_CHARS)
    text = (
        cap_text(message, MAX_MESSAGE_BYTES)
        if isinstance(message, str) and message
        else f"the frontend said {said}"
    )
    known = len(code) <= MAX_CODE_CHARS and _CODE.fullmatch(code) is not None
    raise ToolError(text, code=code if known else NOTEBOOK_INSERT_FAILED)


_CODE: Final = re.compile(r"[A-Z][A-Z0-9_]*")
