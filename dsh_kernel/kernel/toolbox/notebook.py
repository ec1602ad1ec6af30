"""The ``notebook_read`` and ``notebook_insert`` tools, and the running chat cell they serve.

``NotebookDesk`` is one per kernel. The kernel tells it which chat cell runs (``begin_cell`` with
the ``execute_request``'s client session and cell id; ``end_cell`` returns the reply's payload). It
picks where the notebook is for that cell: the ``dsh.notebook`` comm of the same client session
(``kernel.notebook.comm``), else the fallbacks.

**notebook_read** (read-only; ``{first?, last?}``, 1-based cells, inclusive): the cells as
``kernel.notebook.snapshot.render`` writes them, passed through the secret redactor. From the extension
the cells are the live notebook model; without it, the saved file (``JPY_SESSION_NAME``'s, else
VS Code's ``__vsc_ipynb_file__``) and the text says it may be stale; a file over 20 MB is refused
unread, and each version of the file is parsed once (``kernel.notebook.snapshot``). With neither the tool is not
offered for that cell (``begin_cell`` hides it), so the model is never told of a tool that cannot work.

**notebook_insert** (not read-only: under ``ask`` it asks first, and its card shows every cell it
will add, as it will be inserted — the ``%%python`` line below included (``present_insert``); ``explain``/``off`` withhold it, ``kernel.course.policy``): ``{cells: [{cell_type, source}],
after?}``. New cells only; it never changes or deletes one. ``after`` defaults to the cell this
turn last inserted, else the running chat cell (so a turn's cells read in order below it). On the
``dsh`` kernel a code cell gets a first line ``%%python`` (a plain cell there is a chat message),
unless it starts with a cell magic; on ``dsh-python`` a leading ``%%python``/``%%py`` line is
dropped (there it would run a subprocess). Every cell carries ``metadata.dsh = {session, call_id,
by: "agent"}``.

* With the extension: one ``insert`` request; its reply's ids are the result. An anchor that is gone
  is ``NOTEBOOK_ANCHOR_GONE`` and nothing was inserted (the frontend checks in the same transaction).
* Without it, from a notebook cell: the first cell of the turn's first insertion goes into the chat
  cell's execute reply as the standard ``set_next_input`` payload (``replace: false``) — one cell, as frontends allow, and
  below the chat cell whatever ``after`` says; the kernel cannot know whether the frontend honours
  it, and the description and result say so. Every cell is shown in the card to copy. From a
  console (``from_notebook_cell`` is false) there is no payload — it would overwrite the console's
  prompt with code that never ran — and the cells are only shown in the card (``applied: card``).
* Under ``%agent replay`` nothing is applied again: the recorded outcome of the call (its
  ``notebook/insert`` event, or its error) is returned and drawn in the card.

The cards and result texts are ``kernel.toolbox.notebook``.

Each applied insertion appends one ``notebook/insert`` event (``session.payloads.NotebookInsert``):
the notebook path, the anchor, the cells with their sha256, how it was applied, the inserted ids —
what the frontend answered capped as every frontend text is (``kernel.notebook.comm``): at most one
id per cell sent, each id and the path cut.

What the tools check before they act: the size caps of one ``notebook_insert``
(``check_insert_args``, run before approval so the card never shows an insertion that cannot
happen; a code cell the router would run as chat, ``kernel.cells.classify``, is refused) and whether
a chat cell's request came from a notebook cell or a console (``from_notebook_cell``, which decides
whether ``set_next_input`` may be sent). What the user sees of a call (``present_read``,
``present_insert_result``) and what an insertion's result tells the model (``insert_text``) are pure
functions of its arguments or result, so the live card, the approval card and a replayed card agree.
"""

from __future__ import annotations

import hashlib
import logging
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Final, Literal, cast

from dsh_kernel.errors import ToolArgsError, ToolError
from dsh_kernel.jsonvalue import JsonObject, JsonValue
from dsh_kernel.kernel.cells import cell_magic
from dsh_kernel.kernel.notebook.comm import (
    MAX_PATH_CHARS,
    PROTOCOL,
    Frontend,
    NotebookComms,
    frontend_text,
    inserted_ids,
)
from dsh_kernel.kernel.notebook.file import server_root
from dsh_kernel.kernel.notebook.snapshot import (
    SavedNotebooks,
    fallback_file,
    render,
    snapshot_from_reply,
)
from dsh_kernel.llm.secrets import redact
from dsh_kernel.llm.types import ContentBlock, TextBlock
from dsh_kernel.session.payloads import NotebookInsert, NotebookInsertCell
from dsh_kernel.tools.presentation import GenericCallView, ToolCallView
from dsh_kernel.tools.types import ToolContext, ToolDefinition, always_concurrent

