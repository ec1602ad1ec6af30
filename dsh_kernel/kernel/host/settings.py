"""The agent's resolved configuration (``HostSettings``), the parsers of its values, and the provider it chooses.

``HostSettings`` is what the host runs with: one field per agent setting of the kernel's settings
table (``kernel.configuration.SETTINGS``, which builds it: the traitlets, then the ``DSH_*``
environment variables over them), plus ``base_url_provider`` and the course's settings in force;
``%agent`` commands replace fields at run time. The parsers read a setting's text the way the
table, the environment and ``%agent`` all take it, and refuse anything else with a ``UsageError``
whose one line starts with where the value came from (``DSH_CONTEXT_WINDOW=``,
``c.DshKernel.context_window = ``): ``parse_context_window`` (a whole number of tokens, at least
``MIN_CONTEXT_WINDOW``; ``default`` or nothing: not set), ``parse_compaction``, ``parse_rewind`` and ``parse_capsule`` (on/off: ``parse_switch``),
``parse_image_setting`` (each image limit, in its range), ``parse_approval_timeout``,
``parse_repeat_limit``, ``parse_redraw_rate``, ``parse_temperature``, ``parse_seed`` and
``parse_seconds``. ``choose_provider`` turns settings into a provider: ``offline`` when asked for,
else ``dsh_kernel.llm.config.config_from_env`` over the settings' route (the first provider whose
key is present when none is named), else the clearly labelled offline demo model.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from dsh_kernel.agent.repeats import DEFAULT_REPEAT_LIMIT
from dsh_kernel.errors import UsageError
from dsh_kernel.kernel.course.config import NO_COURSE, CourseSettings
from dsh_kernel.llm.config import (
    BUILTIN_PROVIDERS,
    KeyStore,
    ProviderConfig,
    config_from_env,
    make_provider,
)
from dsh_kernel.llm.provider import Provider
from dsh_kernel.llm.providers.discovery import MAX_WINDOW
from dsh_kernel.llm.providers.offline import OFFLINE_LABEL, OfflineProvider
from dsh_kernel.llm.secrets import KEY_VARIABLES
from dsh_kernel.runtime.image_reduce import (
    DEFAULT_IMAGE_CAPS,
    IMAGE_SETTINGS,
    ImageCaps,
    check_image_setting,
)


@dataclass(frozen=True, slots=True, kw_only=True)
class HostSettings:
    """Resolved configuration (the module docstring)."""

    provider: str = ""
    model: str = ""
    base_url: str = ""
    base_url_provider: str = ""
    """The provider ``base_url`` was configured for (see the module docstring)."""
    approval: str = ""
    approval_timeout: float | None = 300.0
    headless_approval_timeout: float = 10.0
    redraw_rate: float = 20.0
    """Redraws per second of a streaming answer (``views.turn``, ``views.text_turn``)."""
    store: str = ""
    shared_store: str = ""
    """The shared store's libpq target (``kernel.shared``; docs/shared-store.md)."""
    system_prompt: str = ""
    reasoning: str = ""
    """The reasoning effort asked for (``""``: the model's default)."""
    context_window: int | None = None
    """The model's context window in tokens, set by the user (``None``: the catalogue's, the
    server's, else a default; see ``agent.request.window``)."""
    vision: bool | None = None
    """Images go to the model (``True``), their descriptions do (``False``), or as the model
    catalogue says (``None``): ``kernel.magic.vision``."""
    image_max_side: int = DEFAULT_IMAGE_CAPS.max_side
    images_per_call: int = DEFAULT_IMAGE_CAPS.per_call
    image_max_bytes: int = DEFAULT_IMAGE_CAPS.max_bytes
    temperature: float | None = None
    """The sampling temperature sent with every request (``None``: the server's default)."""
    seed: int | None = None
    """The sampling seed sent with every request, for repeatable answers (``None``: none sent)."""
    compaction: bool = True
    """Automatic compaction of the history (``agent.compaction.run``; ``%agent compact on|off``)."""
    rewind: bool = True
    capsule: bool = True
    """A chat cell's saved output carries its turn's capsule (``capsule``): the session travels in
    the ``.ipynb``; ``False``: only the rendering."""
    """A notebook's chat cells shape the context (``kernel.rewind``): re-running a chat cell
    re-asks from there, deleting one takes its turn out; ``False``: every cell appends."""
    repeat_limit: int = DEFAULT_REPEAT_LIMIT
    """Identical tool calls with an identical result in a row before the next is not run
    (``agent.repeats``; 0: the guard is off)."""
    course: CourseSettings = NO_COURSE
    """The AI policy and budgets in force (``kernel.course.config``: the stricter of the traitlets and
    the environment at kernel start)."""

    @property
    def images(self) -> ImageCaps:
        """The limits on images sent to the model."""
        return ImageCaps(
            max_side=self.image_max_side,
            per_call=self.images_per_call,
            max_bytes=self.image_max_bytes,
        )


