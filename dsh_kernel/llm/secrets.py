"""The redactor: the one place that knows every secret in play and scrubs it from what we write.

``REDACTOR`` (a process-wide ``Redactor``) knows

* the API keys a provider could use: the variables in ``KEY_VARIABLES``, read from ``os.environ``
  (``refresh()`` notices a key set later, e.g. ``os.environ["OPENAI_API_KEY"] = …`` in a notebook)
  and captured by the kernel at start before it moves them out of the environment;
* every key stored in a ``KeyStore`` (``%agent key``) or resolved for a request;
* the credentials inside base URLs (``URL_VARIABLES``, or any URL given to ``add_url``): the
  ``user:password@`` part and the values of ``api_key=``/``key=``/``token=``-like query parameters.

``redact(text)`` replaces, with ``[redacted]``, every piece of a secret *in any of its written
forms*: as it is, JSON-escaped, ``repr``-escaped (``str`` and ``bytes``, which is how httpx/h11 quote
an "Illegal header value"), URL-encoded, and one escape inside another. A piece is the whole value,
or its first or last 8+ characters: a key cut by an echo truncated at N characters (a prefix), or by
a head-and-tail cap (a suffix). A run cut at both ends is not recognised — matching any inner
8 characters would also redact ordinary words that happen to occur inside a key (``deepseek`` in
``sk-deepseek-test``), and no writer of ours cuts a string at both ends.
``scrub(data)`` does the same to every string (and key) of a JSON value, in place, without
recursion (nesting depth is not limited here). A value shorter than 8 characters is not treated as a
secret: no provider issues keys that short, and local servers' placeholders (``ollama``) would
otherwise disappear from every text.

Cost: nothing while no secret is known; otherwise one C-level regex search per string of 8+
characters (for the first and last 8 characters of every form), and a little Python per hit —
about 3 µs per streamed chunk event with three keys known (measured), 20 ms for 1.6 MB of text.

``RedactingFilter`` is a ``logging.Filter`` that scrubs a record's message, exception text and
stack; ``install_log_filter`` puts it on the handlers the kernel's log goes through.
"""

from __future__ import annotations

import json
import logging
import os
import re
import threading
import urllib.parse
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Final, NoReturn, cast

from dsh_kernel.jsonvalue import JsonValue

KEY_VARIABLES: Final[Mapping[str, str]] = {
    "deepseek": "DEEPSEEK_API_KEY",
    "openai": "OPENAI_API_KEY",
    "anthropic": "ANTHROPIC_API_KEY",
    "openai-compatible": "DSH_API_KEY",
}
"""Provider id → the environment variable holding its key: every variable a provider reads."""

URL_VARIABLES: Final[Mapping[str, str]] = {
    "deepseek": "DEEPSEEK_BASE_URL",
    "openai": "OPENAI_BASE_URL",
    "anthropic": "ANTHROPIC_BASE_URL",
}
"""Provider id → the variable naming that provider's own endpoint (``DSH_BASE_URL`` is separate)."""

WATCHED_URLS: Final = ("DSH_BASE_URL", *URL_VARIABLES.values())

CREDENTIAL_PARAMS: Final = frozenset(
    {"api_key", "api-key", "apikey", "key", "token", "access_token", "auth", "password", "secret"}
)
"""Query parameters whose values are credentials (compared case-insensitively)."""

MIN_SECRET: Final = 8
"""The shortest value treated as a secret, and the shortest piece of one that is redacted."""

MIN_PASSWORD: Final = 4
"""The shortest password given explicitly (``add_password``: the shared store's) that is redacted.
Lower than ``MIN_SECRET`` because such a value is known to be a secret — not guessed from a
variable that may hold anything — and a short one (``bobpw``) is still someone's password; it is
matched whole, never by pieces. Not lower: a 1–3 character value would blank out ordinary words."""

REDACTED: Final = "[redacted]"


