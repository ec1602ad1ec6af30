"""The event vocabulary: one ``TypedDict`` per event type, and one map from tag to payload.

This is the harness's ``SessionEventMap`` ported: ``PAYLOADS`` maps every event ``type`` to the
``TypedDict`` of its ``data``, and everything else is derived from it — the catalog
(``events.EVENT_CATALOG``: each type's required and optional keys, in declaration order, and its
meaning, the class docstring), hence ``docs/session-events.md`` and the append-time check of
required keys. ``event.data`` stays a plain dict (docs/python.md documents it as public API); the
``TypedDict`` is its static type. A writer builds its payload with the class as constructor
(``TurnStart(turn=3)``, which pyright checks key by key); a reader narrows with ``payload_of``::

    if ev.type == "tool/call":
        data = payload_of(ev, "tool/call")  # ToolCall: data["callId"] is a str

``payload_of`` checks the tag (a mismatch is a bug: ``UsageError``) and returns ``data`` typed;
it does not re-validate the values — ``problem`` did, on append and on load — and readers of
optional keys still handle their absence.

Values are JSON (``JsonObject`` for nested structures the log does not interpret itself, such as a
message or a stream chunk, whose own codecs live in ``llm/``). Where the catalog places an event
(inside a turn, between turns) is ``PLACEMENT``. The journal format is unchanged by this module.

``payload_check.problem(type_, data)`` checks a payload against its type (the log on every append,
the journal reader on every line), so a reader may trust the kinds of the keys it finds.

This module deliberately does not use ``from __future__ import annotations``: ``TypedDict`` reads
``NotRequired`` from evaluated annotations.
"""

from typing import (
    Literal,
    NotRequired,
    Protocol,
    TypedDict,
    overload,
)

from dsh_kernel.errors import UsageError
from dsh_kernel.jsonvalue import JsonObject, JsonValue

# --- turns and steps ------------------------------------------------------------------------------


class NotebookInsertCell(TypedDict):
    """One cell of a `notebook/insert`: its type, its source as inserted, the source's sha256 (hex)."""

    cell_type: str
    source: str
    sha256: str


