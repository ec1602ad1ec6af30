"""The payloads of the notebook's events (issue 18), declared beside ``session.payloads``, whose
``PAYLOADS`` map names them (split out only to keep that module under the size cap).

Like ``session.payloads``, this module does not use ``from __future__ import annotations``:
``TypedDict`` reads ``NotRequired`` from evaluated annotations.
"""

from typing import NotRequired, TypedDict


class NotebookInsertCell(TypedDict):
    """One cell of a `notebook/insert`: its type, its source as inserted, the source's sha256 (hex)."""

    cell_type: str
    source: str
    sha256: str


class NotebookInsert(TypedDict):
    """The agent added cells to the notebook (`notebook_insert`, issue 18), logged before the call's
    result: `applied` is `extension` (through the frontend extension; `inserted` holds the new
    cells' ids in order), `set_next_input` (no extension: the first cell went into the chat cell's
    execute reply as the `set_next_input` payload; the frontend may ignore it) or `card` (no
    extension and that payload already taken: only shown to copy). Informational (ignorable);
    replay never applies it again."""

    callId: str
    applied: str
    cells: list[NotebookInsertCell]
    inserted: list[str]
    notebook: NotRequired[str]
    """The notebook's path as the frontend names it (else the saved file's, when known)."""
    after: NotRequired[str]
    """The id of the cell the new cells went below (for `set_next_input`: the anchor asked for)."""
