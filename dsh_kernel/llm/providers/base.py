"""What every HTTP adapter shares: request defaults, timeouts, the credential seam, model metadata.

A provider configuration (``dsh_kernel.llm.config``) hands each adapter three things that are not wire
format: ``ProviderDefaults`` (request settings applied when a call leaves them unset), ``Timeouts`` (the
per-read idle bound and the overall deadline of one attempt) and a ``KeySource`` — a zero-argument
callable that returns the API key *at the moment of the request*, so a key set or rotated while the
kernel runs reaches the next call, and no adapter ever stores a key in its own state.

``model_info_for`` is where adapter defaults meet the model catalogue: configured defaults win, and
``prepare_call`` (``apply_defaults``) then records which fields of a call they filled.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace

from dsh_kernel.llm.image_wire import WITHHELD, joined_text, stand_in
from dsh_kernel.llm.types import ContentBlock, ImageBlock, ModelInfo

KeySource = Callable[[], str]
"""Returns the API key for one request, or raises ``LlmError(MISSING_CREDENTIAL)``."""

USER_AGENT = "dsh-kernel/0.1"


@dataclass(frozen=True, slots=True, kw_only=True)
class ProviderDefaults:
    """Request settings a provider applies when the call leaves them unset.

    ``reasoning_effort`` and ``max_tokens`` are filled by ``prepare_call`` (and so logged in the request
    header); ``temperature`` is filled on the wire only.
    """

    reasoning_effort: str | None = None
    max_tokens: int | None = None
    temperature: float | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Timeouts:
    """Bounds of one attempt, in seconds.

    ``idle_s`` bounds each network read: any bytes reset it, SSE comments included (DeepSeek sends
    ``: keep-alive`` while a request is queued). ``deadline_s`` bounds the whole attempt from the first
    connect to the last byte, and nothing resets it — so a chatty but stuck server cannot hold a
    request forever. ``connect_s`` bounds connection set-up.
    """

    connect_s: float = 10.0
    idle_s: float = 300.0
    deadline_s: float = 1800.0

    def __post_init__(self) -> None:
        if min(self.connect_s, self.idle_s, self.deadline_s) <= 0:
            raise ValueError("timeouts must be positive")


def model_info_for(
    model: str,
    catalogue: Mapping[str, ModelInfo],
    fallback: ModelInfo,
    defaults: ProviderDefaults,
) -> ModelInfo:
    """Catalogue entry for ``model`` (else ``fallback``) with the configured defaults laid over it."""
    info = catalogue.get(model, fallback)
    if defaults.reasoning_effort is not None:
        info = replace(info, default_reasoning_effort=defaults.reasoning_effort)
    if defaults.max_tokens is not None:
        info = replace(info, default_max_tokens=defaults.max_tokens)
    return info


NO_OUTPUT = "(no output)"


def withheld_image(image: ImageBlock) -> str:
    """An image on a route that takes none: its stand-in, saying it was withheld."""
    return stand_in(image, WITHHELD)


def tool_result_text(
    content: tuple[ContentBlock, ...], image_text: Callable[[ImageBlock], str] = withheld_image
) -> str:
    """A tool result's content as the wire text: its text blocks, one a line, each image as
    ``image_text`` gives it (by default its stand-in), or ``(no output)``."""
    return joined_text(content, image_text, "\n") or NO_OUTPUT