class NotebookInsert(TypedDict):
    """The agent added cells to the notebook (`notebook_insert`), logged before the call's
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


class TurnStart(TypedDict):
    """A turn opens, before any input is claimed."""

    turn: int


class EndCompleted(TypedDict):
    """The turn ran to its end: the model answered without asking for tools, or its tools ended it;
    `note` says when it ended without the model's reply: `no-reply` (after a tool step the model
    ended its turn with nothing; the tool results stand) or `repeated-call` (it kept repeating a
    call that was no longer run: the repeated-call guard)."""

    kind: Literal["completed"]
    note: NotRequired[str]


class EndAborted(TypedDict):
    """The turn was cancelled; `reason` is the cause (`abort.AbortCause.to_json`: `kind` user,
    parent, hook or disposed, and a hook's free-text `reason`)."""

    kind: Literal["aborted"]
    reason: NotRequired[JsonObject]
    """Always written by the agent; a hand-made log may leave it out."""


class EndBlocked(TypedDict):
    """A pre-step hook rejected the step; `message` is the hook's reason, when it gave one."""

    kind: Literal["blocked"]
    message: NotRequired[str]


class EndErrorDetail(TypedDict):
    """Why a turn failed: an ``LlmFailure``'s JSON (``llm.codec.failure_to_json``), or the message
    and stable code of any other exception."""

    message: str
    code: str
    status: NotRequired[int]
    providerRetryAfterMs: NotRequired[int]
    requestId: NotRequired[str]
    detail: NotRequired[str]
    """A finer reason within the code, which picks the advice shown (``LlmFailure.detail``:
    ``EMPTY_RESPONSE`` has ``empty-body`` and ``model-stopped``)."""


class EndError(TypedDict):
    """The turn failed with an exception."""

    kind: Literal["error"]
    error: NotRequired[EndErrorDetail]
    """Always written by the agent; a hand-made log may leave it out."""


class EndMaxSteps(TypedDict):
    """The turn stopped after `limit` steps (the agent's `max_steps_per_turn`)."""

    kind: Literal["max-steps"]
    limit: int


class EndMaxTokens(TypedDict):
    """The last answer was cut off at the output token limit."""

    kind: Literal["max-tokens"]


class EndInterrupted(TypedDict):
    """The kernel stopped during the turn; crash repair closed it on the next load."""

    kind: Literal["interrupted"]


TurnEndReason = (
    EndCompleted | EndAborted | EndBlocked | EndError | EndMaxSteps | EndMaxTokens | EndInterrupted
)
"""How a turn ended, tagged by `kind`: a closed union (the payload check refuses any other `kind`),
consumed with ``match`` ending in ``assert_never``."""


class TurnEnd(TypedDict):
    """A turn closes; always written. `reason.kind` is completed (with a `note` when it ended without
    the model's reply: no-reply, repeated-call), aborted (with the cause in
    `reason.reason`), blocked (a hook's `message`), error (the failure in `reason.error`: `message`,
    `code`), max-steps (with the `limit`), max-tokens or interrupted (closed by crash repair)."""

    turn: int
    reason: TurnEndReason


class StepStart(TypedDict):
    """One model call plus the tools it asked for begins."""

    turn: int
    step: int


class StepEnd(TypedDict):
    """The step closes."""

    turn: int
    step: int


# --- messages -------------------------------------------------------------------------------------


class UserMessage(TypedDict):
    """Surface. A user-role message: the prompt, injected context, steering, runtime-context
    snapshots. `data` is the message itself; `source` tells them apart."""

    id: str
    role: str
    content: list[JsonValue]
    source: JsonObject
    inserted: NotRequired[JsonValue]


class LeftTurn(TypedDict):
    """A turn that is not in the model's context (``CellContext``), and why: ``rerun`` (the cell
    that asked it was run again), ``below`` (its cell is below the one that ran, in the notebook's
    order or in the order first run), ``deleted`` (its cell was deleted), ``after`` (asked after the
    re-run cell's earlier turn, with no cell of its own or from a cell since moved above)."""

    turn: int
    why: Literal["rerun", "below", "deleted", "after"]
    cellId: NotRequired[str]


class BranchPoint(TypedDict):
    """Where a rewind branched (``CellContext.branch``): the session it came from, its last turn
    copied (``0``: none), the turn of that session the same cell had asked (``replaces``), and the
    turns of that session after the copy that this branch does not carry."""

    session: str
    turn: int
    dropped: list[LeftTurn]
    replaces: NotRequired[int]


class CellContext(TypedDict):
    """A chat cell's turn whose context is not plain appending (``kernel.rewind``): carried by its
        prompt's source as ``context`` (``UserSource.extra``, written into the logged source object;
    never sent). ``order`` says how "above" was judged
        (``notebook``: the notebook's order, from the frontend extension; ``run``: the order first
        run); ``left``: turns of this session's log taken out of the context just before it (a
        ``dsh/rewind`` note stands in for each); ``names``: names in the notebook's namespace that the
        turns left out created or changed (the namespace is not rolled back)."""

    order: Literal["notebook", "run"]
    branch: NotRequired[BranchPoint]
    left: NotRequired[list[LeftTurn]]
    names: NotRequired[list[str]]


class AssistantChunk(TypedDict):
    """One raw stream chunk, for replay and live views; never derived into messages."""

    turn: int
    step: int
    chunk: JsonObject


class AssistantMessage(TypedDict):
    """Surface. The assembled answer of one successful call (or the visible prefix of an interrupted
    one, with `interrupted: true`)."""

    turn: int
    step: int
    message: JsonObject
    usage: NotRequired[JsonObject]
    interrupted: NotRequired[bool]
    usageOrigin: NotRequired[str]
    """``proxy``: the usage came through a proxy and is implausibly low against the request's
    estimate, so it is taken as the proxy's own count (``llm.calibration``): no anchor of
    the token meter, no sample of the calibration. Absent: the server's."""


class AssistantHeld(TypedDict):
    """Answer text of the current call is held back while it may be a tool call the model wrote as
    text (`chars` characters so far; an OpenAI-compatible server's generic profile). Informational
    (ignorable) and never sent to the model: the turn shows that a tool call is being written until
    the held text arrives as `assistant/chunk`s — text deltas once released, a recovered tool call
    once decided — or `chars` is 0 (nothing is held any more). Written at most a few times a second
    while the count grows."""

    turn: int
    step: int
    chars: int


# --- tools ----------------------------------------------------------------------------------------


class ToolCall(TypedDict):
    """A tool call starts; `arguments` is the model's raw JSON text. `synthetic`: written by the
    harness, not asked for by the model. `origin`: whose tool it is, when not the kernel's own — an
    MCP server's tool has `{"mcp": server, "tool": its name on that server}`, the same object every
    result of the call carries as `meta.origin` (crash repair's result too); absent for the
    kernel's own tools, and in logs written before it was added."""

    turn: int
    step: int
    callId: str
    name: str
    arguments: str
    synthetic: NotRequired[bool]
    origin: NotRequired[JsonObject]
    """``ToolDefinition.origin`` of the tool called (class docstring)."""


class ToolResultError(TypedDict):
    """The error of a failed tool result: the exception's name and the stable code."""

    name: str
    code: str


class ToolResult(TypedDict):
    """Surface. The result of one tool call; `meta` is the tool's presentation payload; `durationMs`
    is how long the tool's body ran (a monotonic clock, not counting the wait for approval), absent
    when the body never started."""

    turn: int
    step: int
    message: JsonObject
    error: NotRequired[ToolResultError]
    meta: NotRequired[JsonObject]
    durationMs: NotRequired[int]


class ImageData(TypedDict):
    """The bytes of an image (base64 `data`), stored once per session and addressed by `sha256`;
    written before the first message whose `image` block refers to it. The block carries the media
    type, size and description; this event carries only what the block cannot."""

    sha256: str
    mediaType: str
    data: str


class TodoWrite(TypedDict):
    """A whole-list todo snapshot."""

    todos: list[JsonValue]


# --- requests -------------------------------------------------------------------------------------


class RequestHeader(TypedDict):
    """The full request envelope snapshot (config, adapter defaults, system prompt, tools)."""

    header: JsonObject
    reason: str


class RequestContext(TypedDict):
    """The route changed: provider, model, context window and where the window came from, and the
    calibration of the token estimate."""

    provider: str
    model: str
    contextWindow: NotRequired[int]
    contextWindowSource: NotRequired[str]
    """``configured``, ``discovered``, ``catalogue`` or ``default`` (assumed: the server did not say)."""
    contextWindowFrom: NotRequired[str]
    """For a discovered window: the server lookup that reported it (``/props``, ``/api/show``, ``/models``)."""
    tokenRatio: NotRequired[float]
    """The calibration of the token estimate in force from this request on
    (``llm.calibration``): an estimated request counts ``ceil(raw × tokenRatio) +
    tokenAllowance``, history after a measured anchor ``ceil(raw × tokenRatio)``. Absent: none
    (the estimate as it is)."""
    tokenAllowance: NotRequired[int]
    """The fixed tokens the chat template adds to a request (its tool preamble)."""
    tokenCalibration: NotRequired[str]
    """Where the calibration came from: ``usage`` (the server's reported counts) or ``tokenizer``
    (the server's tokenizer endpoint and the template's measured share)."""


class ContextWarning(TypedDict):
    """The next request fills most of the model's context window (informational: the turn shows a
    one-line notice)."""

    turn: int
    step: int
    tokens: int
    """The request's size: the meter's estimate, anchored on real usage when ``measured``."""
    measured: bool
    contextWindow: int
    source: str
    """Where the window came from (as ``request/context.contextWindowSource``)."""


class EndSeed(TypedDict):
    """Marks the end of a seed copied from another session."""


# --- compaction -----------------------------------------------------------------------------------


class CompactionRange(TypedDict):
    """A span of surface nodes by position: the first and the last node's seq."""

    start: int
    end: int


class CompactionStart(TypedDict):
    """A compaction begins (SPINE §7.1): the lock, released by ``compaction/end``. A start with no end
    is an orphan (a crash mid-compaction): the surface it would have changed stays in force, and after
    a later ``session/end-seed`` it is stale and ignored."""

    compactionId: str
    turn: int | None
    """The open turn (automatic compaction), or ``null`` for ``%agent compact`` between turns."""
    trigger: str
    """``pressure`` (the next request would pass the threshold), ``overflow`` (the server said the
    request did not fit) or ``manual``."""
    tokens: NotRequired[int]
    """The size of the history before, as the token meter measured it."""
    contextWindow: NotRequired[int]


class CompactionSummary(TypedDict):
    """The summary of an older span of the conversation. The ``user/message`` that replaces that
    span on the surface (a ``<compacted-summary>``, ``surfaceOp: replace``) follows it at once; the
    replaced events stay in the log."""

    compactionId: str
    summary: str
    """The summary text, without the checkpoint framing the replacement message adds."""
    method: str
    """``model`` (a ``purpose: compaction`` call wrote it) or ``reduction`` (deterministic: old tool
    outputs cut to their first lines, old turns to their first and last messages)."""
    shadowedRange: CompactionRange
    shadowedSeqs: list[int]
    """Every surface node the summary replaces, in surface order."""
    shadowedTokenCount: int
    """The replaced nodes' size (token meter estimate)."""
    summaryTokenCount: int
    """The replacement message's size (token meter estimate)."""
    turns: list[int]
    """The turns whose messages the summary stands for, whole or in part."""
    provider: NotRequired[str]
    """The route of the summary call, when one was made (also when it failed: see ``failure``)."""
    model: NotRequired[str]
    maxTokens: NotRequired[int]
    usage: NotRequired[JsonObject]
    """The summary call's token usage, as the server reported it."""
    failure: NotRequired[JsonObject]
    """Why a summary call's answer was not used (``{code, message}``), when ``method`` is
    ``reduction`` after one was tried."""
    rawOutput: NotRequired[str]
    """The summary call's answer when it came whole but was not used (``failure``: ``NO_SHRINK``,
    or ``SUMMARY_UNFIT`` — it failed the substance check, ``agent.compaction.substance``)."""


class CompactionPrune(TypedDict):
    """A huge tool result is cut to its head and tail before the history is summarised; the
    ``tool/result`` replacement that rewrites its content follows at once."""

    compactionId: str
    shadowedRange: CompactionRange
    shadowedSeqs: list[int]
    shadowedTokenCount: int
    """The original result's size (token meter estimate)."""
    prunedTokenCount: int
    """The rewritten result's size."""


class CompactionEnd(TypedDict):
    """A compaction ends, successful or not: the lock is released, last."""

    compactionId: str
    turn: int | None
    error: NotRequired[JsonObject]
    """Why nothing was replaced (``{code, message}``); absent when the surface changed."""


# --- the inbox and approvals ----------------------------------------------------------------------


class InboxSpliced(TypedDict):
    """A durable inbox mutation (insert, claim, cancel)."""

    target: str
    start: int
    inserted: list[JsonValue]
    removedCount: NotRequired[int]
    outcome: NotRequired[str]


class ApprovalAsked(TypedDict):
    """A tool call waits for the user's approval."""

    id: str
    toolName: str
    callId: NotRequired[str]
    reason: NotRequired[str]


class ApprovalDecided(TypedDict):
    """The approval was answered (allowed-once, allowed-always, rejected, cancelled, unavailable,
    timeout)."""

    id: str
    outcome: str


class ApprovalPolicy(TypedDict):
    """The approval policy changed; the latest event wins."""

    policy: JsonObject
    source: NotRequired[str]


# --- retry ----------------------------------------------------------------------------------------


class LlmRetry(TypedDict):
    """A failed model call will be retried after `delayMs`."""

    retryId: str
    turn: int
    step: int
    provider: str
    mode: str
    policyKey: str
    retry: int
    delayMs: int
    failure: JsonObject
    maxRetries: NotRequired[int]


class LlmRetryStarted(TypedDict):
    """The retry delay elapsed and the call is re-issued."""

    retryId: str
    turn: int
    step: int
    retry: int


# --- nested calls from code -----------------------------------------------------------------------


class CodeDispatchStart(TypedDict):
    """A nested tool call made from inside code starts."""

    rootCallId: str
    parentCallId: str
    subCallId: str
    name: str
    arguments: JsonValue


class CodeDispatch(TypedDict):
    """A nested tool call made from inside code settled."""

    rootCallId: str
    parentCallId: str
    subCallId: str
    name: str
    isError: bool
    content: JsonValue


# --- between turns --------------------------------------------------------------------------------


class SessionTitle(TypedDict):
    """The session's title; the latest wins."""

    title: str
    source: JsonValue
    """Who named it: ``{"kind": "user"}`` as this kernel writes it (any JSON value is accepted)."""
    messageSeqs: NotRequired[list[int]]


class CommandRun(TypedDict):
    """A human command (a `%agent` subcommand) ran; never sent to the model."""

    commandId: str
    name: str
    args: NotRequired[str]
    source: NotRequired[JsonObject]


class CommandDone(TypedDict):
    """A human command finished."""

    commandId: str
    kind: str
    text: NotRequired[str]
    sourceEventSeq: NotRequired[int]


# --- the map --------------------------------------------------------------------------------------

EventType = Literal[
    "turn/start",
    "turn/end",
    "step/start",
    "step/end",
    "user/message",
    "assistant/chunk",
    "assistant/message",
    "assistant/held",
    "tool/call",
    "tool/result",
    "image/data",
    "todo/write",
    "request/header",
    "request/context",
    "context/warning",
    "session/end-seed",
    "agent/inbox/spliced",
    "approval/asked",
    "approval/decided",
    "approval/policy",
    "llm/retry",
    "llm/retry-started",
    "tool/code-dispatch-start",
    "tool/code-dispatch",
    "session/title",
    "command/run",
    "command/done",
    "compaction/start",
    "compaction/summary",
    "compaction/prune",
    "compaction/end",
    "notebook/insert",
]
"""Every event type, in catalog order."""

PAYLOADS: dict[str, type] = {
    "turn/start": TurnStart,
    "turn/end": TurnEnd,
    "step/start": StepStart,
    "step/end": StepEnd,
    "user/message": UserMessage,
    "assistant/chunk": AssistantChunk,
    "assistant/message": AssistantMessage,
    "assistant/held": AssistantHeld,
    "tool/call": ToolCall,
    "tool/result": ToolResult,
    "image/data": ImageData,
    "todo/write": TodoWrite,
    "request/header": RequestHeader,
    "request/context": RequestContext,
    "context/warning": ContextWarning,
    "session/end-seed": EndSeed,
    "agent/inbox/spliced": InboxSpliced,
    "approval/asked": ApprovalAsked,
    "approval/decided": ApprovalDecided,
    "approval/policy": ApprovalPolicy,
    "llm/retry": LlmRetry,
    "llm/retry-started": LlmRetryStarted,
    "tool/code-dispatch-start": CodeDispatchStart,
    "tool/code-dispatch": CodeDispatch,
    "session/title": SessionTitle,
    "command/run": CommandRun,
    "command/done": CommandDone,
    "compaction/start": CompactionStart,
    "compaction/summary": CompactionSummary,
    "compaction/prune": CompactionPrune,
    "compaction/end": CompactionEnd,
    "notebook/insert": NotebookInsert,
}
"""Tag → payload ``TypedDict``: the one source of the vocabulary."""

IN_TURN: frozenset[str] = frozenset(
    {
        "assistant/chunk",
        "assistant/message",
        "assistant/held",
        "tool/call",
        "tool/result",
        "todo/write",
        "request/header",
        "request/context",
        "context/warning",
        "approval/asked",
        "approval/decided",
        "llm/retry",
        "llm/retry-started",
        "notebook/insert",
    }
)
"""Types that may only appear inside an open turn."""

STANDALONE: frozenset[str] = frozenset({"session/title", "command/run", "command/done"})
"""Types written between turns (they take a seq but no turn number)."""


def fields(type_: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """``(required keys, optional keys)`` of ``type_``'s payload, each in declaration order."""
    cls = PAYLOADS[type_]
    order = list(cls.__annotations__)
    required: frozenset[str] = getattr(cls, "__required_keys__", frozenset())
    return (
        tuple(k for k in order if k in required),
        tuple(k for k in order if k not in required),
    )


def summary(type_: str) -> str:
    """What ``type_`` means: its payload's docstring on one line."""
    return " ".join((PAYLOADS[type_].__doc__ or "").split())


class HasData(Protocol):
    """What ``payload_of`` reads of an event: ``SessionEvent`` is one (structural, so this module
    need not import ``events``, which derives its catalog from this one)."""

    @property
    def type(self) -> str: ...

    @property
    def data(self) -> JsonObject: ...


@overload
def payload_of(event: HasData, type_: Literal["turn/start"]) -> TurnStart: ...
@overload
def payload_of(event: HasData, type_: Literal["turn/end"]) -> TurnEnd: ...
@overload
def payload_of(event: HasData, type_: Literal["step/start"]) -> StepStart: ...
@overload
def payload_of(event: HasData, type_: Literal["step/end"]) -> StepEnd: ...
@overload
def payload_of(event: HasData, type_: Literal["user/message"]) -> UserMessage: ...
@overload
def payload_of(event: HasData, type_: Literal["assistant/chunk"]) -> AssistantChunk: ...
@overload
def payload_of(event: HasData, type_: Literal["assistant/message"]) -> AssistantMessage: ...
@overload
def payload_of(event: HasData, type_: Literal["tool/call"]) -> ToolCall: ...
@overload
def payload_of(event: HasData, type_: Literal["tool/result"]) -> ToolResult: ...
@overload
def payload_of(event: HasData, type_: Literal["image/data"]) -> ImageData: ...
@overload
def payload_of(event: HasData, type_: Literal["todo/write"]) -> TodoWrite: ...
@overload
def payload_of(event: HasData, type_: Literal["request/header"]) -> RequestHeader: ...
@overload
def payload_of(event: HasData, type_: Literal["request/context"]) -> RequestContext: ...
@overload
def payload_of(event: HasData, type_: Literal["assistant/held"]) -> AssistantHeld: ...
@overload
def payload_of(event: HasData, type_: Literal["context/warning"]) -> ContextWarning: ...
@overload
def payload_of(event: HasData, type_: Literal["session/end-seed"]) -> EndSeed: ...
@overload
def payload_of(event: HasData, type_: Literal["compaction/start"]) -> CompactionStart: ...
@overload
def payload_of(event: HasData, type_: Literal["compaction/summary"]) -> CompactionSummary: ...
@overload
def payload_of(event: HasData, type_: Literal["compaction/prune"]) -> CompactionPrune: ...
@overload
def payload_of(event: HasData, type_: Literal["compaction/end"]) -> CompactionEnd: ...
@overload
def payload_of(event: HasData, type_: Literal["agent/inbox/spliced"]) -> InboxSpliced: ...
@overload
def payload_of(event: HasData, type_: Literal["approval/asked"]) -> ApprovalAsked: ...
@overload
def payload_of(event: HasData, type_: Literal["approval/decided"]) -> ApprovalDecided: ...
@overload
def payload_of(event: HasData, type_: Literal["approval/policy"]) -> ApprovalPolicy: ...
@overload
def payload_of(event: HasData, type_: Literal["llm/retry"]) -> LlmRetry: ...
@overload
def payload_of(event: HasData, type_: Literal["llm/retry-started"]) -> LlmRetryStarted: ...
@overload
def payload_of(event: HasData, type_: Literal["tool/code-dispatch-start"]) -> CodeDispatchStart: ...
@overload
def payload_of(event: HasData, type_: Literal["tool/code-dispatch"]) -> CodeDispatch: ...
@overload
def payload_of(event: HasData, type_: Literal["session/title"]) -> SessionTitle: ...
@overload
def payload_of(event: HasData, type_: Literal["command/run"]) -> CommandRun: ...
@overload
def payload_of(event: HasData, type_: Literal["command/done"]) -> CommandDone: ...
@overload
def payload_of(event: HasData, type_: Literal["notebook/insert"]) -> NotebookInsert: ...
def payload_of(event: HasData, type_: EventType) -> object:
    """``event.data`` typed as ``type_``'s payload (module docstring); ``UsageError`` when the
    event is of another type."""
    if event.type != type_:
        raise UsageError(f"payload_of: a {event.type!r} event read as {type_!r}")
    return event.data
