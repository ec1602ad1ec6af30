"""The notebook is the conversation: a chat cell owns its turn, and re-running, editing or deleting
a chat cell rewinds what the model sees (issue 33; ``docs/rewind.md``).

**A chat cell owns its turn.** A notebook frontend sends the cell's id with its
``execute_request`` (``metadata.cellId``: JupyterLab, Notebook 7, nbclient and papermill; VS Code's
cell URI). The kernel records it on the prompt (``source.cellId``: logged, never sent), so
the log says which cell asked each turn (``turns.cell_id``). A request without one (a console, a
script) appends as before, and so does every request with ``c.DshKernel.rewind = False``.

**The context of a cell's turn** is the turns of the chat cells *above* it, then its own message:

* above in the notebook's order when the frontend extension answers a ``read`` (``order:
  notebook``), else in the order the cells were first run (``order: run``);
* a turn with no cell (asked from a console) stays where it was asked;
* a cell the frontend reported deleted (JupyterLab's ``metadata.deletedCells``, sent with the next
  ``execute_request`` of any cell) takes its turn out.

**How it is done without erasing anything** (``plan`` decides, ``apply`` does):

* the cell's own turn, or a turn of a cell now below it, is on the session → a **rewind**: a new
  session forked just before the first such turn (so a turn below is always dropped, never cut) (``store.sessions.fork``, ``parent_kind =
  'rewind'``), and the notebook's chat cells follow that branch from then on. The turns after the
  fork point stay in their session, queryable; they are the branch's ``dropped``. A turn after the
  fork point is not carried even if its cell is above (its place in the log is after the re-run
  point: a branch is a prefix). The new agent keeps the route (provider and model) and the user's
  approval decisions (logged ``approval/policy``, ``source: rewind``);
* a turn before the fork point (or on the session as it is) whose cell was deleted → its nodes
  on the surface are replaced by one short ``dsh/rewind`` note (the harness's surface
  ``replace``: the log keeps the turn, the model sees the note); a turn already folded into a
  compaction summary stays in that summary (said in ``left`` with ``summary: true``);
* the prompt carries what was done as ``source.context`` (``session.payloads.CellContext``):
  the branch point, the turns left out and why, and the names those turns created or changed in
  the namespace — which is **not** rolled back. The turn's view shows it as a notice, and the model
  reads the names in its runtime context (``rewound names``), so neither takes ``df`` for what the
  re-asked turn made.

Every request stays rebuildable from its session's log alone (a branch's seed is a copied prefix;
the notes are surface events), so the dev invariant holds on every branch.
"""

from __future__ import annotations

import asyncio
import logging
import weakref
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Final, Literal, cast

from dsh_kernel.ids import new_message_id
from dsh_kernel.jsonvalue import JsonObject, JsonValue
from dsh_kernel.llm.codec import message_to_json
from dsh_kernel.llm.types import Message, PluginSource, TextBlock, UserSource
from dsh_kernel.session.events import ReplaceOp, SessionEvent
from dsh_kernel.session.payloads import BranchPoint, CellContext, LeftTurn, payload_of

if TYPE_CHECKING:
    from dsh_kernel.agent.agent import Agent
    from dsh_kernel.agent.system_prompt import PromptContext
    from dsh_kernel.kernel.host.agent_host import AgentHost
    from dsh_kernel.kernel.notebook.comm import NotebookComms
    from dsh_kernel.session.log import Session

log = logging.getLogger(__name__)

REWIND_PLUGIN: Final = "dsh/rewind"
"""The plugin of the note that stands for a turn taken out of the context."""

ORDER_TIMEOUT_S: Final = 3.0
"""How long a chat cell waits for the notebook's order from the frontend before it goes by the
order the cells were first run."""

MAX_NAMES: Final = 40
"""Names listed in a context's ``names`` (the rest are counted)."""

Why = Literal["rerun", "below", "deleted", "after"]

