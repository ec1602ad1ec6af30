"""Projections of the log: model messages, the request header, the human transcript.

* ``project_event`` — the per-node projection of SPINE §1.11: ``user/message`` verbatim,
  ``assistant/message`` its message (content-less ones skipped), ``tool/result`` its tool-result message,
  anything else nothing. ``Session.derive_messages()`` folds it over the current surface.
* ``EpochHeader`` and ``fold_request_header`` — the request envelope of SPINE §1.10. The canonical form
  drops an empty system prompt and an empty tool list, so ``header_equals`` compares what matters.

Everything here is a pure function of logged data.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from dsh_kernel.jsonvalue import JsonObject, JsonValue
from dsh_kernel.llm.codec import (
    config_from_json,
    config_to_json,
    message_from_json,
    tool_schema_from_json,
    tool_schema_to_json,
)
from dsh_kernel.llm.types import LlmCallConfig, Message, ToolSchema
from dsh_kernel.session.codec import canonical
from dsh_kernel.session.events import SessionEvent
from dsh_kernel.session.payloads import payload_of


def project_event(event: SessionEvent) -> Message | None:
    """The model message a surface event stands for, or ``None``."""
    match event.type:
        case "user/message":
            return message_from_json(event.data)
        case "assistant/message":
            msg = message_from_json(payload_of(event, "assistant/message")["message"])
            return msg if msg.content else None
        case "tool/result":
            return message_from_json(payload_of(event, "tool/result")["message"])
        case _:
            return None


@dataclass(frozen=True, slots=True, kw_only=True)
class EpochHeader:
    """Everything about a request that is not the messages."""

    config: LlmCallConfig
    adapter_defaults: frozenset[str] = frozenset()
    system: str | None = None
    tools: tuple[ToolSchema, ...] = ()

    def canonical(self) -> EpochHeader:
        return EpochHeader(
            config=self.config,
            adapter_defaults=self.adapter_defaults,
            system=self.system or None,
            tools=self.tools,
        )

    def to_json(self) -> JsonObject:
        h = self.canonical()
        out: JsonObject = {"config": config_to_json(h.config)}
        if h.adapter_defaults:
            out["adapterDefaults"] = {k: True for k in sorted(h.adapter_defaults)}
        if h.system is not None:
            out["system"] = h.system
        if h.tools:
            out["tools"] = [tool_schema_to_json(t) for t in h.tools]
        return out

    @staticmethod
    def from_json(value: JsonValue) -> EpochHeader:
        if not isinstance(value, dict):
            raise ValueError("request header: expected an object")
        defaults = value.get("adapterDefaults")
        tools = value.get("tools")
        system = value.get("system")
        return EpochHeader(
            config=config_from_json(value.get("config")),
            adapter_defaults=frozenset(k for k, v in defaults.items() if v is True)
            if isinstance(defaults, dict)
            else frozenset(),
            system=system if isinstance(system, str) and system else None,
            tools=tuple(tool_schema_from_json(t) for t in tools) if isinstance(tools, list) else (),
        )


def header_equals(a: EpochHeader | None, b: EpochHeader | None) -> bool:
    """Whether two request headers are the same (canonical JSON); ``None`` equals only ``None``."""
    if a is None or b is None:
        return a is b
    return canonical(a.to_json()) == canonical(b.to_json())


def fold_request_header(events: Iterable[SessionEvent]) -> EpochHeader | None:
    """The latest ``request/header`` snapshot (each one is complete, so the last one wins)."""
    latest: JsonObject | None = None
    for ev in events:
        if ev.type == "request/header":
            latest = payload_of(ev, "request/header")["header"]
    return EpochHeader.from_json(latest) if latest is not None else None


def last_request_header(
    events: Sequence[SessionEvent],
) -> EpochHeader | None:
    """Like ``fold_request_header`` but scans from the end (cheap on long logs)."""
    for ev in reversed(events):
        if ev.type == "request/header":
            return EpochHeader.from_json(payload_of(ev, "request/header")["header"])
    return None
