"""A course's settings: the AI policy and the budgets an administrator configures.

``CourseSettings`` is what is in force for a kernel: the AI policy (``full``, ``explain``, ``off``)
and the daily budgets per user (tokens, US dollars). They come from the kernel's configuration —
the traitlets ``c.DshKernel.ai_policy``, ``budget_tokens``, ``budget_usd`` and the environment
variables ``DSH_AI_POLICY``, ``DSH_BUDGET_TOKENS``, ``DSH_BUDGET_USD`` — and, being restrictions,
the **stricter** of the two wins where both are set (the stricter policy, the lower budget), never
the looser: an image's configuration cannot be loosened by an environment variable, nor the
reverse. The environment is read once, when the kernel starts (``DshKernel`` keeps
``kernel.configuration.START_VARIABLES``), so a notebook that sets ``os.environ`` later changes
nothing. A value that does not parse is a ``UsageError`` naming the setting (chat cells then fail
with it: a course's restriction is never silently dropped).

``stricter`` orders policies; ``current_user`` is who a session is for (``JUPYTERHUB_USER``, else
``USER``, else the account's name), recorded on the session header with the policy in force.
"""

from __future__ import annotations

import getpass
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cache
from typing import Final, Literal, TypeAlias

from dsh_kernel.errors import UsageError
from dsh_kernel.session.codec import MAX_EXACT_INT

AiPolicy: TypeAlias = Literal["full", "explain", "off"]
POLICIES: Final[tuple[AiPolicy, ...]] = ("full", "explain", "off")
"""From the loosest to the strictest."""


def parse_ai_policy(raw: str, where: str = "") -> AiPolicy | None:
    """``raw`` as an AI policy; ``None`` for ``""`` (not set). A ``UsageError`` starting with
    ``where`` (e.g. ``"DSH_AI_POLICY="``) for anything else."""
    text = raw.strip().lower()
    if not text:
        return None
    if text not in POLICIES:
        raise UsageError(
            f"{where}{raw.strip()!r} is not an AI policy: use full (the agent may run code), "
            "explain (it reads and explains, runs no code) or off (chat is switched off)"
        )
    return text


def stricter(a: AiPolicy, b: AiPolicy) -> AiPolicy:
    """The stricter of two policies (``off`` over ``explain`` over ``full``)."""
    return a if POLICIES.index(a) >= POLICIES.index(b) else b


def parse_budget_tokens(raw: str, where: str = "") -> int | None:
    """``raw`` as a daily token budget (``200000``, ``200_000``, ``200,000``); ``None`` for ``""``
    or ``none``. A ``UsageError`` starting with ``where`` for anything else."""
    text = raw.strip().lower().replace("_", "").replace(",", "")
    if text in ("", "none"):
        return None
    try:
        tokens = int(text)
    except ValueError:
        tokens = -1
    if not 0 <= tokens <= MAX_EXACT_INT:
        raise UsageError(
            f"{where}{raw.strip()!r} is not a token budget: give the tokens each user may use per "
            f"day, a whole number of at most {MAX_EXACT_INT:,} (2^53, the largest the session log "
            "keeps exactly; e.g. 200000), or 'none'"
        )
    return tokens


def parse_budget_usd(raw: str, where: str = "") -> float | None:
    """``raw`` as a daily budget in US dollars (``2``, ``0.50``, ``$1.25``); ``None`` for ``""`` or
    ``none``. A ``UsageError`` starting with ``where`` for anything else."""
    text = raw.strip().lower().removeprefix("$").strip()
    if text in ("", "none"):
        return None
    try:
        usd = float(text)
    except ValueError:
        usd = -1.0
    if not math.isfinite(usd) or usd < 0:
        raise UsageError(
            f"{where}{raw.strip()!r} is not a budget in US dollars: give what each user may spend "
            "per day, e.g. 2 or 0.50, or 'none'"
        )
    return usd


@dataclass(frozen=True, slots=True, kw_only=True)
class CourseSettings:
    """The course's settings in force (the module docstring)."""

    ai_policy: AiPolicy = "full"
    budget_tokens: int | None = None
    """Tokens (input, cached input and output) each user may use per UTC day; ``None``: no limit."""
    budget_usd: float | None = None
    """US dollars each user may spend per UTC day; ``None``: no limit."""
    origin: Mapping[str, str] = field(default_factory=dict[str, str])
    """Where each setting in force came from, by field name: ``"DSH_BUDGET_TOKENS"`` or
    ``"c.DshKernel.budget_tokens"`` (for the line that says who can change it)."""
    user: str | None = None
    """Who the kernel's sessions are for (``current_user`` of the environment at kernel start)."""
    problem: str | None = None
    """A setting that did not parse (its one line): the policy in force is then ``off`` — chat is
    refused with this line; Python, SQL and ``%agent status`` work (``course_settings_or_off``)."""