if TYPE_CHECKING:
    from dsh_kernel.agent.agent import Agent
from dsh_kernel.kernel.cells import classify
from dsh_kernel.tools.presentation import (
    GenericResultView,
    ToolResultInfo,
    ToolResultView,
)

MAX_INSERT_CELLS: Final = 20
MAX_CELL_CHARS: Final = 50_000
"""Characters of one inserted cell's source (checked before approval: ``check_insert_args``)."""
MAX_INSERT_CHARS: Final = 100_000
"""Characters of all the sources of one ``notebook_insert`` call. A frontend takes seconds per
megabyte to insert; past its reply timeout an insertion may land with nobody told."""


def from_notebook_cell(metadata: object) -> bool:
    """Whether an ``execute_request`` with this ``metadata`` came from a notebook cell rather than
    a console. JupyterLab and Notebook 7 send ``cellId`` from both, but only a notebook's run adds
    ``deletedCells`` (``@jupyterlab/notebook``'s ``runCell``); VS Code's ``cellId`` is a
    ``vscode-notebook-cell:`` URI. Without ``cellId`` the origin is unknown (classic Notebook,
    nbclient 0.11 and papermill, ``jupyter_client`` scripts): counted as a notebook, as before;
    nbclient ignores ``set_next_input`` anyway."""
    meta = cast("dict[str, object]", metadata) if isinstance(metadata, dict) else {}
    cell_id = meta.get("cellId")
    if not isinstance(cell_id, str):
        return True
    return "deletedCells" in meta or cell_id.startswith("vscode-notebook-cell:")


def check_insert_args(args: JsonObject) -> list[JsonObject]:
    """``notebook_insert``'s cells, checked before approval (``ToolDefinition.check_args``): 1 to
    ``MAX_INSERT_CELLS``, each with a type and a source of at most ``MAX_CELL_CHARS`` characters,
    together at most ``MAX_INSERT_CHARS``; else ``INVALID_ARGS`` naming the cap and what to do."""
    raw = args.get("cells")
    if not isinstance(raw, list) or not raw:
        raise ToolArgsError("invalid arguments: $.cells: give at least one cell")
    if len(raw) > MAX_INSERT_CELLS:
        raise ToolArgsError(
            f"invalid arguments: $.cells: {len(raw)} cells; at most {MAX_INSERT_CELLS} per call"
        )
    out: list[JsonObject] = []
    total = 0
    for i, c in enumerate(cast("list[object]", raw)):
        d = cast("JsonObject", c) if isinstance(c, dict) else {}
        source = d.get("source")
        if d.get("cell_type") not in ("code", "markdown") or not isinstance(source, str):
            raise ToolArgsError("invalid arguments: each cell needs cell_type and source")
        if len(source) > MAX_CELL_CHARS:
            raise ToolArgsError(
                f"invalid arguments: $.cells[{i}].source: {len(source):,} characters; a cell "
                f"may have at most {MAX_CELL_CHARS:,} ({_TOO_BIG}); nothing was inserted"
            )
        if d.get("cell_type") == "code" and classify(source, "python").kind == "chat":
            raise ToolArgsError(
                f"invalid arguments: $.cells[{i}]: a %%chat cell would send its text to the agent "
                "again when run; write the code itself (or a markdown cell); nothing was inserted"
            )
        total += len(source)
        out.append(d)
    if total > MAX_INSERT_CHARS:
        raise ToolArgsError(
            f"invalid arguments: $.cells: {total:,} characters of source in one call; at most "
            f"{MAX_INSERT_CHARS:,} per call ({_TOO_BIG}, or insert the cells over several calls); "
            "nothing was inserted"
        )
    return out


_TOO_BIG: Final = (
    "large data does not belong in a cell: write it to a file, or have a short cell compute or "
    "load it"
)


def present_read(args: JsonObject) -> ToolCallView:
    """``notebook_read``'s card: which cells it reads."""
    first, last = args.get("first"), args.get("last")
    what = "the notebook"
    if first is not None or last is not None:
        what = f"notebook cells {first or 1}..{last if last is not None else 'end'}"
    return GenericCallView(title=f"read {what}", kind="read", raw_input=None)


