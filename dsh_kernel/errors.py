"""The exception tree. Callers route on ``.code``, never on the message.

::

    DshError (code)
    ├── UsageError            misuse of an API by its caller (bad arguments, wrong state)
    │   ├── ReentrantAppendError      Session.append from inside an observer
    │   ├── McpConfigError            (mcp/config.py) an mcp.json file or entry we cannot use
    │   └── TemplateError             unknown/empty {{variable}} in a prompt section
    ├── CommandError          a failed ``%agent`` command (one subclass per code, named by it)
    ├── CapsuleError          (capsule/format.py) a notebook's capsule we do not take; CAPSULE_*
    ├── LlmError (failure: LlmFailure)    a provider call failed; the failure carries the stable code
    ├── AbortedError          (abort.py) an operation stopped by its abort signal; ABORTED
    ├── StreamGrammarError    (llm/invariants.py) a chunk stream that breaks the grammar; STREAM_GRAMMAR
    ├── IncompleteBlockError  (llm/assembler.py) a stream that ends inside a block; MALFORMED_RESPONSE
    ├── SessionError          the log refuses something
    │   ├── LosslessJsonError         event data that would not round-trip (names the JSON path)
    │   ├── SurfaceError              a surface op that breaks the surface rules
    │   ├── InvariantError            the structural checker found a violation
    │   │   └── SessionInvariantError (session/check/invariants.py) names the violated rule
    │   └── SessionFormatError        a journal we cannot read (unknown version / event type / damage)
    ├── ToolError             raised by tool bodies or the pipeline; becomes an ``Error: …`` result
    │   ├── ToolArgsError             INVALID_ARGS
    │   ├── ToolOutputError           INVALID_TOOL_OUTPUT
    │   ├── ToolSchemaError           a tool declared with a schema we cannot enforce
    │   ├── McpCallError              (mcp/server.py) an MCP call without a result; MCP_* codes
    │   └── CodeRunFailedError        (kernel/toolbox/python.py) the ``python`` tool's code raised
    └── StoreError            the journal or database failed
        ├── QueryError                (store/query/run.py) a SQL query refused or failed; SQL_* codes
        └── DatabaseBusy              (store/db.py) another process holds the database; DB_BUSY

Classes defined elsewhere are named with their module. ``kernel.chat_input.PromptError`` (a ``$`x``` or
``&`f``` that cannot be expanded) is a ``ValueError`` of the kernel's own, reported as
``INVALID_PROMPT``.
The advice a person is given for each code is in ``dsh_kernel.failures``, and only there.

Exceptions become results in exactly one place per boundary: the tool pipeline (tool errors become
``tool/result`` content), the agent turn (errors become ``turn/end{error}``), and the kernel's execute
reply.

**Error names a user sees.** Every error of ours that fails a notebook cell — a chat cell, a ``%%sql``
cell, an ``%agent`` command — replies ``status: error`` with ``ename`` = the stable code in
UPPER_SNAKE_CASE (the same code as ``.code`` here, the ``errors.code`` column in SQL and a tool
result's error code: ``AUTH``, ``SESSION_NOT_FOUND``, ``SQL_USAGE``, ``ABORTED``, ``INTERNAL``) and
``evalue`` = what happened and what to do; the traceback is that one line, never our frames. Only
exceptions raised by the user's own Python code keep their Python class name (``ZeroDivisionError``),
as in IPython.
"""

from __future__ import annotations

from dataclasses import dataclass

from dsh_kernel.jsonvalue import JsonValue


class DshError(Exception):
    """Base of every error this package raises on purpose."""

    code: str = "UNKNOWN"

    def __init__(self, message: str, *, code: str | None = None) -> None:
        super().__init__(message)
        if code is not None:
            self.code = code

    @property
    def message(self) -> str:
        return str(self.args[0]) if self.args else ""


class UsageError(DshError):
    """The caller used the API or a command wrongly; the message says what to do instead."""

    code = "USAGE"


class ReentrantAppendError(UsageError):
    """An observer appended to the session while it was being notified of an append."""

    code = "REENTRANT_APPEND"


class TemplateError(UsageError):
    """A system-prompt template names a ``{{variable}}`` that is unknown or empty."""

    code = "TEMPLATE"