_WHY_TEXT: Final[dict[str, str]] = {
    "rerun": "its cell was run again",
    "below": "its cell is below this one",
    "deleted": "its cell was deleted",
    "after": "it came after the re-run point",
}


MAX_CELL_ID_CHARS: Final = 256
"""A cell id longer than this is kept as its SHA-256 (VS Code's cell URIs run long; nbformat's ids
are at most 64 characters)."""


def notebook_cell_id(value: object) -> str | None:
    """The cell id a frontend sent, as the log keeps it: a non-empty string, a long one as
    ``sha256:<hex>``; anything else (a list, a number) is no cell id."""
    if not isinstance(value, str) or not value:
        return None
    if len(value) <= MAX_CELL_ID_CHARS:
        return value
    import hashlib

    return "sha256:" + hashlib.sha256(value.encode("utf-8", "surrogatepass")).hexdigest()


# --- reading a session: which cell asked each turn --------------------------------------------------


@dataclass(slots=True)
class TurnInfo:
    """One turn of a session's log, as the rewind sees it."""

    turn: int
    cell_id: str | None = None
    """The cell that asked it (its first prompt's ``source.cellId``), ``None``: no cell."""
    nodes: list[int] = field(default_factory=list[int])
    """Its seqs on the current surface, in surface order (a contiguous run)."""
    left: bool = False
    """Already out of the context (a ``dsh/rewind`` note stands for it)."""
    left_why: str | None = None
    """Why, as its note says (``deleted``, …)."""
    summary: bool = False
    """Part of it is inside a summary of several turns (a compaction): it cannot be cut alone."""


def _source(data: JsonObject) -> dict[str, JsonValue]:
    src = data.get("source")
    return cast("dict[str, JsonValue]", src) if isinstance(src, dict) else {}


def cell_of(data: JsonObject) -> str | None:
    """The cell id a prompt's data records (its source's ``cellId``: ``UserSource.extra`` is
    written into the source object), else ``None``."""
    src = _source(data)
    cell = src.get("cellId") if src.get("kind") == "user" else None
    return cell if isinstance(cell, str) and cell else None


def _note_form(data: JsonObject) -> dict[str, JsonValue] | None:
    """The form of a ``dsh/rewind`` note (``{"kind": "left-out", "turn", "why", "cellId"?}``)."""
    src = _source(data)
    if src.get("kind") != "plugin" or src.get("plugin") != REWIND_PLUGIN:
        return None
    form = src.get("form")
    return cast("dict[str, JsonValue]", form) if isinstance(form, dict) else None


def _note_turn(data: JsonObject) -> int | None:
    """The turn a ``dsh/rewind`` note stands for, else ``None``."""
    form = _note_form(data)
    turn = form.get("turn") if form is not None else None
    return turn if isinstance(turn, int) else None


PROMPT_SCAN: Final = 64
"""Events read after a ``turn/start`` for its prompt (it comes before the first stream chunk)."""


def prompt_of(session: Session, start: int) -> JsonObject | None:
    """The data of the prompt of the turn that ``turn/start`` ``start`` opens: its first
    user-sourced ``user/message``, read before the turn's first stream chunk, so the chunk events a
    finished turn stores compactly are never rebuilt (a long log is not walked at every cell)."""
    events = session.events
    for seq in range(start + 1, min(start + 1 + PROMPT_SCAN, len(events))):
        ev = events[seq]
        if ev.type == "user/message":
            data = cast("JsonObject", payload_of(ev, "user/message"))
            if _source(data).get("kind") == "user":
                return data
        elif ev.type in ("assistant/chunk", "assistant/message", "turn/end", "turn/start"):
            return None
    return None