def cells_text(cells: object) -> str:
    """The cells of an insertion as the card shows them, numbered, each source whole (to copy)."""
    items = cast("list[object]", cells) if isinstance(cells, list) else []
    parts: list[str] = []
    for n, c in enumerate(items, 1):
        d = cast("dict[str, object]", c) if isinstance(c, dict) else {}
        parts.append(f"── cell {n} · {d.get('cell_type')} ──\n{d.get('source')}")
    return "\n\n".join(parts)


def present_insert_result(args: JsonObject, info: ToolResultInfo) -> ToolResultView | None:
    """``notebook_insert``'s result card (an error keeps the default card)."""
    del args
    if info.is_error:
        return None
    return GenericResultView(content=insert_text(info.meta, for_model=False))


def insert_text(value: JsonValue, *, for_model: bool) -> str:
    """What an insertion's result says: to the model (``for_model``), or in its card."""
    d = value if isinstance(value, dict) else {}
    cells = d.get("cells")
    n = len(cells) if isinstance(cells, list) else 0
    what = f"{n} cell{'s' if n != 1 else ''}"
    are = "are" if n != 1 else "is"
    inserted = d.get("inserted")
    ids = ", ".join(str(i) for i in inserted) if isinstance(inserted, list) else ""
    after = d.get("after")
    below = f" below cell {after}" if isinstance(after, str) else ""
    replay = " (replayed: as recorded, not inserted again)" if d.get("replayed") else ""
    applied = d.get("applied")
    if applied == "extension":
        tail = (
            "; they are marked as written by you until the user runs or edits them"
            if for_model
            else ""
        )
        return f"inserted {what}{below} in {d.get('notebook')}: ids {ids}{tail}{replay}"
    if applied == "set_next_input":
        return (
            "no notebook extension serves this cell: the first cell is offered to the frontend "
            "with set_next_input at the end of the turn, below the chat cell; the kernel cannot "
            "know whether this frontend honours it"
            + (
                f"; all {what} are shown to the user in the card to copy"
                if for_model
                else "; copy the cells above"
            )
            + replay
        )
    if applied == "card" and d.get("console"):
        return (
            f"this chat cell ran in a console, not a notebook cell, and no notebook extension "
            f"serves it: nothing is added anywhere (set_next_input would overwrite the console's "
            f"input); the {what} {are} only shown to the user in the card to copy" + replay
        )
    if applied == "card":
        return (
            f"no notebook extension serves this cell and the turn's one set_next_input is taken: "
            f"the {what} {are} only shown to the user in the card to copy" + replay
        )
    return f"nothing inserted{replay}"


_log = logging.getLogger(__name__)

READ: Final = "notebook_read"
INSERT: Final = "notebook_insert"
NOTEBOOK_NO_ANCHOR: Final = "NOTEBOOK_NO_ANCHOR"

Applied = Literal["extension", "set_next_input", "card"]
"""How an insertion was applied: through the extension; its first cell in the ``set_next_input``
payload; or only shown in the card (a second insertion in one turn without the extension)."""


@dataclass(slots=True)
class RunningCell:
    """The chat cell that runs: its request's client session and cell id (``None``: not sent)."""

    session: str | None
    cell_id: str | None
    in_notebook: bool = True
    """The request came from a notebook cell, not a console (``from_notebook_cell``)."""
    last_inserted: str | None = None
    next_input: str | None = None
    """The text of the ``set_next_input`` payload this cell's reply carries."""


