"""Submitted notebooks in a course report: the conversations their capsules carry, as exports.

A notebook saved by dsh-kernel carries each chat turn's capsule (``dsh_kernel.capsule``). For the
report (``store.report``), ``notebook_exports(notebooks, workdir)`` reads each notebook's checked
capsules (``capsule.conversation.notebook_capsules``), joins them into the conversations they hold
(``join``), writes each conversation as a journal into a scratch store under ``workdir``, ingests
it and exports it as Parquet (``store.sessions.export_parquet``) — so a notebook's turns, tool
calls, errors and tokens are counted by the very queries that count an export's. Each export it
returns is marked ``self_reported``: anyone can edit a notebook and hash its capsules again, so the
shared store (or its exports) stays the graded source.

How a notebook's capsules are counted:

* **the conversations** — the capsules joined as the kernel joins them to import a notebook; a
  notebook whose kernel was restarted (a new session's first turn further down) holds several, each
  counted. Capsules no conversation takes (a cell whose turn a re-run superseded, turns below a
  cleared output) are left out, and said;
* **the whole conversation, as the notebook shows it** — turns an import or a rewind seeded from
  another session are the notebook's too: the journal is written without lineage, so nothing of it
  is ``seeded``. The session keeps its id, so the same session in an export and in a notebook is
  counted once (from the export: ``store.report``);
* **the student** — the ``user`` of the conversation's session header (its last turn's); when it
  is missing, the name of the folder the notebook was found in one level down, else the notebook's
  file name without ``.ipynb``. The notebook is the header's ``notebook``, else the file's name.

A notebook is not counted, and said in one line naming it, when its capsules are refused
(``CapsuleError``: malformed, altered, over the size bounds — the line names the cell), when it holds
no capsules at all (saved with ``DSH_CAPSULE=off``, stripped, or no chat cell ran), or when none
of its capsules starts a conversation.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from dsh_kernel.capsule.conversation import Joined, join, notebook_capsules
from dsh_kernel.capsule.format import Capsule, CapsuleError
from dsh_kernel.errors import DshError
from dsh_kernel.session.codec import dumps, encode_event, header_to_json
from dsh_kernel.session.events import SessionHeader
from dsh_kernel.session.log import Session

MAX_LEFT_SHOWN = 3
"""Capsules left out of a notebook's conversations named in its line (the rest counted)."""
SELF_REPORTED_FOLDER = "(notebook capsules)"
KERNEL_ADVICE = "; nothing of it is used"
"""Where a ``CapsuleError``'s advice to a notebook's owner begins (cut from the report's line)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Submitted:
    """One submitted notebook, and the name that stands for its student when a header has none."""

    path: Path
    folder: str


@dataclass(frozen=True, slots=True, kw_only=True)
class NotebookExports:
    """What ``notebook_exports`` made: the exports' folders (self-reported: ``store.report`` reads
    each as an ``Export`` of ``SELF_REPORTED_FOLDER``), the notebooks counted, and one line for
    each notebook not counted or counted with capsules left out."""

    exports: tuple[Path, ...]
    counted: tuple[Path, ...]
    notes: tuple[str, ...]


def _taken(c: Capsule, j: Joined) -> bool:
    """Whether ``join`` took ``c`` into ``j`` (its events are the log's, object for object)."""
    if not c.events:
        return True
    return c.stop <= len(j.events) and j.events[c.first] is c.events[0]


def conversations(capsules: list[tuple[str, Capsule]]) -> tuple[list[Joined], list[str]]:
    """The conversations ``capsules`` (in the notebook's order) hold — each a ``join`` of the
    capsules the ones before it left, while one of those starts a session — and why each capsule
    none took was left out."""
    rest = capsules
    found: list[Joined] = []
    reasons: dict[str, str] = {}
    while any(c.first == 0 for _, c in rest):
        joined = join(rest)
        for line in joined.left:
            where, _, why = line.partition(": ")
            reasons.setdefault(where, why)
        found.append(joined)
        rest = [(w, c) for w, c in rest if not _taken(c, joined)]
    left = [
        f"{w}: {reasons.get(w, 'its turn continues a conversation whose start is not here')}"
        for w, _ in rest
    ]
    return [j for j in found if j.header is not None and j.events], left


def _header(j: Joined, nb: Submitted) -> SessionHeader:
    h = j.header
    assert h is not None
    user = h.user if h.user is not None and h.user.strip() else nb.folder
    return SessionHeader(
        id=h.id,
        created_at=h.created_at,
        cwd=h.cwd,
        notebook=h.notebook if h.notebook is not None and h.notebook.strip() else nb.path.name,
        user=user,
        ai_policy=h.ai_policy,
    )


def _journal_text(j: Joined, header: SessionHeader, nb: Submitted) -> str:
    """The journal of ``j`` under ``header``; ``CapsuleError`` when the log is one the kernel
    would refuse (the capsules' events are checked one by one, not as a log)."""
    try:
        Session(header=header, seed=j.events)
    except (DshError, RecursionError) as exc:
        why = exc.message if isinstance(exc, DshError) else "events nested too deep"
        first = j.turns[0] if j.turns else "its cells"
        raise CapsuleError(
            f"{nb.path}: the capsules from {first} on hold a log dsh-kernel refuses ({why})",
            code="CAPSULE_INVALID",
        ) from exc
    return "".join(
        [dumps(header_to_json(header)) + "\n", *(encode_event(e) + "\n" for e in j.events)]
    )


def notebook_exports(notebooks: Sequence[Submitted], workdir: Path) -> NotebookExports:
    """Export the conversations ``notebooks`` carry under ``workdir`` (module docstring). A
    notebook not counted is a line of ``notes``, never an exception; ``StoreError`` only when the
    scratch store cannot be written."""
    from dsh_kernel.store.ingest.incremental import ingest
    from dsh_kernel.store.layout import Store
    from dsh_kernel.store.sessions import export_parquet

    stores: list[Store] = []
    ids: list[set[str]] = []
    journals: dict[Path, Path] = {}  # journal -> its notebook
    counted: list[Path] = []
    notes: list[str] = []
    for nb in notebooks:
        try:
            capsules = notebook_capsules(nb.path)
            if not capsules:
                notes.append(
                    f"{nb.path}: not counted — it holds no capsules (saved with DSH_CAPSULE=off, "
                    "stripped, or no chat cell ran)"
                )
                continue
            found, left = conversations(capsules)
            if not found:
                notes.append(f"{nb.path}: not counted — none of its capsules starts a conversation")
                continue
            written = [(h := _header(j, nb), _journal_text(j, h, nb)) for j in found]
        except CapsuleError as exc:
            # the kernel's advice (clear the cell, strip the capsules) is the student's, not ours
            why = exc.message.split(KERNEL_ADVICE, 1)[0]
            notes.append(f"{nb.path}: not counted — {why}")
            continue
        for header, text in written:
            # the same session twice (a notebook copied, or two of its conversations) goes to
            # separate stores: the report counts it once, as it does a session in two exports
            k = next((i for i, held in enumerate(ids) if header.id not in held), len(ids))
            if k == len(ids):
                stores.append(Store.at(workdir / f"store-{k}"))
                ids.append(set())
            ids[k].add(header.id)
            path = stores[k].journal_path(header)
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
            journals[path] = nb.path
        counted.append(nb.path)
        if left:
            shown = "; ".join(left[:MAX_LEFT_SHOWN])
            more = len(left) - MAX_LEFT_SHOWN
            notes.append(
                f"{nb.path}: {len(left)} capsule{'s' * (len(left) != 1)} left out — {shown}"
                + (f" (and {more} more)" if more > 0 else "")
            )
    exports: list[Path] = []
    for k, store in enumerate(stores):
        done = ingest(store)
        for issue in done.issues:
            nb_path = journals.get(store.root / issue.journal) or next(
                (n for j, n in journals.items() if j.name in issue.journal), issue.journal
            )
            notes.append(
                f"{nb_path}: a conversation of it is not counted — its log cannot be read "
                f"({issue.message})"
            )
        out = export_parquet(store, workdir / f"export-{k}")
        exports.append(out)
    return NotebookExports(exports=tuple(exports), counted=tuple(counted), notes=tuple(notes))
