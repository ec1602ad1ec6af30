"""What ``notebook_read`` reads: a notebook's cells, from the frontend or from the saved file, and
the text the model gets.

A ``Snapshot`` is the notebook at one moment: its cells in order (``NotebookCell``: id, type,
source, execution count, a short output summary, whether the agent wrote it), which cell is active,
and where it came from:

* ``frontend`` — the extension's ``read`` reply (``docs/dev/notebook-comm.md``): the notebook
  *model*, unsaved edits included (``snapshot_from_reply``);
* ``file`` — the saved ``.ipynb`` (``snapshot_from_file``), when no extension serves the cell: the
  file ``JPY_SESSION_NAME`` names (resolved like the AI policy's, ``kernel.notebook.file``),
  else VS Code's ``__vsc_ipynb_file__`` in the namespace (``fallback_file``). It may be stale: it
  is what was last saved, and the text says so with the file's modification time. A file over
  ``MAX_FILE_BYTES`` is refused unread (``NOTEBOOK_FILE_TOO_LARGE``, saying what to do: open the
  notebook where the extension serves it, or clear its large outputs), and ``SavedNotebooks``
  parses each version of a file once — keyed by (path, ``st_mtime_ns``, ``st_size``) — so a turn
  that reads a large saved notebook several times parses it once.

``render(snapshot, first, last)`` is the model's text: a header line, then each cell of the range
(1-based, inclusive; default all) as ``--- cell N · id … · type [count]`` and its source, each
source cut at ``MAX_SOURCE_CHARS``: whole cells in order, at most ``MAX_CELLS`` and at most
``MAX_TEXT_BYTES`` in all (the first cell always: a cell's text is bounded well under it), then a
line naming the first cell not shown (``first=N`` for the next read). No cell in a range is ever
left out in the middle. The caller redacts it (``llm.secrets``). A range outside the notebook is
``INVALID_ARGS`` naming the notebook's size.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Final, Literal, cast

from dsh_kernel.errors import ToolArgsError, ToolError
from dsh_kernel.jsonvalue import JsonObject, JsonValue
from dsh_kernel.kernel.notebook.comm import MAX_ID_CHARS, MAX_PATH_CHARS, frontend_text
from dsh_kernel.runtime.mime import summarize_output
from dsh_kernel.textcap import ECHO_CHARS

MAX_CELLS: Final = 60
"""Cells one read returns; the text says how to read the rest."""
MAX_SOURCE_CHARS: Final = 4_000
MAX_TEXT_BYTES: Final = 60_000
OUTPUT_SUMMARY_CHARS: Final = 300
"""As the extension's summary (the contract's 300 characters per cell)."""

MAX_FILE_BYTES: Final = 20_000_000
"""The largest saved notebook ``notebook_read`` parses (a 200 MB file took 11.6 s and over 500 MB
of memory, on every call). Large files are large outputs: images, long logs."""

NOTEBOOK_FILE_UNREADABLE: Final = "NOTEBOOK_FILE_UNREADABLE"
NOTEBOOK_FILE_TOO_LARGE: Final = "NOTEBOOK_FILE_TOO_LARGE"


@dataclass(frozen=True, slots=True, kw_only=True)
class NotebookCell:
    """One cell as ``notebook_read`` reports it."""

    id: str
    cell_type: str
    source: str
    execution_count: int | None = None
    outputs: str = ""
    by_agent: bool = False
    """The cell carries ``metadata.dsh.by == "agent"`` (the agent wrote it)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Snapshot:
    """The notebook at one moment, and where it was read from."""

    origin: Literal["frontend", "file"]
    path: str
    """The notebook's path as the frontend names it, or the file's path."""
    cells: tuple[NotebookCell, ...]
    active_cell_id: str | None = None
    dirty: bool | None = None
    saved_at: float | None = None
    """The file's modification time (``file`` only)."""


def _obj(value: object) -> dict[str, object]:
    return cast("dict[str, object]", value) if isinstance(value, dict) else {}


def _text(value: object) -> str:
    if isinstance(value, list):
        return "".join(v for v in cast("list[object]", value) if isinstance(v, str))
    return value if isinstance(value, str) else ""


def _count(value: object) -> int | None:
    return value if type(value) is int else None