def url_credentials(url: str) -> list[str]:
    """The credentials inside ``url``: user, password, ``user:password``, and credential query values."""
    try:
        parts = urllib.parse.urlsplit(url.strip())
        user, password = parts.username, parts.password
        query = urllib.parse.parse_qsl(parts.query, keep_blank_values=True)
    except ValueError:
        return []
    found = [v for v in (user, password) if v]
    if user and password:
        found.append(f"{user}:{password}")
    found += [v for k, v in query if k.lower() in CREDENTIAL_PARAMS and v]
    return found


def _escapes(text: str) -> set[str]:
    """``text`` as JSON, ``repr`` (str and bytes) and URL encoding write it (quotes stripped)."""
    out = {
        json.dumps(text)[1:-1],
        json.dumps(text, ensure_ascii=False)[1:-1],
        repr(text)[1:-1],
        repr(text.encode("utf-8", "backslashreplace"))[2:-1],
        urllib.parse.quote(text, safe=""),
        urllib.parse.quote(text),
        urllib.parse.quote_plus(text, safe=""),
    }
    out.discard("")
    return out


def written_forms(secret: str) -> set[str]:
    """Every form of ``secret`` we match: itself, one escape of it, and one escape inside another."""
    first = _escapes(secret) | {secret}
    forms = set(first)
    for form in first:
        forms |= _escapes(form)
    return {f for f in forms if len(f) >= MIN_SECRET}


class _Index:
    """What ``redact`` searches with: an immutable snapshot, swapped whole when a secret is added.

    Every form contributes its first and its last ``MIN_SECRET`` characters; one regex finds them,
    and each hit is extended along the form (right from a first piece, left from a last one)."""

    __slots__ = ("ends", "pattern", "starts")

    def __init__(self, forms: Iterable[str]) -> None:
        starts: dict[str, list[str]] = {}
        ends: dict[str, list[str]] = {}
        for form in forms:
            starts.setdefault(form[:MIN_SECRET], []).append(form)
            ends.setdefault(form[-MIN_SECRET:], []).append(form)
        self.starts = starts
        self.ends = ends
        grams = sorted(starts.keys() | ends.keys(), key=lambda g: (-len(g), g))
        self.pattern = re.compile("|".join(re.escape(g) for g in grams))

    def redact(self, text: str) -> str:
        out: list[str] | None = None
        last = 0
        search = self.pattern.search
        hit = search(text)
        while hit is not None:
            i = hit.start()
            gram = hit.group()
            begin, stop = i, i + MIN_SECRET
            for form in self.starts.get(gram, ()):  # a first piece: as far right as it matches
                k = MIN_SECRET
                while k < len(form) and i + k < len(text) and text[i + k] == form[k]:
                    k += 1
                stop = max(stop, i + k)
            for form in self.ends.get(gram, ()):  # a last piece: as far left as it matches
                k = MIN_SECRET
                while (
                    k < len(form)
                    and i + MIN_SECRET - k - 1 >= last
                    and (text[i + MIN_SECRET - k - 1] == form[-k - 1])
                ):
                    k += 1
                begin = min(begin, i + MIN_SECRET - k)
            if out is None:
                out = []
            out.append(text[last:begin])
            out.append(REDACTED)
            last = stop
            hit = search(text, stop)
        if out is None:
            return text
        out.append(text[last:])
        return "".join(out)


