"""What the notebook tools check before they act (issue 18): the size caps of one
``notebook_insert`` (``check_insert_args``, run before approval so the card never shows an
insertion that cannot happen; a code cell the router would run as chat, ``kernel.cells.classify``,
is refused) and whether a chat cell's request came from a notebook cell or a
console (``from_notebook_cell``, which decides whether ``set_next_input`` may be sent).
"""

from __future__ import annotations

from typing import Final, cast

from dsh_kernel.errors import ToolArgsError
from dsh_kernel.jsonvalue import JsonObject
from dsh_kernel.kernel.cells import classify

MAX_INSERT_CELLS: Final = 20
MAX_CELL_CHARS: Final = 50_000
"""Characters of one inserted cell's source (checked before approval: ``check_insert_args``)."""
MAX_INSERT_CHARS: Final = 100_000
"""Characters of all the sources of one ``notebook_insert`` call. A frontend takes seconds per
megabyte to insert; past its reply timeout an insertion may land with nobody told (issue 18)."""


def from_notebook_cell(metadata: object) -> bool:
    """Whether an ``execute_request`` with this ``metadata`` came from a notebook cell rather than
    a console. JupyterLab and Notebook 7 send ``cellId`` from both, but only a notebook's run adds
    ``deletedCells`` (``@jupyterlab/notebook``'s ``runCell``); VS Code's ``cellId`` is a
    ``vscode-notebook-cell:`` URI. Without ``cellId`` the origin is unknown (classic Notebook,
    ``jupyter_client`` scripts): counted as a notebook, as before. nbclient sends ``cellId`` alone
    and so counts as a console; it ignores ``set_next_input`` anyway."""
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