def snapshot_from_reply(reply: JsonObject, fallback_path: str | None) -> Snapshot:
    """The extension's ``read`` reply as a ``Snapshot`` (unreadable cells are skipped; ids, types
    and the path capped as ``kernel.notebook.comm`` caps every frontend text)."""
    cells: list[NotebookCell] = []
    raw = reply.get("cells")
    for c in cast("list[object]", raw) if isinstance(raw, list) else []:
        d = _obj(c)
        cell_id = frontend_text(d.get("id"), MAX_ID_CHARS)
        if cell_id is None:
            continue
        dsh = _obj(d.get("metadata_dsh"))
        cells.append(
            NotebookCell(
                id=cell_id,
                cell_type=frontend_text(d.get("cell_type"), ECHO_CHARS) or "code",
                source=_text(d.get("source")),
                execution_count=_count(d.get("execution_count")),
                outputs=_text(d.get("outputs"))[:OUTPUT_SUMMARY_CHARS],
                by_agent=dsh.get("by") == "agent",
            )
        )
    path = frontend_text(reply.get("path"), MAX_PATH_CHARS)
    dirty = reply.get("dirty")
    return Snapshot(
        origin="frontend",
        path=path or fallback_path or "the open notebook",
        cells=tuple(cells),
        active_cell_id=frontend_text(reply.get("active_cell_id"), MAX_ID_CHARS),
        dirty=dirty if isinstance(dirty, bool) else None,
    )


def summarize_outputs(outputs: object) -> str:
    """A saved cell's outputs in at most ``OUTPUT_SUMMARY_CHARS`` characters: their types and the
    start of the first text, or an error's ``ename: evalue`` (as the extension makes it)."""
    items = [_obj(o) for o in cast("list[object]", outputs)] if isinstance(outputs, list) else []
    if not items:
        return ""
    for o in items:
        if o.get("output_type") == "error":
            text = f"{o.get('ename')}: {o.get('evalue')}"
            return text[:OUTPUT_SUMMARY_CHARS]
    kinds = sorted({str(k) for o in items for k in _obj(o.get("data"))} or {"stream"})
    first = ""
    for o in items:
        first = summarize_output(cast("dict[str, JsonValue]", o)).strip()
        if first:
            break
    head = f"{', '.join(kinds)}: {first}" if first else ", ".join(kinds)
    return f"{head} ({len(items)} output{'s' if len(items) != 1 else ''})"[:OUTPUT_SUMMARY_CHARS]


def _too_large(path: Path, size: int) -> ToolError:
    return ToolError(
        f"the saved notebook {path} is {size / 1_000_000:,.1f} MB, and without the notebook "
        f"extension notebook_read reads saved files of at most {MAX_FILE_BYTES // 1_000_000} MB "
        "(it would parse the whole file, outputs included, on every read); nothing was read. Ask "
        "the user to open the notebook in JupyterLab or Notebook 7 with the dsh-kernel extension "
        "(it reads the live notebook, whatever its size), or to clear its large outputs (Edit › "
        "Clear Outputs of All Cells, or of the cells with big images or logs) and save; meanwhile "
        "use `inspect` for the namespace",
        code=NOTEBOOK_FILE_TOO_LARGE,
    )