class CommandError(DshError):
    """A failed ``%agent`` command, raised out of the line magic so that its cell fails and Run All
    stops there. Make one with ``command_error(code, message)``.

    IPython names a failed cell's error after the exception's class, so each code gets its own
    subclass *named by the code* (created once): the cell's ``ename`` is then the stable code, like
    every error of ours. ``_render_traceback_`` (IPython's hook for exceptions that draw themselves)
    shows the one line ``<code>: <message>`` instead of our frames."""

    code = "COMMAND_FAILED"

    def _render_traceback_(self) -> list[str]:
        return [f"{self.code}: {self.message}"]


_command_errors: dict[str, type[CommandError]] = {}


def command_error(code: str, message: str) -> CommandError:
    """A ``CommandError`` whose class name is ``code`` (see ``CommandError``)."""
    cls = _command_errors.get(code)
    if cls is None:
        cls = type(code, (CommandError,), {"code": code, "__module__": __name__})
        _command_errors[code] = cls
    return cls(message)


@dataclass(frozen=True, slots=True, kw_only=True)
class LlmFailure:
    """A normalised model-call failure. Route on ``code`` (``llm.types.LLM_FAILURE_CODES``);
    ``message`` is for people. Defined here, below every layer, so that ``LlmError`` can carry it;
    ``dsh_kernel.llm.types`` re-exports it."""

    message: str
    code: str
    status: int | None = None
    provider_retry_after_ms: int | None = None
    request_id: str | None = None
    detail: str | None = None
    """A finer, stable reason within ``code``, for advice (``failures.advice``), never for routing:
    ``EMPTY_RESPONSE`` has ``empty-body`` (the server sent not one byte) and ``model-stopped`` (the
    model ended its turn at once, with nothing); ``None`` when nothing finer is known."""

    def __post_init__(self) -> None:
        if not self.message:
            raise ValueError("LlmFailure.message must be non-empty")
        if self.status is not None and not 100 <= self.status <= 599:
            raise ValueError(f"LlmFailure.status out of range: {self.status}")
        if self.provider_retry_after_ms is not None and self.provider_retry_after_ms <= 0:
            raise ValueError("LlmFailure.provider_retry_after_ms must be positive")


class LlmError(DshError):
    """A model call failed. ``failure`` is the normalised, loggable account of it."""

    def __init__(self, failure: LlmFailure) -> None:
        super().__init__(failure.message, code=failure.code)
        self.failure = failure


class SessionError(DshError):
    """The session log refused an event or could not be read."""

    code = "SESSION"


class LosslessJsonError(SessionError):
    """Event data that would not survive a JSON round trip unchanged (the message names the path)."""

    code = "NOT_LOSSLESS_JSON"


class SurfaceError(SessionError):
    """An append or replace that breaks the surface (append / replace) rules of the log."""

    code = "SURFACE"


class InvariantError(SessionError):
    """The log, or a request rebuilt from it, breaks an invariant the agent checks."""

    code = "INVARIANT"


class SessionFormatError(SessionError):
    """A journal that is not a session of a format this version reads."""

    code = "SESSION_FORMAT"


class ToolError(DshError):
    """Raised by tool bodies; becomes an ``Error: …`` result. ``meta`` (lossless JSON, optional) is
    kept as the result's presentation meta so the card of a failed call can show what happened."""

    code = "TOOL_FAILED"
    meta: JsonValue = None


class ToolArgsError(ToolError):
    """The model's arguments do not match the tool's parameter schema."""

    code = "INVALID_ARGS"


class ToolOutputError(ToolError):
    """A tool returned a value that is not lossless JSON or does not fit its output schema."""

    code = "INVALID_TOOL_OUTPUT"


class ToolSchemaError(ToolError):
    """A tool's schema uses JSON Schema outside the supported subset."""

    code = "INVALID_TOOL_SCHEMA"


class StoreError(DshError):
    """The store (journals, the DuckDB database) could not do what was asked."""

    code = "STORE"


def error_chain(exc: BaseException) -> str:
    """Render an exception and its causes for display (never for routing)."""
    parts: list[str] = []
    seen: set[int] = set()
    cur: BaseException | None = exc
    while cur is not None and id(cur) not in seen:
        seen.add(id(cur))
        text = str(cur) or type(cur).__name__
        parts.append(text if isinstance(cur, DshError) else f"{type(cur).__name__}: {text}")
        cur = cur.__cause__ or (None if cur.__suppress_context__ else cur.__context__)
    return " <- ".join(parts)
