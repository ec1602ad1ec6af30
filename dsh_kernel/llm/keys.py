"""Where API keys are kept: the ``KeyStore``, and how code of your own gets a key (``api_key``).

A ``KeyStore`` holds keys by environment-variable name, in two tiers: keys *typed* at
``%agent key`` (``set``), which win over everything, and keys *taken from the environment* at kernel
start (``take_environment``), which the kernel moves out of ``os.environ`` so that nothing reading
the environment — a tool, a subprocess, a ``repr`` of ``os.environ`` — finds them. Per request a key
resolves as: typed key, then the variable in the environment *now* (a later
``os.environ["OPENAI_API_KEY"] = …`` applies), then the key taken at start
(``dsh_kernel.llm.config.resolve_api_key``).

A key with a control character (a line break, a tab) or a character outside printable ASCII is
refused, both by ``set`` and at start: HTTP would reject it as a header, and the error would quote
it. The refusal is one line naming the variable, never the key; a refused key is still handed to the
redactor, so an echo of it is scrubbed. Every accepted key is handed to the redactor too.

The store never persists: it has no serialised form (pickling raises) and its repr lists variable
names only. ``KEYS`` is the process's store (the kernel's ``%agent key`` and start-up move fill it).

``api_key("openai")`` (or ``api_key("OPENAI_API_KEY")``) is the documented way for code of your own
to use a key the kernel holds, e.g. ``OpenAI(api_key=dsh_kernel.api_key("openai"))``.
"""

from __future__ import annotations

import os
from collections.abc import MutableMapping
from typing import NoReturn

from dsh_kernel.errors import UsageError
from dsh_kernel.llm.secrets import KEY_VARIABLES, REDACTOR, Redactor


def key_problem(key: str) -> str | None:
    """What makes ``key`` unusable as an HTTP header value, or ``None`` (the key is not quoted)."""
    for ch in key:
        if ch < " " or ch == "\x7f" or "\x80" <= ch <= "\x9f" or ch in "\u2028\u2029":
            return "a control character (a line break or tab)"
        if ch > "~":
            return "a character outside printable ASCII"
    return None


class KeyStore:
    """API keys held in memory for this process, by environment-variable name (module docstring)."""

    __slots__ = ("_redactor", "_refused", "_taken", "_typed")

    def __init__(self, *, redactor: Redactor = REDACTOR) -> None:
        self._typed: dict[str, str] = {}
        self._taken: dict[str, str] = {}
        self._refused: dict[str, str] = {}
        self._redactor = redactor

    def set(self, env_name: str, key: str) -> None:
        """Store a typed key; it wins over the environment. Refuses empty and malformed keys."""
        key = key.strip()
        if not key:
            raise UsageError("an empty API key cannot be stored")
        self._redactor.add(key)
        problem = key_problem(key)
        if problem is not None:
            raise UsageError(
                f"the key for {env_name} contains {problem}; it was not stored: enter the key "
                "again as one line"
            )
        self._typed[env_name] = key
        self._refused.pop(env_name, None)

    def take_environment(
        self,
        names: tuple[str, ...] = tuple(KEY_VARIABLES.values()),
        environ: MutableMapping[str, str] | None = None,
    ) -> list[str]:
        """Move the keys named ``names`` out of ``environ`` (``os.environ``) into this store.
        Returns one warning per refused key (naming the variable only)."""
        env = os.environ if environ is None else environ
        warnings: list[str] = []
        for name in names:
            raw = env.pop(name, None)
            key = (raw or "").strip()
            if not key:
                continue
            self._redactor.add(key)
            problem = key_problem(key)
            if problem is not None:
                self._refused[name] = problem
                warnings.append(
                    f"{name} contains {problem}, so it is not used: set it again as one line "
                    "(or type the key with %agent key)"
                )
                continue
            self._taken[name] = key
        return warnings

    def typed(self, env_name: str) -> str | None:
        return self._typed.get(env_name)

    def taken(self, env_name: str) -> str | None:
        """The key moved out of the environment at start."""
        return self._taken.get(env_name)

    def get(self, env_name: str) -> str | None:
        """The typed key, else the key taken from the environment at start."""
        return self._typed.get(env_name) or self._taken.get(env_name)

    def refused(self, env_name: str) -> str | None:
        """Why the environment's key for ``env_name`` was refused at start, if it was."""
        return self._refused.get(env_name)

    def forget(self, env_name: str) -> None:
        self._typed.pop(env_name, None)
        self._taken.pop(env_name, None)

    def names(self) -> tuple[str, ...]:
        return tuple(sorted(self._typed.keys() | self._taken.keys()))

    def __contains__(self, env_name: object) -> bool:
        return env_name in self._typed or env_name in self._taken

    def __repr__(self) -> str:
        return f"KeyStore(names={list(self.names())!r})"

    def __reduce__(self) -> NoReturn:
        raise TypeError("KeyStore holds secrets and is never serialised")


KEYS = KeyStore()
"""The process's key store: the kernel moves the environment's keys here at start."""


def api_key(provider: str) -> str:
    """The API key this kernel would use for ``provider`` — an id (``"openai"``) or a key variable
    (``"OPENAI_API_KEY"``) — for code of your own (``OpenAI(api_key=api_key("openai"))``).

    The kernel moves provider keys out of ``os.environ`` at start, so this is where they are. Raises
    ``UsageError`` (naming the variable) when there is none.
    """
    name = KEY_VARIABLES.get(provider, provider)
    if name not in KEY_VARIABLES.values():
        raise UsageError(
            f"{provider!r} is not a provider or key variable: use one of "
            f"{', '.join(sorted(KEY_VARIABLES))} or {', '.join(sorted(KEY_VARIABLES.values()))}"
        )
    key = KEYS.typed(name) or os.environ.get(name, "").strip() or KEYS.taken(name)
    if not key:
        why = KEYS.refused(name)
        raise UsageError(
            f"{name} was refused at start: it contains {why}"
            if why
            else f"no key for {name}: set the environment variable or run %agent key"
        )
    return key