def snapshot_from_file(path: Path) -> Snapshot:
    """The saved notebook at ``path``; ``NOTEBOOK_FILE_TOO_LARGE`` (unread) over
    ``MAX_FILE_BYTES``, ``NOTEBOOK_FILE_UNREADABLE`` saying why when it cannot be read."""
    try:
        st = path.stat()
        if st.st_size > MAX_FILE_BYTES:
            raise _too_large(path, st.st_size)
        saved_at = st.st_mtime
        with path.open("rb") as f:
            data = f.read(MAX_FILE_BYTES + 1)  # it may have grown since the stat
        if len(data) > MAX_FILE_BYTES:
            raise _too_large(path, len(data))
        doc: object = json.loads(data.decode("utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise ToolError(
            f"the saved notebook {path} could not be read ({exc}); ask the user to save it, or "
            "read the namespace with `inspect` instead",
            code=NOTEBOOK_FILE_UNREADABLE,
        ) from exc
    raw = _obj(doc).get("cells")
    if not isinstance(raw, list):
        raise ToolError(f"{path} is not a notebook (no cells list)", code=NOTEBOOK_FILE_UNREADABLE)
    cells: list[NotebookCell] = []
    for i, c in enumerate(cast("list[object]", raw)):
        d = _obj(c)
        cell_id = d.get("id")
        dsh = _obj(_obj(d.get("metadata")).get("dsh"))
        cells.append(
            NotebookCell(
                id=cell_id if isinstance(cell_id, str) else f"(no id: cell {i + 1})",
                cell_type=str(d.get("cell_type") or "code"),
                source=_text(d.get("source")),
                execution_count=_count(d.get("execution_count")),
                outputs=summarize_outputs(d.get("outputs")),
                by_agent=dsh.get("by") == "agent",
            )
        )
    return Snapshot(origin="file", path=str(path), cells=tuple(cells), saved_at=saved_at)


class SavedNotebooks:
    """One parse per version of a saved notebook (module docstring): ``read(path)`` is
    ``snapshot_from_file``'s snapshot, reused while the file's (path, ``st_mtime_ns``,
    ``st_size``) stays the same. Only the last version read is kept: a kernel reads one notebook,
    and a snapshot holds sources and short output summaries, not the file."""

    def __init__(self) -> None:
        self._last: tuple[tuple[str, int, int], Snapshot] | None = None

    def read(self, path: Path) -> Snapshot:
        try:
            st = path.stat()
        except OSError:
            return snapshot_from_file(path)  # it says why, as NOTEBOOK_FILE_UNREADABLE
        stamp = (str(path), st.st_mtime_ns, st.st_size)
        if self._last is not None and self._last[0] == stamp:
            return self._last[1]
        snap = snapshot_from_file(path)
        self._last = (stamp, snap)
        return snap


def fallback_file(
    notebook_name: str | None, namespace: dict[str, object], cwd: Path
) -> Path | None:
    """The saved notebook to read without the extension: ``JPY_SESSION_NAME``'s file, else VS
    Code's ``__vsc_ipynb_file__``; ``None`` when neither names an existing file."""
    from dsh_kernel.kernel.notebook.file import notebook_file

    if notebook_name:
        found = notebook_file(notebook_name, cwd)
        if found is not None:
            return found
    vsc = namespace.get("__vsc_ipynb_file__")
    if isinstance(vsc, str) and vsc.strip():
        p = Path(vsc.strip()).expanduser()
        if p.is_file():
            return p
    return None


def cell_range(total: int, first: int | None, last: int | None) -> tuple[int, int]:
    """The 1-based inclusive range asked for, checked against ``total`` cells."""
    lo = 1 if first is None else first
    hi = total if last is None else min(last, total)
    if total == 0:
        return 1, 0
    if lo < 1 or lo > total or hi < lo:
        raise ToolArgsError(
            f"invalid arguments: cells {lo}..{last if last is not None else total} are outside "
            f"the notebook, which has {total} cells (numbered 1..{total})"
        )
    return lo, hi


def render(snap: Snapshot, first: int | None = None, last: int | None = None) -> str:
    """The model's text (module docstring)."""
    total = len(snap.cells)
    lo, hi = cell_range(total, first, last)
    shown_hi = min(hi, lo + MAX_CELLS - 1)
    if snap.origin == "frontend":
        state = "unsaved edits included" if snap.dirty else "as shown"
        where = f"live from the notebook frontend ({state})"
    else:
        when = (
            time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(snap.saved_at))
            if snap.saved_at is not None
            else "unknown"
        )
        where = (
            f"read from the saved file (saved {when}); it MAY BE STALE: edits and outputs since "
            "the last save are not in it"
        )
    head = f"Notebook {snap.path}: {total} cells, {where}."
    if snap.active_cell_id:
        head += f" The user's active cell: {snap.active_cell_id}."
    budget = MAX_TEXT_BYTES - _TAIL_BYTES - len(head.encode("utf-8"))
    parts = [head]
    n = lo
    while n <= shown_hi:
        block = _cell_text(n, snap.cells[n - 1])
        size = len(block.encode("utf-8")) + 1
        if size > budget and n > lo:
            break  # whole cells only: the next read starts at this one
        parts.append(block)
        budget -= size
        n += 1
    if n <= hi:
        why = "the text's size limit" if n <= shown_hi else f"at most {MAX_CELLS} per read"
        parts.append(f"… cells {n}..{hi} not shown ({why}): call notebook_read with first={n}")
    return "\n".join(parts)


_TAIL_BYTES: Final = 200
"""Room kept for the line that says which cells were not shown."""


def _cell_text(n: int, c: NotebookCell) -> str:
    """Cell ``n``'s header line, its source (cut at ``MAX_SOURCE_CHARS``) and output summary."""
    count = f" [{c.execution_count}]" if c.execution_count is not None else ""
    mark = " · written by the agent" if c.by_agent else ""
    lines = [f"--- cell {n} · id {c.id} · {c.cell_type}{count}{mark}"]
    source = c.source
    if len(source) > MAX_SOURCE_CHARS:
        source = (
            source[:MAX_SOURCE_CHARS]
            + f"\n… [{len(c.source) - MAX_SOURCE_CHARS:,} more characters not shown]"
        )
    lines.append(source if source else "(empty)")
    if c.outputs:
        lines.append(f"[outputs: {c.outputs}]")
    return "\n".join(lines)