MIN_CONTEXT_WINDOW = 512
"""The smallest window accepted: a request needs room for itself and an answer of 256 tokens."""
MAX_CONTEXT_WINDOW = MAX_WINDOW
"""The largest window accepted (the largest believed from a server too): well above any model's,
and far below what the log keeps exactly (the window and the output cap it gives are logged)."""


def parse_context_window(raw: str, where: str = "") -> int | None:
    """``raw`` as a window in tokens (``8192``, ``8_192``, ``8,192``); ``None`` for ``""`` or
    ``default``. A ``UsageError`` for anything else — a window out of ``MIN_CONTEXT_WINDOW`` ..
    ``MAX_CONTEXT_WINDOW`` included — its message starting with ``where`` (e.g.
    ``"DSH_CONTEXT_WINDOW="``)."""
    text = raw.strip().lower()
    if text in ("", "default", "none"):
        return None
    try:
        tokens = int(text.replace("_", "").replace(",", ""))
    except ValueError:
        tokens = 0
    if not MIN_CONTEXT_WINDOW <= tokens <= MAX_CONTEXT_WINDOW:
        raise UsageError(
            f"{where}{raw.strip()!r} is not a context window: give the model's window in tokens, "
            f"a whole number of at least {MIN_CONTEXT_WINDOW} and at most "
            f"{MAX_CONTEXT_WINDOW:,} (e.g. 8192), or 'default'"
        )
    return tokens


_SWITCH = {"on": True, "off": False, "true": True, "false": False, "1": True, "0": False}


def parse_switch(raw: str, where: str, what: str, on: str, off: str) -> bool:
    """``raw`` as an on/off switch (``on``/``off``; ``true``/``false``, ``1``/``0``); a
    ``UsageError`` for anything else, its message starting with ``where`` (e.g. ``"DSH_REWIND="``),
    naming the setting (``what``) and what each value does."""
    text = raw.strip().lower()
    if text not in _SWITCH:
        raise UsageError(
            f"{where}{raw.strip()!r} is not a {what} setting: use on ({on}) or off{off}"
        )
    return _SWITCH[text]


def parse_compaction(raw: str, where: str = "") -> bool:
    """The automatic-compaction switch (``parse_switch``)."""
    on = "older turns are summarised when the context window fills up"
    return parse_switch(raw, where, "compaction", on, "")


def parse_rewind(raw: str, where: str = "") -> bool:
    """The rewind switch (``parse_switch``)."""
    on = "re-running a chat cell re-asks from there"
    return parse_switch(raw, where, "rewind", on, " (every chat cell appends to the conversation)")


def parse_capsule(raw: str, where: str = "") -> bool:
    """The capsule switch (``parse_switch``)."""
    on = "a chat cell's saved output carries its turn, so the notebook carries the conversation"
    return parse_switch(raw, where, "capsule", on, " (only the rendering)")


def parse_approval_timeout(raw: str, where: str = "") -> float | None:
    """``raw`` as seconds an approval waits; ``None`` (forever) for ``none``, ``inf`` or ``0``. A
    ``UsageError`` starting with ``where`` for anything else."""
    text = raw.strip()
    if text.lower() in ("none", "inf", "0"):
        return None
    try:
        return float(text)
    except ValueError as exc:
        raise UsageError(f"{where}{text!r} is not a number of seconds (or 'none')") from exc


MAX_REPEAT_LIMIT = 1000
"""The largest repeat limit accepted (the step bound, 100 a turn, comes long before)."""


def parse_repeat_limit(raw: str, where: str = "") -> int:
    """``raw`` as the repeated-call guard's limit: a whole number from 0 (``off``: no guard) to
    ``MAX_REPEAT_LIMIT``; a ``UsageError`` starting with ``where`` for anything else."""
    text = raw.strip().lower()
    if text == "off":
        return 0
    try:
        limit = int(text)
    except ValueError:
        limit = -1
    if not 0 <= limit <= MAX_REPEAT_LIMIT:
        raise UsageError(
            f"{where}{raw.strip()!r} is not a repeat limit: give how many identical tool calls "
            f"with an identical result may run in a row, a whole number from 1 to "
            f"{MAX_REPEAT_LIMIT} (e.g. 2), or 0 / off for no limit"
        )
    return limit


REDRAW_RATES = (0.01, 100.0)
"""The redraw rates accepted, per second (``parse_redraw_rate``)."""


def parse_redraw_rate(raw: str, where: str = "") -> float:
    """``raw`` as redraws per second of a streaming answer, from 0.01 to 100 (``REDRAW_RATES``); a
    ``UsageError`` starting with ``where`` otherwise."""
    text = raw.strip()
    low, high = REDRAW_RATES
    try:
        rate = float(text)
    except ValueError:
        rate = float("nan")
    if not low <= rate <= high:  # NaN too
        raise UsageError(f"{where}{text!r} is not a redraw rate: a number from {low:g} to {high:g}")
    return rate