def turns_of(session: Session) -> list[TurnInfo]:
    """Every turn of ``session``'s log with its cell, its surface nodes and whether it is left out.

    Read from the index of turn brackets, the prompts (``prompt_of``) and the surface: no stream
    chunk is read."""
    events = session.events
    turns: dict[int, TurnInfo] = {}
    for start in session.seqs_of("turn/start"):
        turn = payload_of(events[start], "turn/start")["turn"]
        data = prompt_of(session, start)
        turns.setdefault(turn, TurnInfo(turn, cell_of(data) if data is not None else None))
    for seq in session.surface:
        ev = events[seq]
        form = _note_form(ev.data) if ev.type == "user/message" else None
        noted = form.get("turn") if form is not None else None
        if isinstance(noted, int) and noted in turns:
            turns[noted].left = True
            why = form.get("why") if form is not None else None
            turns[noted].left_why = why if isinstance(why, str) else None
        owner = _owner(session, ev)
        if owner is None:
            for t in _sources_turns(session, ev):
                if t in turns:
                    turns[t].summary = True
        elif owner in turns:
            turns[owner].nodes.append(seq)
    for info in turns.values():
        if info.nodes and not _contiguous(session.surface, info.nodes):
            info.summary = True
            info.nodes = []
    return [turns[k] for k in sorted(turns)]


def _owner(session: Session, ev: SessionEvent) -> int | None:
    """The one turn a surface node belongs to: an appended node's own; a replacement's when all it
    replaced was of one turn (a pruned result, an overflow note, a rewind note), else ``None``."""
    if not isinstance(ev.surface_op, ReplaceOp):
        return session.turn_at(ev.seq)
    owners = _sources_turns(session, ev)
    return owners.pop() if len(owners) == 1 else None


def _sources_turns(session: Session, ev: SessionEvent) -> set[int]:
    """The turns of the nodes a replacement replaced (a rewind note's: the turn it stands for)."""
    noted = _note_turn(ev.data)
    if noted is not None:
        return {noted}
    return {t for s in ev.source_event_seqs or () if (t := session.turn_at(s)) is not None}


def _contiguous(surface: Sequence[int], nodes: Sequence[int]) -> bool:
    first = surface.index(nodes[0])
    return tuple(surface[first : first + len(nodes)]) == tuple(nodes)


# --- deciding ------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Plan:
    """What a chat cell's run does to the context (``plan``)."""

    order: Literal["notebook", "run"]
    fork_after: int | None = None
    """Fork after this turn (``0``: before the first); ``None``: stay on the session."""
    replaces: int | None = None
    """The turn this same cell had asked (on the session forked from)."""
    dropped: tuple[LeftTurn, ...] = ()
    """The turns after the fork point (not carried by the branch)."""
    left: tuple[LeftTurn, ...] = ()
    """The turns of the (branch's) log to take out of the context now."""
    summarized: tuple[LeftTurn, ...] = ()
    """Turns that should be left out but sit inside a compaction summary (said, not cut)."""
    gone: frozenset[str] = frozenset()
    """The cells taken for deleted (reported, or noted in the log, and not in the notebook)."""


def _left(info: TurnInfo, why: Why) -> LeftTurn:
    out = LeftTurn(turn=info.turn, why=why)
    if info.cell_id is not None:
        out["cellId"] = info.cell_id
    return out