class NotebookDesk:
    """See the module docstring."""

    def __init__(
        self,
        comms: NotebookComms,
        *,
        namespace: dict[str, object],
        notebook_name: str | None,
        python_cells: bool,
        cwd: Path | None = None,
    ) -> None:
        self.comms = comms
        self.namespace = namespace
        self.notebook_name = notebook_name
        self.python_cells = python_cells
        """The ``dsh`` kernel: a code cell the agent writes starts with ``%%python``."""
        self.cwd = cwd or Path(os.getcwd())
        self.cell: RunningCell | None = None
        self.saved = SavedNotebooks()
        """The saved file's last parse, reused while the file is unchanged."""
        self._hidden: Callable[[], None] | None = None
        """Removes the filter that hides ``notebook_read`` (``offer``)."""

    # --- the running cell -------------------------------------------------------------------------

    def begin_cell(
        self,
        agent: Agent,
        *,
        session: str | None,
        cell_id: str | None,
        meta: object = None,
    ) -> None:
        """A chat cell starts (``meta``: its request's metadata): remember it, and offer
        ``notebook_read`` only if something serves it."""
        self.cell = RunningCell(
            session=session, cell_id=cell_id, in_notebook=from_notebook_cell(meta)
        )
        self.offer(agent)

    def end_cell(self) -> list[JsonObject]:
        """The chat cell ended: the execute reply's payload (``set_next_input`` or nothing)."""
        cell, self.cell = self.cell, None
        if cell is None or cell.next_input is None:
            return []
        return [{"source": "set_next_input", "text": cell.next_input, "replace": False}]

    def offer(self, agent: Agent) -> None:
        """Hide ``notebook_read`` from ``agent`` when neither a comm nor a saved file serves the
        running cell (no cell: the saved file alone decides). It stays so until the next call, so
        ``%agent tools`` between cells shows what the last chat cell was offered."""
        if self._hidden is not None:
            self._hidden()
            self._hidden = None
        if not self.read_available():
            self._hidden = agent.registry.restrict(deny=[READ])

    def frontend(self) -> Frontend | None:
        """The frontend serving the running cell (``NOTEBOOK_AMBIGUOUS`` when that is unclear)."""
        return self.comms.frontend_for(self.cell.session if self.cell is not None else None)

    def read_available(self) -> bool:
        session = self.cell.session if self.cell is not None else None
        if session and any(fe.session == session for fe in self.comms.open()):
            return True
        return self.saved_file() is not None

    def saved_file(self) -> Path | None:
        return fallback_file(self.notebook_name, self.namespace, self.cwd)

    def status_text(self, session: str | None) -> str:
        """``%agent status``'s ``notebook:`` line for the cell of client session ``session``:
        whether its frontend has the extension (its comm), and so what the two tools do there."""
        every = self.comms.open()
        mine = [fe for fe in every if session and fe.session == session]
        if len(mine) == 1:
            fe = mine[0]
            line = (
                f"extension {fe.describe()} in this cell's frontend: notebook_read reads the live "
                "notebook, notebook_insert inserts cells"
            )
            if fe.protocol != PROTOCOL:
                line += (
                    f"; it speaks protocol {fe.protocol}, this kernel {PROTOCOL}: reinstall "
                    "dsh-kernel, restart Jupyter and reload the page"
                )
            return line
        if mine and len({fe.path for fe in mine}) == 1 and mine[0].path is not None:
            return (
                f"extension {mine[-1].describe()} in this cell's frontend ({len(mine)} views of "
                "this notebook; the most recently opened serves): notebook_read reads the live "
                "notebook, notebook_insert inserts cells"
            )
        if mine:
            where = "; ".join(fe.describe() for fe in mine)
            return (
                f"{len(mine)} extension connections to different notebooks in this cell's frontend "
                f"({where}): the notebook tools refuse (NOTEBOOK_AMBIGUOUS); close the other "
                "notebooks on this kernel or reload the page"
            )
        saved = self.saved_file()
        read = (
            f"notebook_read reads the saved file {saved} (it may be stale)"
            if saved is not None
            else "notebook_read is not offered (no saved notebook file is known)"
        )
        others = len(every)
        elsewhere = (
            f" ({others} other frontend{'s' if others != 1 else ''} of this kernel "
            f"{'have' if others != 1 else 'has'} it)"
            if others
            else ""
        )
        return (
            f"no extension in this cell's frontend{elsewhere} — VS Code, nbclient and consoles "
            "have none; in JupyterLab or Notebook 7 it is missing or outdated (`jupyter "
            "labextension list` should list dsh-kernel; reload the page): notebook_insert offers "
            f"only its first cell through set_next_input, and {read}"
        )

    # --- the tools --------------------------------------------------------------------------------

    def tools(self, agent: Agent) -> list[ToolDefinition]:
        """Both tools, for ``agent`` (a new session's); then ``offer`` hides what is unavailable."""
        return [self._read_tool(), self._insert_tool(lambda: agent)]

    def _read_tool(self) -> ToolDefinition:
        async def execute(args: JsonObject, ctx: ToolContext) -> JsonValue:
            del ctx
            first, last = _int_arg(args, "first"), _int_arg(args, "last")
            fe = self.frontend()
            if fe is not None:
                reply = await self.comms.request(fe, {"request": "read"})
                snap = snapshot_from_reply(reply, fe.path)
            else:
                path = self.saved_file()
                if path is None:
                    raise ToolError(
                        "no notebook frontend extension serves this cell and no saved notebook "
                        "file is known (JPY_SESSION_NAME, __vsc_ipynb_file__), so the notebook "
                        "cannot be read; use `inspect` for the namespace",
                        code="NOTEBOOK_UNAVAILABLE",
                    )
                snap = self.saved.read(path)
            return redact(render(snap, first, last))

        return ToolDefinition(
            name=READ,
            description=(
                "Read the user's notebook: its cells in order (id, type, source, execution count, a "
                "short summary of the outputs), markdown and cells not yet run included, and which "
                "cell is active. Cells are numbered from 1; give `first`/`last` for a range. One "
                "read returns whole cells, at most 60 and about 60 kB; the result names the first "
                "cell not shown, to read next. Use the cell ids as `after` for notebook_insert. When "
                "the notebook is read from its saved file, the result says so: it may be stale."
            ),
            lean_description="Read the notebook's cells.",
            parameters={
                "type": "object",
                "properties": {
                    "first": {"type": "integer", "description": "First cell (1-based)."},
                    "last": {"type": "integer", "description": "Last cell, inclusive."},
                },
                "additionalProperties": False,
            },
            execute=execute,
            read_only=True,
            is_concurrency_safe=always_concurrent,
            present_call=present_read,
        )

    def _insert_tool(self, agent: Callable[[], Agent]) -> ToolDefinition:
        async def execute(args: JsonObject, ctx: ToolContext) -> JsonValue:
            current = agent()
            replayed = _replayed(current, ctx.call_id)
            if replayed is not None:
                return replayed
            cells = self._cells(args, session=current.session.id, call_id=ctx.call_id)
            cell = self.cell
            after = args.get("after")
            anchor = after.strip() if isinstance(after, str) and after.strip() else None
            if anchor is None and cell is not None:
                anchor = cell.last_inserted or cell.cell_id
            fe = self.frontend()
            applied: Applied
            if fe is not None:
                if anchor is None:
                    raise ToolError(
                        "no cell to insert after: give `after`, a cell id from notebook_read",
                        code=NOTEBOOK_NO_ANCHOR,
                    )
                reply = await self.comms.request(
                    fe, {"request": "insert", "after": anchor, "cells": cast("JsonValue", cells)}
                )
                inserted = inserted_ids(reply.get("inserted"), len(cells))
                # the notebook may have been renamed since its hello
                now = frontend_text(reply.get("path"), MAX_PATH_CHARS)
                applied = "extension"
                path = self._recorded(fe.hello_path, now or fe.path)
                if cell is not None and inserted:
                    cell.last_inserted = inserted[-1]
            else:
                applied, path, inserted = "card", self._path(), []
                if cell is not None and cell.in_notebook and cell.next_input is None:
                    cell.next_input = _source(cells[0])
                    applied = "set_next_input"
            payload = NotebookInsert(
                callId=ctx.call_id,
                applied=applied,
                cells=[_logged(c) for c in cells],
                inserted=inserted,
            )
            if path is not None:
                payload["notebook"] = path
            if anchor is not None:
                payload["after"] = anchor
            current.session.append("notebook/insert", payload, ignorable=True)
            if cell is not None and not cell.in_notebook and applied == "card":
                return cast("JsonValue", {**payload, "console": True})
            return cast("JsonValue", dict(payload))

        def render_result(args: JsonObject, value: JsonValue) -> tuple[ContentBlock, ...]:
            del args
            return (TextBlock(text=insert_text(value, for_model=True)),)

        return ToolDefinition(
            name=INSERT,
            description=(
                "Add new cells (code or markdown) to the user's notebook, below the cell whose id "
                "is `after` (default: below the cells you inserted this turn, else below the chat "
                "cell that is running). It only adds cells: it never changes, runs or deletes one. "
                "The user sees them marked as written by you and decides whether to run them. "
                "Write code cells as plain Python; a cell starting with a cell magic (%%sql, %%bash, "
                "…) is kept as written and runs that magic when the user runs it, and %%chat is "
                "refused (it would message you again). When no notebook extension is connected (VS "
                "Code, a headless run), only the first cell is offered to the frontend with "
                "Jupyter's set_next_input at the end of the turn, below the chat cell; the kernel "
                "cannot know whether the frontend honours it, and every cell is shown to the user "
                "to copy."
            ),
            lean_description="Add cells to the notebook, below cell `after`.",
            parameters={
                "type": "object",
                "properties": {
                    "cells": {
                        "type": "array",
                        "description": (
                            f"The cells to add, in order (1 to {MAX_INSERT_CELLS}; each source "
                            f"at most {MAX_CELL_CHARS:,} characters, all together at most "
                            f"{MAX_INSERT_CHARS:,})."
                        ),
                        "items": {
                            "type": "object",
                            "properties": {
                                "cell_type": {"type": "string", "enum": ["code", "markdown"]},
                                "source": {"type": "string"},
                            },
                            "required": ["cell_type", "source"],
                            "additionalProperties": False,
                        },
                    },
                    "after": {
                        "type": "string",
                        "description": "The id of the cell to insert below (from notebook_read).",
                    },
                },
                "required": ["cells"],
                "additionalProperties": False,
            },
            execute=execute,
            render=render_result,
            presentation_meta=lambda _args, value: value,
            read_only=False,
            check_args=check_insert_args,
            present_call=self.present_insert,
            present_result=present_insert_result,
        )

    def _path(self) -> str | None:
        """The notebook as ``sessions.notebook`` names it (``JPY_SESSION_NAME``), else VS Code's file."""
        if self.notebook_name:
            return self.notebook_name
        saved = self.saved_file()
        return str(saved) if saved is not None else None

    def _recorded(self, hello: str | None, now: str | None) -> str | None:
        """The frontend's path ``now`` (relative to the server root) in ``sessions.notebook``'s
        form: joined to the server root ``JPY_SESSION_NAME`` and the ``hello`` path imply
        (``notebook_file.server_root``), else ``now`` as it is."""
        root = server_root(self.notebook_name, hello)
        return root + now.lstrip("/") if root and now else now

    def _cells(self, args: JsonObject, *, session: str, call_id: str) -> list[JsonObject]:
        raw = check_insert_args(args)
        out: list[JsonObject] = []
        for d in raw:
            kind = d.get("cell_type")
            source = _source(d)
            if kind == "code":
                source = self.code_source(source)
            meta: JsonObject = {"dsh": {"session": session, "call_id": call_id, "by": "agent"}}
            out.append({"cell_type": kind, "source": source, "metadata": meta})
        return out

    def present_insert(self, args: JsonObject) -> ToolCallView:
        """``notebook_insert``'s card (and, under ``ask``, the approval's): every cell as it will be
        inserted — a code cell's source through ``code_source``, as ``_cells`` sends it — so what
        the user reads and allows is what lands, not the model's text."""
        raw = args.get("cells")
        items = cast("list[object]", raw) if isinstance(raw, list) else []
        shown: list[JsonValue] = []
        for c in items:
            d = cast("dict[str, JsonValue]", c) if isinstance(c, dict) else {}
            source = d.get("source")
            if d.get("cell_type") == "code" and isinstance(source, str):
                d = {**d, "source": self.code_source(source)}
            shown.append(d)
        n = len(shown)
        after = args.get("after")
        where = f" after cell {after}" if isinstance(after, str) and after else ""
        title = f"add {n} cell{'s' if n != 1 else ''} to the notebook{where}"
        return GenericCallView(title=title, kind="edit", raw_input=None, content=cells_text(shown))

    def code_source(self, source: str) -> str:
        """A code cell's source as this kernel runs it (module docstring)."""
        magic = cell_magic(source)
        if self.python_cells:
            return source if magic is not None else f"%%python\n{source}"
        if magic is not None and magic.name in ("python", "py") and not magic.args:
            return magic.body
        return source


