"""One failure vocabulary: every stable error code a person may see, with what to do about it.

The codes are ``DshError.code`` (``dsh_kernel.errors``), a provider failure's ``LlmFailure.code``, a
tool result's error code and SQL's ``errors.code`` — the same UPPER_SNAKE_CASE name everywhere. This
table is the one place their advice is written; both readers take it from here:

* a failed cell's error reply (``DshKernel.error_reply``): ``ename = <code>``,
  ``evalue = describe_failure(code, message)`` = ``"<message> — <advice>"`` and the one-line
  traceback ``"<code>: <evalue>"``, so the code shows once and no frame of ours is shown;
* the end notice of a failed turn in the live view and the saved rendering
  (``views.format.end_notice``): the advice as a sentence (``advice_sentence``).
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Final

ADVICE: Final[Mapping[str, str]] = MappingProxyType(
    {
        "AUTH": "the provider rejected the API key; check the key's environment variable "
        "or set one for this kernel with `%agent key <provider>`",
        "MISSING_CREDENTIAL": "set the key's environment variable before starting Jupyter, or run "
        "`%agent key <provider>`; `%agent status` shows what is configured",
        "INVALID_CREDENTIAL": "the API key is malformed; set it again with `%agent key <provider>`",
        "QUOTA": "the account has no balance or quota left; top it up at the provider",
        "RATE_LIMIT": "the provider is rate-limiting this key and retries ran out; wait a minute "
        "and run the cell again",
        "SERVER": "the provider had a server error and retries ran out; run the cell again later",
        "TIMEOUT": "the provider stopped sending data; run the cell again (a local server may be "
        "overloaded)",
        "TRANSPORT": "the provider could not be reached; check the network, the base URL "
        "(`%agent status`) and that a local server is running",
        "STREAM_CLOSED": "the connection closed mid-answer; run the cell again",
        "MALFORMED_RESPONSE": "the provider sent something that is not valid streaming JSON; a "
        "proxy or local server may be incompatible — see docs/troubleshooting.md",
        "EMPTY_RESPONSE": "no answer came even after a retry; rephrase the prompt or run the cell "
        "again — a local server that sends nothing may have refused the request (one longer than "
        "its context, say): see the server's log, and `%agent new` if the conversation is long",
        "CONTEXT_WINDOW_EXCEEDED": "the conversation is longer than the model's context window; "
        "the failed turn is left out of the history, so send something shorter, summarise the "
        "earlier turns with `%agent compact`, start a new session with `%agent new`, fork an "
        "earlier turn with `%agent fork <turn>`, or, if the model's window is bigger, set it with "
        "`%agent context <tokens>`",
        "BUDGET_EXCEEDED": "the daily budget is per user and per UTC day, across all your "
        "sessions, and starts again at midnight UTC; `%agent status` shows what is left — only the "
        "setting named can raise it",
        "BUDGET_UNPRICED": "switch to a model with a known price (`%agent model …`), or ask whoever "
        "sets the budget for one in tokens (`DSH_BUDGET_TOKENS`) instead",
        "INVALID_REQUEST": "the provider refused the request; `%%sql SELECT * FROM errors` shows "
        "the details",
        "UNSUPPORTED_REASONING_EFFORT": "choose an effort the model takes: `%agent reasoning` lists "
        "them",
        "NO_ADAPTER": "choose a configured provider with `%agent provider <name>`",
        "REPLAY_DIVERGED": "this notebook no longer matches the recording being replayed; re-run "
        "from the top, or switch back to a live provider with `%agent provider <name>`",
        "REPLAY_EXHAUSTED": "the recording has no more answers; switch to a live provider",
        "STORE": "the session journal could not be written; check that the store directory "
        "(`DSH_STORE`) is writable and has free space",
        "AI_POLICY_OFF": "use `%%python` cells (or the DSH Python kernel) and `%%sql` cells, "
        "which still work; `%agent status` shows where the policy comes from (docs/course.md)",
        "AI_POLICY_EXPLAIN": "under explain the agent is offered read-only tools only: offer a "
        "function declared `@tool(read_only=True)`, or leave the &`…` out",
        "AI_POLICY_INVALID": "set the notebook's `metadata.dsh.ai_policy` to full, explain or off "
        "(JupyterLab: the property inspector's Advanced Tools) and save it; Python and SQL cells "
        "still work",
    }
)
"""Advice by code: a lowercase clause saying what to do (``advice_sentence`` makes it a sentence)."""

DETAILED_ADVICE: Final[Mapping[tuple[str, str], str]] = MappingProxyType(
    {
        ("EMPTY_RESPONSE", "empty-body"): "the server answered with an empty body (HTTP 200, not "
        "one byte) even after a retry: a local server does that when it refuses a request, often "
        "one longer than its context — see the server's log; `%agent compact` or `%agent new` if "
        "the conversation is long",
        ("EMPTY_RESPONSE", "model-stopped"): "the request went through: the model chose to end its "
        "turn at once, with no text (its first token was end-of-turn), even after a retry; "
        "rephrase the prompt or run the cell again — small models do this more often",
    }
)
"""Advice for a failure whose ``detail`` (``LlmFailure.detail``) says more than its code, by
``(code, detail)``; a detail not listed falls back to the code's advice."""


def advice(code: str, detail: str | None = None) -> str:
    """What to do about ``code`` (with its ``detail``, when the failure had one): the detailed
    entry, else the code's, else general advice (``HTTP_<status>`` has its own)."""
    if detail is not None and (code, detail) in DETAILED_ADVICE:
        return DETAILED_ADVICE[(code, detail)]
    if code in ADVICE:
        return ADVICE[code]
    if code.startswith("HTTP_"):
        return (
            "the provider answered with an unexpected HTTP status; see `%%sql SELECT * FROM errors`"
        )
    return "see `%%sql SELECT * FROM errors ORDER BY time DESC` for details"


def describe_failure(code: str, message: str, detail: str | None = None) -> str:
    """``"<message> — <advice>"``, the evalue of a failed cell. The code is not repeated: the reply
    carries it as ``ename`` and the traceback line prefixes it; a message that already starts with
    ``"<code>: "`` loses that prefix, and an empty one leaves the advice alone."""
    message = message.strip().removeprefix(f"{code}: ").strip()
    hint = advice(code, detail)
    return f"{message} — {hint}" if message else hint


def advice_sentence(code: str, detail: str | None = None) -> str:
    """``advice(code, detail)`` as a sentence: capitalised, with a full stop."""
    text = advice(code, detail)
    return text[:1].upper() + text[1:] + ("" if text.endswith((".", "!", "?")) else ".")