def plan(
    turns: Sequence[TurnInfo],
    cell_id: str,
    *,
    deleted: Iterable[str] = (),
    order: Sequence[str] | None = None,
) -> Plan | None:
    """What running chat cell ``cell_id`` does to the context of ``turns`` (``turns_of``), with
    the cells known deleted and the notebook's cell ``order`` (``None``: unknown, go by the order
    first run). ``None``: a plain append.

    A cell in ``order`` is never taken for deleted (JupyterLab reports a cell cut and pasted, or
    deleted and undone, as deleted). The cell's own turn counts even if it was left out (a cell
    deleted, restored and run again re-asks from its old place)."""
    place = {c: i for i, c in enumerate(order)} if order is not None else None
    gone = set(deleted) - {cell_id} - (set(place) if place is not None else set())
    here = place.get(cell_id) if place is not None else None
    live = [t for t in turns if not t.left]

    def below(info: TurnInfo) -> bool:
        if place is None or here is None or info.cell_id is None:
            return False
        there = place.get(info.cell_id)
        return there is not None and there > here

    mine = next((t for t in turns if t.cell_id == cell_id), None)
    first_below = next((t for t in live if below(t) and t.cell_id not in gone), None)
    fork_at = min((t.turn for t in (mine, first_below) if t is not None), default=None)
    dropped: list[LeftTurn] = []
    for info in live:
        if fork_at is not None and info.turn >= fork_at:
            if info.cell_id == cell_id:
                why: Why = "rerun"
            elif info.cell_id in gone:
                why = "deleted"
            elif below(info) or (place is None and info.cell_id is not None):
                why = "below"
            else:
                why = "after"
            dropped.append(_left(info, why))
    left, summarized = cuts([t for t in live if fork_at is None or t.turn < fork_at], gone, cell_id)
    if fork_at is None and not left and not summarized:
        return None
    return Plan(
        order="notebook" if place is not None and here is not None else "run",
        fork_after=None if fork_at is None else fork_at - 1,
        replaces=mine.turn if mine is not None else None,
        dropped=tuple(dropped),
        left=tuple(left),
        summarized=tuple(summarized),
        gone=frozenset(gone),
    )


def cuts(
    turns: Iterable[TurnInfo], gone: Iterable[str], cell_id: str
) -> tuple[list[LeftTurn], list[LeftTurn]]:
    """The turns in the context whose cell is ``gone``: those to cut (they have nodes of their
    own), and those inside a compaction summary (said, not cut)."""
    gone = set(gone) - {cell_id}
    left: list[LeftTurn] = []
    summarized: list[LeftTurn] = []
    for info in turns:
        if not info.left and info.cell_id is not None and info.cell_id in gone:
            (summarized if info.summary or not info.nodes else left).append(_left(info, "deleted"))
    return left, summarized


def deleted_cells(turns: Iterable[TurnInfo]) -> set[str]:
    """The cells whose turns a note of the log says were deleted: they stay out of every branch."""
    return {t.cell_id for t in turns if t.left_why == "deleted" and t.cell_id is not None}


# --- names the left-out turns made ---------------------------------------------------------------


def names_made(session: Session, turns: Iterable[int]) -> list[str]:
    """The namespace names that code run in ``turns`` created or changed (the ``python`` tool's
    ``namesAdded``/``namesChanged``), sorted: read from the tool results on the surface and those
    its replacements (a pruned result, a summary) stand for — never the stream chunks."""
    wanted = set(turns)
    if not wanted:
        return []
    events = session.events
    names: set[str] = set()
    seen: set[int] = set()
    todo = list(session.surface)
    while todo:
        seq = todo.pop()
        if seq in seen:
            continue
        seen.add(seq)
        ev = events[seq]
        todo.extend(ev.source_event_seqs or ())
        if ev.type != "tool/result" or session.turn_at(seq) not in wanted:
            continue
        meta = payload_of(ev, "tool/result").get("meta")
        if isinstance(meta, dict):
            for key in ("namesAdded", "namesChanged"):
                got = meta.get(key)
                if isinstance(got, list):
                    names.update(n for n in got if isinstance(n, str))
    return sorted(names)


# --- %agent history --------------------------------------------------------------------------------


def _prompt_line(data: JsonObject) -> str:
    content = data.get("content")
    texts = [
        b.get("text")
        for b in (content if isinstance(content, list) else [])
        if isinstance(b, dict) and b.get("type") == "text"
    ]
    line = next((t for t in texts if isinstance(t, str) and t.strip()), "").strip().splitlines()
    first = line[0] if line else ""
    return first if len(first) <= 60 else first[:59] + "…"