class Redactor:
    """See the module docstring. Thread-safe: readers use an immutable snapshot."""

    def __init__(
        self,
        environ: Mapping[str, str] | None = None,
        *,
        keys: Iterable[str] = KEY_VARIABLES.values(),
        urls: Iterable[str] = WATCHED_URLS,
    ) -> None:
        self._environ = environ
        self._key_names = tuple(keys)
        self._url_names = tuple(urls)
        self._secrets: set[str] = set()
        self._forms: set[str] = set()
        self._seen: dict[str, str] = {}
        self._index: _Index | None = None
        self._short_words: set[str] = set()
        self._short: re.Pattern[str] | None = None
        """Passwords shorter than ``MIN_SECRET`` (``add_password``), matched whole."""
        self._lock = threading.Lock()
        self._refreshed = False

    def __repr__(self) -> str:
        return f"Redactor({len(self._secrets)} secrets)"

    def __reduce__(self) -> NoReturn:
        raise TypeError("a Redactor holds secrets and is never serialised")

    # --- what is secret --------------------------------------------------------------------------

    def add(self, secret: str | None) -> None:
        """Treat ``secret`` (and its written forms) as secret from now on."""
        if not secret:
            return
        secret = secret.strip()
        if len(secret) < MIN_SECRET or secret in self._secrets:
            return
        with self._lock:
            self._secrets.add(secret)
            self._forms |= written_forms(secret)
            self._index = _Index(self._forms)

    def add_password(self, secret: str | None) -> None:
        """Treat ``secret``, known to be a password, as secret whatever its length down to
        ``MIN_PASSWORD`` (a short one is redacted where it occurs whole)."""
        if not secret:
            return
        secret = secret.strip()
        if len(secret) >= MIN_SECRET:
            self.add(secret)
            return
        if len(secret) < MIN_PASSWORD or secret in self._short_words:
            return
        with self._lock:
            self._short_words.add(secret)
            forms = {secret, json.dumps(secret)[1:-1], urllib.parse.quote(secret, safe="")}
            self._short = re.compile(
                "|".join(re.escape(f) for f in sorted(forms, key=len, reverse=True))
            )

    def add_url(self, url: str | None) -> None:
        """Treat the credentials inside ``url`` as secret."""
        for credential in url_credentials(url or ""):
            self.add(credential)

    def refresh(self) -> None:
        """Learn the keys and URL credentials the watched environment variables hold now."""
        env = os.environ if self._environ is None else self._environ
        self._refreshed = True
        for name in self._key_names:
            value = env.get(name)
            if value and self._seen.get(name) != value:
                self._seen[name] = value
                self.add(value)
        for name in self._url_names:
            value = env.get(name)
            if value and self._seen.get(name) != value:
                self._seen[name] = value
                self.add_url(value)

    def forget_all(self) -> None:
        """Forget every secret (tests isolate themselves with this); the environment is re-read."""
        with self._lock:
            self._secrets.clear()
            self._forms.clear()
            self._seen.clear()
            self._index = None
            self._short_words.clear()
            self._short = None
            self._refreshed = False

    # --- scrubbing -------------------------------------------------------------------------------

    def redact(self, text: str) -> str:
        """``text`` with every piece of a secret replaced (the same object when there is none)."""
        if not self._refreshed:
            self.refresh()
        index = self._index
        if index is not None and len(text) >= MIN_SECRET:
            text = index.redact(text)
        short = self._short
        if short is not None and short.search(text):
            text = short.sub(REDACTED, text)
        return text

    def scrub(self, data: JsonValue) -> JsonValue:
        """Redact every string and object key inside ``data`` (plain JSON: ``dict``, ``list``,
        ``str``, as the log's lossless copy makes it), **in place**; returns ``data`` (or the redacted
        string when ``data`` is one)."""
        if not self._refreshed:
            self.refresh()
        if self._short is not None:
            return _scrub_each(data, self.redact)
        index = self._index
        if index is None:
            return data
        if isinstance(data, str):
            return index.redact(data) if len(data) >= MIN_SECRET else data
        if not isinstance(data, dict | list):
            return data
        search, redact = index.pattern.search, index.redact
        stack: list[dict[str, JsonValue] | list[JsonValue]] = [data]
        while stack:  # the hot path (every event): cheap type tests, the regex only on long strings
            node = stack.pop()
            if isinstance(node, dict):
                renamed = False
                for k, v in node.items():
                    t = type(v)
                    if t is str:
                        if len(v) >= MIN_SECRET and search(v):  # type: ignore[arg-type]
                            node[k] = redact(v)  # type: ignore[arg-type]  # same size: safe
                    elif t is dict or t is list:
                        stack.append(v)  # type: ignore[arg-type]
                    if len(k) >= MIN_SECRET and search(k):
                        renamed = True
                if renamed:
                    items = list(node.items())
                    node.clear()
                    node.update((redact(k), v) for k, v in items)
            else:
                for i, v in enumerate(node):
                    t = type(v)
                    if t is str:
                        if len(v) >= MIN_SECRET and search(v):  # type: ignore[arg-type]
                            node[i] = redact(v)  # type: ignore[arg-type]
                    elif t is dict or t is list:
                        stack.append(v)  # type: ignore[arg-type]
        return data

    def scrubbed(self, data: JsonValue) -> JsonValue:
        """``data`` with every piece of a secret redacted, leaving ``data`` itself unchanged (a copy
        is made only when something is redacted)."""
        if not self._refreshed:
            self.refresh()
        if self._index is None and self._short is None:
            return data
        if not any(self.redact(s) is not s for s in _strings(data)):
            return data
        return self.scrub(_copy(data))