MAX_TEMPERATURE = 2.0
"""The highest temperature the OpenAI and Anthropic APIs take (Anthropic's own cap is 1)."""


def parse_temperature(raw: str, where: str = "") -> float | None:
    """``raw`` as a sampling temperature from 0 to ``MAX_TEMPERATURE``; ``default``, ``none`` or
    nothing: not set. A ``UsageError`` starting with ``where`` otherwise."""
    text = raw.strip()
    if text.lower() in ("", "default", "none"):
        return None
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0.0 <= value <= MAX_TEMPERATURE:
        raise UsageError(
            f"{where}{text!r} is not a temperature: give a number from 0 to {MAX_TEMPERATURE:g} "
            "(0: the most repeatable), or `default` for the server's"
        )
    return value


def parse_seed(raw: str, where: str = "") -> int | None:
    """``raw`` as a sampling seed, a whole number from 0 to 2**63 - 1; ``default``, ``none`` or
    nothing: not set. A ``UsageError`` starting with ``where`` otherwise."""
    text = raw.strip().replace("_", "")
    if text.lower() in ("", "default", "none"):
        return None
    if not text.isdigit() or int(text) >= 2**63:
        raise UsageError(
            f"{where}{raw.strip()!r} is not a seed: give a whole number from 0 to 2**63 - 1, or "
            "`none`"
        )
    return int(text)


def parse_seconds(raw: str, where: str = "") -> float:
    """``raw`` as a number of seconds; a ``UsageError`` starting with ``where`` otherwise."""
    text = raw.strip()
    try:
        return float(text)
    except ValueError as exc:
        raise UsageError(f"{where}{text!r} is not a number") from exc


_BYTE_UNITS = {"": 1, "b": 1, "k": 1024, "kb": 1024, "kib": 1024}
_BYTE_UNITS.update({"m": 1024 * 1024, "mb": 1024 * 1024, "mib": 1024 * 1024})


def parse_image_setting(field: str, raw: str, where: str) -> int:
    """``raw`` as the ``ImageCaps`` field ``field``: a whole number (``max_bytes`` may end in ``k``
    or ``M``, 1,024 and 1,048,576 bytes). A ``UsageError`` starting with ``where`` (e.g.
    ``"DSH_IMAGE_MAX_SIDE="``) naming the accepted range otherwise."""
    text = raw.strip().lower().replace("_", "").replace(",", "")
    number, unit = text, ""
    if field == "max_bytes":
        number = text.rstrip("kmib")
        unit = text[len(number) :].strip()
    try:
        value = int(number.strip()) * _BYTE_UNITS[unit]
    except (ValueError, KeyError):
        lo, hi, what = IMAGE_SETTINGS[field]
        raise UsageError(
            f"{where}{raw.strip()!r} is not valid: give {what}, a whole number from {lo:,} to "
            f"{hi:,}"
        ) from None
    return check_image_setting(field, value, where, repr(raw.strip()))


def base_url_owner(provider: str, model: str) -> str:
    """The provider a base URL configured beside ``provider`` and ``model`` belongs to."""
    if provider:
        return provider
    prefix, sep, rest = model.partition(":")
    if sep and rest and prefix in BUILTIN_PROVIDERS:
        return prefix
    return "openai-compatible"


def choose_provider(settings: HostSettings, keys: KeyStore) -> tuple[Provider, str, str]:
    """``(provider, model, how it was chosen)``."""
    if settings.provider == "offline":
        p = OfflineProvider()
        return p, settings.model or p.default_model, f"{OFFLINE_LABEL} (DSH_PROVIDER=offline)"
    # The route comes from ``settings`` alone: the environment's DSH_BASE_URL must not follow a
    # provider switch to a provider it was not configured for.
    route = ("DSH_PROVIDER", "DSH_MODEL", "DSH_BASE_URL")
    env = {k: v for k, v in os.environ.items() if k not in route}
    if settings.provider:
        env["DSH_PROVIDER"] = settings.provider
    if settings.model:
        env["DSH_MODEL"] = settings.model
    if settings.base_url:
        env["DSH_BASE_URL"] = settings.base_url
    config = config_from_env(env, keys=keys)
    if config is None:
        p = OfflineProvider()
        names = [KEY_VARIABLES[pid] for pid in ("deepseek", "openai", "anthropic")]
        refused = [
            f"{n} was refused: it contains {keys.refused(n)}" for n in names if keys.refused(n)
        ]
        return (
            p,
            p.default_model,
            f"{OFFLINE_LABEL}: no API key found ({', '.join(names)})"
            + (f"; {'; '.join(refused)}" if refused else ""),
        )
    return make_provider(config, keys=keys), config.model, _describe_config(config, settings)


def _describe_config(config: ProviderConfig, settings: HostSettings) -> str:
    why = "configured" if settings.provider or settings.base_url else f"{config.api_key_env} is set"
    return f"{config.id} ({config.base_url}, model {config.model}; {why})"