def history_text(session: Session) -> str:
    """``%agent history``: the current branch, turn by turn — its cell, its prompt's first line,
    whether it was copied from the session it branched from, and whether it is out of the context."""
    header = session.header
    head = f"session {session.id[:8]}"
    if header.parent_session is not None:
        kind = header.parent_kind or "fork"
        article = "an" if kind[0] in "aeiou" else "a"
        head += f" — {article} {kind} of {header.parent_session[:8]}"
        if kind == "import":
            head += " (self-reported: read from a notebook's capsules)"
    lines = [head]
    events = session.events
    prompts: dict[int, str] = {}
    for start in session.seqs_of("turn/start"):
        data = prompt_of(session, start)
        if data is not None:
            prompts[payload_of(events[start], "turn/start")["turn"]] = _prompt_line(data)
    seeded = session.header.seed_length or 0
    copied = {
        payload_of(events[s], "turn/start")["turn"]
        for s in session.seqs_of("turn/start")
        if s < seeded
    }
    infos = turns_of(session)
    if not infos:
        return head + "\n(no turns yet)"
    lines.append(f"{'turn':>5}  {'cell':<10} prompt")
    for info in infos:
        cell = info.cell_id[-8:] if info.cell_id else "-"
        notes: list[str] = []
        if info.turn in copied:
            notes.append("copied")
        if info.left:
            notes.append("left out of the context")
        elif info.summary and not info.nodes:
            notes.append("in a compaction summary")
        tail = f"  ({'; '.join(notes)})" if notes else ""
        lines.append(f"{info.turn:>5}  {cell:<10} {prompts.get(info.turn, '')}{tail}")
    if header.parent_session is not None:
        lines += [
            "Every branch of this conversation, in a cell of its own:",
            "%%sql",
            "SELECT * FROM branches WHERE root_session = "
            f"(SELECT root_session FROM branches WHERE session_id = '{session.id}')",
        ]
    return "\n".join(lines)


# --- doing ---------------------------------------------------------------------------------------


def _note(info: LeftTurn) -> Message:
    why = _WHY_TEXT[info["why"]]
    text = (
        f"[Turn {info['turn']} is left out of this conversation here: {why} in the notebook. "
        "What its code did in the notebook's namespace stays done.]"
    )
    form: JsonObject = {"kind": "left-out", "turn": info["turn"], "why": info["why"]}
    if "cellId" in info:
        form["cellId"] = info["cellId"]
    return Message(
        id=new_message_id(),
        role="user",
        content=(TextBlock(text=text),),
        source=PluginSource(plugin=REWIND_PLUGIN, form=form),
    )


def cut(session: Session, left: Sequence[LeftTurn]) -> None:
    """Replace each turn of ``left`` on ``session``'s surface by its ``dsh/rewind`` note."""
    by_turn = {t.turn: t for t in turns_of(session)}
    for item in left:
        info = by_turn.get(item["turn"])
        if info is None or not info.nodes:
            continue
        session.append(
            "user/message",
            message_to_json(_note(item)),
            surface_op=ReplaceOp(start=info.nodes[0], end=info.nodes[-1]),
            source_event_seqs=list(info.nodes),
        )


def context_of(p: Plan, *, parent: str | None, names: Sequence[str]) -> CellContext:
    """The ``source.context`` that records ``p`` on the prompt."""
    ctx = CellContext(order=p.order)
    if p.fork_after is not None and parent is not None:
        branch = BranchPoint(session=parent, turn=p.fork_after, dropped=list(p.dropped))
        if p.replaces is not None:
            branch["replaces"] = p.replaces
        ctx["branch"] = branch
    left = [*p.left, *({**s, "summary": True} for s in p.summarized)]
    if left:
        ctx["left"] = cast("list[LeftTurn]", left)
    if names:
        ctx["names"] = list(names[:MAX_NAMES])
    return ctx


def with_cell(message: Message, cell_id: str, context: CellContext | None) -> Message:
    """``message`` (a prompt) recording its cell, and the context its run made."""
    src = message.source
    extra: JsonObject = dict(src.extra) if isinstance(src, UserSource) else {}
    extra["cellId"] = cell_id
    if context is not None:
        extra["context"] = cast("JsonObject", context)
    return replace(message, source=UserSource(extra=extra))


