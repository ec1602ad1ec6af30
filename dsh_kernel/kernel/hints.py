"""What to tell a person when a turn fails: one line of advice per stable failure code.

The kernel's error reply for a failed chat cell is ``ename = <code>``,
``evalue = "<message> — <advice>"`` and the one-line traceback ``"<code>: <evalue>"``
(``DshKernel.error_reply``), so the code shows once; no traceback of our internals is ever shown.
"""

from __future__ import annotations

ADVICE: dict[str, str] = {
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
    "EMPTY_RESPONSE": "no answer came even after retries; rephrase the prompt or run the cell "
    "again",
    "CONTEXT_WINDOW_EXCEEDED": "the conversation is longer than the model's context window; "
    "start a new session with `%agent new` or fork an earlier turn with `%agent fork <turn>`",
    "INVALID_REQUEST": "the provider refused the request; `%%sql SELECT * FROM errors` shows "
    "the details",
    "UNSUPPORTED_REASONING_EFFORT": "choose an effort the model supports (`%agent status`)",
    "NO_ADAPTER": "choose a configured provider with `%agent provider <name>`",
    "REPLAY_DIVERGED": "this notebook no longer matches the recording being replayed; re-run "
    "from the top, or switch back to a live provider with `%agent provider <name>`",
    "REPLAY_EXHAUSTED": "the recording has no more answers; switch to a live provider",
    "STORE": "the session journal could not be written; check that the store directory "
    "(`DSH_STORE`) is writable and has free space",
}


def advice(code: str) -> str:
    if code in ADVICE:
        return ADVICE[code]
    if code.startswith("HTTP_"):
        return (
            "the provider answered with an unexpected HTTP status; see `%%sql SELECT * FROM errors`"
        )
    return "see `%%sql SELECT * FROM errors ORDER BY time DESC` for details"


def describe_failure(code: str, message: str) -> str:
    """``"<message> — <advice>"``, the evalue of a failed cell. The code is not repeated: the reply
    carries it as ``ename`` and the traceback line prefixes it; a message that already starts with
    ``"<code>: "`` loses that prefix, and an empty one leaves the advice alone."""
    message = message.strip().removeprefix(f"{code}: ").strip()
    return f"{message} — {advice(code)}" if message else advice(code)