def _int_arg(args: JsonObject, name: str) -> int | None:
    value = args.get(name)
    if value is None:
        return None
    if type(value) is not int:
        raise ToolArgsError(f"invalid arguments: $.{name}: expected a whole number")
    return value


def _source(cell: JsonObject) -> str:
    source = cell.get("source")
    return source if isinstance(source, str) else ""


def _logged(cell: JsonObject) -> NotebookInsertCell:
    source = _source(cell)
    return NotebookInsertCell(
        cell_type=str(cell.get("cell_type")),
        source=source,
        sha256=hashlib.sha256(source.encode("utf-8")).hexdigest(),
    )


def _replayed(agent: Agent, call_id: str) -> JsonValue:
    """Under ``%agent replay``: the recorded outcome of ``call_id``, never applied again; ``None``
    when the agent does not replay."""
    from dsh_kernel.store.replay import ReplayProvider

    provider = agent.provider
    if not isinstance(provider, ReplayProvider):
        return None
    recorded = provider.notebook_edits.get(call_id)
    if recorded is not None:
        return {**recorded, "replayed": True}
    failure = provider.tool_failures.get(call_id)
    if failure is not None:
        raise ToolError(f"(replayed) {failure[1]}", code=failure[0])
    return {"replayed": True, "applied": "none", "inserted": []}