def course_settings(
    *,
    ai_policy: str = "",
    budget_tokens: str = "",
    budget_usd: str = "",
    env: Mapping[str, str] | None = None,
) -> CourseSettings:
    """The settings in force from the traitlets' values (as text: ``""`` is not set) and the
    environment ``env`` (default ``os.environ``): the stricter of the two
    where both are set."""
    env = os.environ if env is None else env
    origin: dict[str, str] = {}

    def trait(name: str) -> str:
        return f"c.DshKernel.{name}"

    policy: AiPolicy = "full"
    for raw, where in (
        (ai_policy, trait("ai_policy")),
        (env.get("DSH_AI_POLICY", ""), "DSH_AI_POLICY"),
    ):
        given = parse_ai_policy(raw, f"{where} = " if where.startswith("c.") else f"{where}=")
        if given is not None and ("ai_policy" not in origin or stricter(given, policy) != policy):
            policy = given
            origin["ai_policy"] = where

    def lowest(pairs: list[tuple[int | float | None, str]], name: str) -> int | float | None:
        best: int | float | None = None
        for value, where in pairs:
            if value is not None and (best is None or value < best):
                best, origin[name] = value, where
        return best

    tokens = lowest(
        [
            (
                parse_budget_tokens(budget_tokens, f"{trait('budget_tokens')} = "),
                trait("budget_tokens"),
            ),
            (
                parse_budget_tokens(env.get("DSH_BUDGET_TOKENS", ""), "DSH_BUDGET_TOKENS="),
                "DSH_BUDGET_TOKENS",
            ),
        ],
        "budget_tokens",
    )
    usd = lowest(
        [
            (parse_budget_usd(budget_usd, f"{trait('budget_usd')} = "), trait("budget_usd")),
            (parse_budget_usd(env.get("DSH_BUDGET_USD", ""), "DSH_BUDGET_USD="), "DSH_BUDGET_USD"),
        ],
        "budget_usd",
    )
    return CourseSettings(
        ai_policy=policy,
        budget_tokens=int(tokens) if tokens is not None else None,
        budget_usd=float(usd) if usd is not None else None,
        origin=origin,
        user=current_user(env),
    )


def course_settings_or_off(
    *, ai_policy: str = "", budget_tokens: str = "", budget_usd: str = "", env: Mapping[str, str]
) -> CourseSettings:
    """``course_settings``, or, when a setting does not parse, the policy ``off`` with the
    ``problem`` named: a course's restriction fails closed, for chat cells only."""
    try:
        return course_settings(
            ai_policy=ai_policy, budget_tokens=budget_tokens, budget_usd=budget_usd, env=env
        )
    except UsageError as exc:
        return CourseSettings(
            ai_policy="off",
            origin={"ai_policy": "the kernel's configuration"},
            user=current_user(env),
            problem=exc.message,
        )


def current_user(env: Mapping[str, str] | None = None) -> str | None:
    """Who a session is for: ``JUPYTERHUB_USER``, else ``USER``, else the account the kernel runs
    as (``account_name``: a container often sets neither variable), else ``None``."""
    env = os.environ if env is None else env
    for name in ("JUPYTERHUB_USER", "USER"):
        value = env.get(name, "").strip()
        if value:
            return value
    return account_name()


@cache
def account_name() -> str | None:
    """The name of the account this process runs as: the password database's entry for its uid,
    else ``getpass.getuser()`` (no ``pwd`` module: Windows); ``None`` when neither names one (a
    container running a uid that has no entry). Read once per process, and the entry first, because
    ``getpass`` reads ``LOGNAME`` and ``USER`` as they are *now*: a notebook that sets them must not
    become another user. Never raises."""
    try:
        import pwd

        return pwd.getpwuid(os.getuid()).pw_name.strip() or None
    except (ImportError, KeyError, AttributeError, OSError):
        pass
    try:
        return getpass.getuser().strip() or None
    except Exception:  # KeyError, or OSError on 3.13+: no name to be found
        return None


NO_COURSE: Final = CourseSettings()
"""No course settings: policy ``full``, no budget."""