def _scrub_each(data: JsonValue, redact: Callable[[str], str]) -> JsonValue:
    """``redact`` applied to every string and key of ``data``, in place (the slow path, taken only
    when a short password is known)."""
    if isinstance(data, str):
        return redact(data)
    stack: list[JsonValue] = [data]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            items = [(redact(k), redact(v) if isinstance(v, str) else v) for k, v in node.items()]
            node.clear()
            node.update(items)
            stack.extend(v for _, v in items if isinstance(v, dict | list))
        elif isinstance(node, list):
            for i, v in enumerate(node):
                if isinstance(v, str):
                    node[i] = redact(v)
                elif isinstance(v, dict | list):
                    stack.append(v)
    return data


def _copy(data: JsonValue) -> JsonValue:
    """A deep copy of a JSON value, without recursion."""
    if not isinstance(data, dict | list):
        return data
    root: dict[str, JsonValue] | list[JsonValue] = {} if isinstance(data, dict) else []
    stack: list[
        tuple[dict[str, JsonValue] | list[JsonValue], dict[str, JsonValue] | list[JsonValue]]
    ]
    stack = [(data, root)]
    while stack:
        source, target = stack.pop()
        items = source.items() if isinstance(source, dict) else enumerate(source)
        for k, v in items:
            if isinstance(v, dict | list):
                child: dict[str, JsonValue] | list[JsonValue] = {} if isinstance(v, dict) else []
                stack.append((cast("dict[str, JsonValue] | list[JsonValue]", v), child))
                v = child
            if isinstance(target, dict):
                target[cast(str, k)] = v
            else:
                target.append(v)
    return root


def _strings(data: JsonValue) -> Iterator[str]:
    """Every string and object key inside ``data``, without recursion."""
    stack: list[JsonValue] = [data]
    while stack:
        node = stack.pop()
        if isinstance(node, str):
            yield node
        elif isinstance(node, dict):
            yield from node
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)


REDACTOR = Redactor()
"""The process-wide redactor every writer uses."""


def redact(text: str) -> str:
    """``REDACTOR.redact(text)``."""
    return REDACTOR.redact(text)


# --- the kernel's log --------------------------------------------------------------------------------


class RedactingFilter(logging.Filter):
    """Scrubs a record's formatted message, exception text and stack before any handler emits it."""

    def __init__(self, redactor: Redactor = REDACTOR) -> None:
        super().__init__()
        self.redactor = redactor

    def filter(self, record: logging.LogRecord) -> bool:
        r = self.redactor
        r.refresh()
        try:
            message = record.getMessage()
        except Exception:  # a bad format string: leave it to the handler to report
            return True
        clean = r.redact(message)
        if clean is not message or record.args:
            record.msg, record.args = clean, None
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = r.redact(record.exc_text)
        if record.stack_info:
            record.stack_info = r.redact(record.stack_info)
        return True


def install_log_filter(*loggers: logging.Logger, redactor: Redactor = REDACTOR) -> None:
    """Put a ``RedactingFilter`` on every handler a record of ``loggers`` (and of the root logger)
    reaches, and on ``logging.lastResort``. Idempotent."""
    handlers: list[logging.Handler] = []
    for start in (*loggers, logging.getLogger()):
        logger: logging.Logger | None = start
        while logger is not None:
            handlers += logger.handlers
            logger = logger.parent if logger.propagate else None
    if logging.lastResort is not None:
        handlers.append(logging.lastResort)
    for handler in handlers:
        if not any(isinstance(f, RedactingFilter) for f in handler.filters):
            handler.addFilter(RedactingFilter(redactor))