def names_text(names: Sequence[str]) -> str:
    """``names`` as a list for a person or the model (at most ``MAX_NAMES``, the rest counted)."""
    shown = ", ".join(names[:MAX_NAMES])
    more = len(names) - MAX_NAMES
    return shown + (f" and {more} more" if more > 0 else "")


class RewoundNames:
    """The runtime-context section that tells the model which names in the namespace came from
    turns no longer in its conversation (one per agent: a branch has its own)."""

    def __init__(self) -> None:
        self.names: list[str] = []

    def add(self, names: Iterable[str]) -> None:
        self.names = sorted({*self.names, *names})

    def __call__(self) -> PromptContext | None:
        from dsh_kernel.agent.system_prompt import PromptContext

        if not self.names:
            return None
        return PromptContext(
            name="rewound names",
            order=60,
            text=(
                "The user re-ran or deleted earlier chat cells, so some earlier turns are no "
                "longer part of this conversation. The code those turns ran was not undone: "
                f"these names in the notebook's namespace were created or changed by it: "
                f"{names_text(self.names)}. Check a value before relying on it."
            ),
        )


async def notebook_order(comms: NotebookComms | None, session: str | None) -> list[str] | None:
    """The notebook's cell ids in order, from the frontend extension serving client ``session``,
    or ``None`` (no extension, several views, no answer within ``ORDER_TIMEOUT_S``)."""
    from dsh_kernel.errors import DshError

    if comms is None:
        return None
    try:
        fe = comms.frontend_for(session)
        if fe is None:
            return None
        reply = await asyncio.wait_for(comms.request(fe, {"request": "read"}), ORDER_TIMEOUT_S)
    except (DshError, TimeoutError) as exc:
        log.info("dsh: the notebook's cell order is not known (%s): going by run order", exc)
        return None
    cells = reply.get("cells")
    if not isinstance(cells, list):
        return None
    ids = [c.get("id") for c in cells if isinstance(c, dict)]
    return [i for i in ids if isinstance(i, str)]


def rewind(
    host: AgentHost,
    cell_id: str,
    *,
    deleted: Iterable[str] = (),
    order: Sequence[str] | None = None,
) -> CellContext | None:
    """Shape the context for chat cell ``cell_id`` (module docstring): maybe a new branch
    (``host.agent`` is then its agent), maybe notes on the log; the ``CellContext`` to record on
    the prompt, or ``None`` for a plain append."""
    from dsh_kernel.store.sessions import fork

    agent = host.agent
    session = agent.session
    turns = turns_of(session)
    p = plan(turns, cell_id, deleted={*deleted, *deleted_cells(turns)}, order=order)
    if p is None:
        return None
    parent: str | None = None
    if p.fork_after is not None:
        parent = session.id
        child = fork(
            session.header,
            list(session.events),
            p.fork_after,
            user=host.settings.course.user,
            ai_policy=host.policy.in_force().policy,
            kind="rewind",
        )
        earlier = _rewound_names(agent).names
        agent = host.branch(child)
        _rewound_names(agent).add(earlier)  # what earlier branches left in the namespace
        # A deleted cell stays out of every branch: its note may come after the fork point.
        left, summarized = cuts(turns_of(child), p.gone, cell_id)
        p = replace(p, left=tuple(left), summarized=tuple(summarized))
    out_turns = [t["turn"] for t in (*p.dropped, *p.left, *p.summarized)]
    names = names_made(session, out_turns)
    cut(agent.session, p.left)
    _rewound_names(agent).add(names)
    return context_of(p, parent=parent, names=names)


_SECTIONS: weakref.WeakKeyDictionary[Agent, RewoundNames] = weakref.WeakKeyDictionary()


def _rewound_names(agent: Agent) -> RewoundNames:
    """The agent's ``RewoundNames`` section, added to its runtime context on first need."""
    section = _SECTIONS.get(agent)
    if section is None:
        section = _SECTIONS[agent] = RewoundNames()
        agent.runtime_context.add(section)
    return section
