"""Declarations of the code runtime: output caps, the failure taxonomy and the run result (SPINE §5).

A ``CodeRunResult`` is what ``CodeRunner.run`` always returns; a failure is its ``failure`` field,
never an exception. Failure kinds are a closed set, reported independently of what was captured:

==================  ==============================================================================
``exception``       the code raised (or did not parse); ``traceback`` holds the user's frames only
``timeout``         the wall-clock budget ran out; the traceback shows where the code was stopped
``abort``           the user interrupted the run (KeyboardInterrupt / SIGINT); ``interrupted`` is set
``output-limit``    the code kept writing past ``OutputCaps.stop_after_bytes`` and was stopped
``invalid-output``  the code ran, but the value of its last expression could not be formatted
==================  ==============================================================================

Outputs are nbformat-style dicts (``stream``, ``display_data``, ``execute_result``) in emission
order, holding lossless JSON only (binary payloads as base64 text).

``PythonMeta`` is the result card's contract: what the ``python`` tool keeps as ``tool/result.meta``
(``python_meta``) and what the card reads back (``read_python_meta``, lenient: a log written by an
older version, or a hand-made one, reads with defaults for what it lacks).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, Literal, TypeAlias, TypedDict, cast

from dsh_kernel.errors import UsageError
from dsh_kernel.jsonvalue import JsonObject, JsonValue

FailureKind: TypeAlias = Literal["exception", "timeout", "abort", "output-limit", "invalid-output"]

KIB: Final = 1024
MIB: Final = 1024 * 1024


@dataclass(frozen=True, slots=True, kw_only=True)
class OutputCaps:
    """Byte budgets for one run.

    ``stored_bytes`` bounds what the run keeps (stream text plus display payloads, counted once, as
    UTF-8); beyond it output is counted but dropped, and the kept text ends with an explicit marker.
    ``summary_bytes`` bounds the text the model is given for the run. ``stop_after_bytes`` (or
    ``None``) stops a run that writes more than that in total, as an ``output-limit`` failure: it
    turns a runaway print loop into a failure instead of minutes of discarded output.
    """

    stored_bytes: int = 2 * MIB
    summary_bytes: int = 64 * KIB
    stop_after_bytes: int | None = 256 * MIB

    def __post_init__(self) -> None:
        if self.stored_bytes < 0 or self.summary_bytes < 256:
            raise UsageError("OutputCaps: stored_bytes >= 0 and summary_bytes >= 256 are required")
        if self.stop_after_bytes is not None and self.stop_after_bytes <= 0:
            raise UsageError("OutputCaps: stop_after_bytes must be positive (or None)")


DEFAULT_CAPS: Final = OutputCaps()


@dataclass(frozen=True, slots=True, kw_only=True)
class CodeRunFailure:
    """Why a run did not complete normally. ``message`` is one line (e.g. ``"NameError: name 'x'
    is not defined"``); ``traceback`` is the short, user-frames-only traceback, or ``None``;
    ``ename`` is the exception's type name when there was one."""

    kind: FailureKind
    message: str
    traceback: str | None = None
    ename: str | None = None

    @classmethod
    def from_json(cls, value: JsonValue) -> CodeRunFailure:
        obj = _object(value, "failure")
        kind = obj.get("kind")
        match kind:
            case "exception" | "timeout" | "abort" | "output-limit" | "invalid-output":
                return cls(
                    kind=kind,
                    message=_text(obj, "message"),
                    traceback=_optional_text(obj, "traceback"),
                    ename=_optional_text(obj, "ename"),
                )
            case _:
                raise ValueError(f"failure.kind: unknown kind {kind!r}")

    def to_json(self) -> JsonObject:
        return {
            "kind": self.kind,
            "message": self.message,
            "traceback": self.traceback,
            "ename": self.ename,
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class CodeRunResult:
    """One run. ``stdout``/``stderr`` are the kept text of each stream (ending with the truncation
    marker when output was dropped); ``outputs`` are all outputs in emission order, streams
    included; ``value_repr`` is the plain-text form of the last expression's value (``None`` when
    there was no value to show). ``names_*`` are sorted namespace names (see ``runner`` for exactly
    what counts as a change). ``notes`` say what the runner could not do (e.g. no timeout off the
    main thread)."""

    value_repr: str | None = None
    outputs: tuple[JsonObject, ...] = ()
    stdout: str = ""
    stderr: str = ""
    failure: CodeRunFailure | None = None
    interrupted: bool = False
    names_added: tuple[str, ...] = ()
    names_changed: tuple[str, ...] = ()
    names_removed: tuple[str, ...] = ()
    duration_ms: int = 0
    dropped_bytes: int = 0
    """Output bytes written but not kept (streams and display payloads)."""
    notes: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        return self.failure is None

    @property
    def display_outputs(self) -> tuple[JsonObject, ...]:
        """The rich outputs only (``display_data`` and ``execute_result``), in order."""
        return tuple(o for o in self.outputs if o.get("output_type") != "stream")

    def to_json(self) -> JsonObject:
        """Lossless JSON of the whole result (camelCase keys)."""
        return {
            "valueRepr": self.value_repr,
            "outputs": [dict(o) for o in self.outputs],
            "stdout": self.stdout,
            "stderr": self.stderr,
            "failure": self.failure.to_json() if self.failure is not None else None,
            "interrupted": self.interrupted,
            "namesAdded": list(self.names_added),
            "namesChanged": list(self.names_changed),
            "namesRemoved": list(self.names_removed),
            "durationMs": self.duration_ms,
            "droppedBytes": self.dropped_bytes,
            "notes": list(self.notes),
        }

    @classmethod
    def from_json(cls, value: JsonValue) -> CodeRunResult:
        """Inverse of ``to_json``; raises ``ValueError`` naming the first bad field."""
        obj = _object(value, "result")
        failure = obj.get("failure")
        outputs = obj.get("outputs")
        if not isinstance(outputs, list):
            raise ValueError("outputs: expected a list")
        duration, dropped = obj.get("durationMs"), obj.get("droppedBytes")
        if not isinstance(duration, int) or not isinstance(dropped, int):
            raise ValueError("durationMs and droppedBytes: expected integers")
        return cls(
            value_repr=_optional_text(obj, "valueRepr"),
            outputs=tuple(_object(o, "outputs[]") for o in outputs),
            stdout=_text(obj, "stdout"),
            stderr=_text(obj, "stderr"),
            failure=CodeRunFailure.from_json(failure) if failure is not None else None,
            interrupted=obj.get("interrupted") is True,
            names_added=_texts(obj, "namesAdded"),
            names_changed=_texts(obj, "namesChanged"),
            names_removed=_texts(obj, "namesRemoved"),
            duration_ms=duration,
            dropped_bytes=dropped,
            notes=_texts(obj, "notes"),
        )


def _object(value: JsonValue, what: str) -> JsonObject:
    if not isinstance(value, dict):
        raise ValueError(f"{what}: expected an object")
    return value


def _text(obj: JsonObject, key: str) -> str:
    value = obj.get(key)
    if not isinstance(value, str):
        raise ValueError(f"{key}: expected a string")
    return value


def _optional_text(obj: JsonObject, key: str) -> str | None:
    value = obj.get(key)
    if value is not None and not isinstance(value, str):
        raise ValueError(f"{key}: expected a string or null")
    return value


def _texts(obj: JsonObject, key: str) -> tuple[str, ...]:
    value = obj.get(key)
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ValueError(f"{key}: expected a list of strings")
    return tuple(str(v) for v in value)


# --- the result card's contract ---------------------------------------------------------------------


class RunFailureJson(TypedDict):
    """A ``CodeRunFailure`` as the card keeps it (``CodeRunFailure.to_json``)."""

    kind: str
    message: str
    traceback: str | None
    ename: str | None


class PythonMeta(TypedDict):
    """The ``python`` tool's ``tool/result.meta``: the card draws ``stdout`` and ``stderr`` as
    streams, then ``outputs`` (the rich outputs only: ``display_data`` / ``execute_result``), then
    ``failure`` as an error output."""

    code: str
    description: str | None
    stdout: str
    stderr: str
    outputs: list[JsonObject]
    result: str | None
    """The value's repr (``CodeRunResult.value_repr``)."""
    failure: RunFailureJson | None
    namesAdded: list[str]
    namesChanged: list[str]
    namesRemoved: list[str]
    durationMs: int
    droppedBytes: int
    notes: list[str]


def python_meta(result: CodeRunResult, *, code: str, description: str | None) -> PythonMeta:
    """The card's meta for one run of ``code``."""
    failure = result.failure
    return PythonMeta(
        code=code,
        description=description,
        stdout=result.stdout,
        stderr=result.stderr,
        outputs=[dict(o) for o in result.display_outputs],
        result=result.value_repr,
        failure=RunFailureJson(
            kind=failure.kind,
            message=failure.message,
            traceback=failure.traceback,
            ename=failure.ename,
        )
        if failure is not None
        else None,
        namesAdded=list(result.names_added),
        namesChanged=list(result.names_changed),
        namesRemoved=list(result.names_removed),
        durationMs=result.duration_ms,
        droppedBytes=result.dropped_bytes,
        notes=list(result.notes),
    )


def python_meta_json(meta: PythonMeta) -> JsonObject:
    """``meta`` as the JSON object a tool result carries (its values are JSON already)."""
    return cast("JsonObject", dict(meta))


def read_python_meta(meta: JsonValue) -> PythonMeta | None:
    """The card meta in a logged ``meta`` (``None`` when it is not an object). Never fails: a key
    that is missing or of another kind reads as empty (``""``, ``[]``, ``None``, ``0``), an output
    that is not an object is left out, so every log the card could draw still draws."""
    if not isinstance(meta, dict):
        return None
    raw_failure = meta.get("failure")
    failure: RunFailureJson | None = None
    if isinstance(raw_failure, dict):
        failure = RunFailureJson(
            kind=_lenient(raw_failure.get("kind")),
            message=_lenient(raw_failure.get("message")),
            traceback=_maybe(raw_failure.get("traceback")),
            ename=_maybe(raw_failure.get("ename")),
        )
    outputs = meta.get("outputs")
    duration, dropped = meta.get("durationMs"), meta.get("droppedBytes")
    return PythonMeta(
        code=_lenient(meta.get("code")),
        description=_maybe(meta.get("description")),
        stdout=_lenient(meta.get("stdout")),
        stderr=_lenient(meta.get("stderr")),
        outputs=[o for o in outputs if isinstance(o, dict)] if isinstance(outputs, list) else [],
        result=_maybe(meta.get("result")),
        failure=failure,
        namesAdded=_strings(meta.get("namesAdded")),
        namesChanged=_strings(meta.get("namesChanged")),
        namesRemoved=_strings(meta.get("namesRemoved")),
        durationMs=duration if type(duration) is int else 0,
        droppedBytes=dropped if type(dropped) is int else 0,
        notes=_strings(meta.get("notes")),
    )


def _lenient(value: JsonValue) -> str:
    """A string field: a string, or a list of strings joined (nbformat's multi-line form), else ``""``."""
    if isinstance(value, list):
        return "".join(v for v in value if isinstance(v, str))
    return value if isinstance(value, str) else ""


def _maybe(value: JsonValue) -> str | None:
    return value if isinstance(value, str) else None


def _strings(value: JsonValue) -> list[str]:
    return [v for v in value if isinstance(v, str)] if isinstance(value, list) else []
