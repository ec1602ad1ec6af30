"""The LLM vocabulary: content blocks, messages, stream chunks, finish reasons, failures, usage, requests.

Declarations only. Conversion to and from the log's JSON (camelCase keys, as the harness writes them)
is in ``dsh_kernel.llm.codec``; assembling chunks into blocks is ``dsh_kernel.llm.assembler``.

Open unions (``ContentBlock``, ``MessageSource``, ``FinishReason``) have an ``Unknown…`` member that keeps
the raw JSON: consumers handle the tags they know and fall through on the rest. ``StreamChunk`` is the
only closed union; match it exhaustively with ``assert_never``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal, TypeAlias

from dsh_kernel.errors import LlmFailure
from dsh_kernel.ids import CallId, MessageId
from dsh_kernel.jsonvalue import JsonObject, JsonValue

# ---------------------------------------------------------------------------------------------------
# Content blocks (open union, tag ``type``)


@dataclass(frozen=True, slots=True, kw_only=True)
class TextBlock:
    type: Literal["text"] = "text"
    text: str
    unclosed_reasoning: bool = False
    """The model opened ``<think>``, never closed it and wrote no answer: this text is that
    reasoning, made the answer so that it is seen (``providers.openai_compat.think_tags``). Logged
    (``unclosedReasoning``) and noted in the views; the text goes back to the model as its answer."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ReasoningBlock:
    """Model thinking, kept apart from the answer.

    ``signature`` is provider state that must be passed back byte-exact (Anthropic thinking
    signatures); ``redacted`` carries an opaque redacted-thinking payload instead of text.
    """

    type: Literal["reasoning"] = "reasoning"
    text: str
    signature: str | None = None
    redacted: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolCallBlock:
    """A tool call as the model wrote it. ``arguments`` is the raw JSON text, never parsed here."""

    type: Literal["tool-call"] = "tool-call"
    id: CallId
    name: str
    arguments: str
    recovered_from: str | None = None
    """The answer text this call was recovered from, when the model wrote the call as text and the
    server passed it on as such (``providers.openai_compat.text_tools``); ``None`` for a call the
    server sent as a tool call. Logged and shown on the card; never sent back to the model."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolResultBlock:
    type: Literal["tool-result"] = "tool-result"
    tool_call_id: CallId
    content: tuple[ContentBlock, ...]
    is_error: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class ImageBlock:
    """An image the model may see: a reference to bytes stored once in the log, by their hash.

    The bytes are in the session's ``image/data`` event of the same ``sha256`` (base64), written before
    the first message that carries the block; the block itself stays small, so a session with many
    images does not make its later events heavy. ``description`` is the text stand-in a model that
    takes no images gets instead (built from the live object when the image was captured: a
    matplotlib figure's title, axes, series and legend); ``reduction`` says how the original was
    reduced (``None``: sent as captured). ``data`` is the base64 bytes when a request carries them
    (``session.log_images.attach_image_data``) or a capture has just made them; it is execution-local:
    never in the block's JSON, and not part of its equality (the hash is)."""

    type: Literal["image"] = "image"
    sha256: str
    media_type: str
    width: int
    height: int
    size: int
    """Bytes of the stored (reduced) image."""
    description: str
    reduction: str | None = None
    data: str | None = field(default=None, compare=False, repr=False)


@dataclass(frozen=True, slots=True, kw_only=True)
class UnknownBlock:
    """A block type this version does not know; ``raw`` is its JSON, kept verbatim."""

    type: str
    raw: JsonObject


ContentBlock: TypeAlias = (
    TextBlock | ReasoningBlock | ToolCallBlock | ToolResultBlock | ImageBlock | UnknownBlock
)
BlockType: TypeAlias = Literal["text", "reasoning", "tool-call"]

# ---------------------------------------------------------------------------------------------------
# Message sources (open union, tag ``kind``)


@dataclass(frozen=True, slots=True, kw_only=True)
class UserSource:
    """A person wrote it. ``extra`` records how (e.g. the notebook cell's raw text and the values a
    ``$`x``` reference inserted); it is logged but never sent to the model."""

    kind: Literal["user"] = "user"
    extra: JsonObject = field(default_factory=lambda: {})


@dataclass(frozen=True, slots=True, kw_only=True)
class PluginSource:
    """Context injected by a plugin. ``form`` is the semantic shape (instructions, snapshot, …)."""

    kind: Literal["plugin"] = "plugin"
    plugin: str
    form: JsonObject | None = None
    extra: JsonObject = field(default_factory=lambda: {})


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelSource:
    kind: Literal["model"] = "model"
    provider: str
    model: str
    replay_state: JsonValue = None


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolSource:
    kind: Literal["tool"] = "tool"
    call_id: CallId


@dataclass(frozen=True, slots=True, kw_only=True)
class UnknownSource:
    kind: str
    raw: JsonObject


MessageSource: TypeAlias = UserSource | PluginSource | ModelSource | ToolSource | UnknownSource

Role: TypeAlias = Literal["system", "user", "assistant"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Message:
    """One message of the model's history. Tool results are user-role messages with one
    ``tool-result`` block and a ``tool`` source."""

    id: MessageId
    role: Role
    content: tuple[ContentBlock, ...]
    source: MessageSource

    def text(self) -> str:
        """The concatenated text blocks (reasoning and tool blocks excluded)."""
        return "".join(b.text for b in self.content if isinstance(b, TextBlock))


# ---------------------------------------------------------------------------------------------------
# Usage, failures, finish reasons


@dataclass(frozen=True, slots=True, kw_only=True)
class TokenUsage:
    """Disjoint token counts.

    ``input_tokens`` is uncached input only (billed input = input + cache_read + cache_write);
    ``reasoning_tokens`` is already inside ``output_tokens`` and must never be added again.
    """

    input_tokens: int
    output_tokens: int
    cache_read_tokens: int | None = None
    cache_write_tokens: int | None = None
    reasoning_tokens: int | None = None
    via: str | None = None
    """The proxy the usage came through (``litellm``), when its response said so: the counts may
    be the proxy's own (``llm.calibration``)."""

    @property
    def total_input_tokens(self) -> int:
        return self.input_tokens + (self.cache_read_tokens or 0) + (self.cache_write_tokens or 0)


LLM_FAILURE_CODES: frozenset[str] = frozenset(
    {
        # provider answers
        "AUTH",
        "QUOTA",
        "RATE_LIMIT",
        "CONTEXT_WINDOW_EXCEEDED",
        "INVALID_REQUEST",
        "SERVER",
        # transport and stream
        "TRANSPORT",
        "TIMEOUT",
        "ABORTED",
        "STREAM_CLOSED",
        "MALFORMED_RESPONSE",
        "EMPTY_RESPONSE",
        # configuration and routing
        "MISSING_CREDENTIAL",
        "INVALID_CREDENTIAL",
        "UNSUPPORTED_REASONING_EFFORT",
        "UNSUPPORTED_CONTENT",
        "NO_ADAPTER",
        "DUPLICATE_ADAPTER",
        # the agent's own refusals before a request is sent
        "BUDGET_EXCEEDED",
        "BUDGET_UNPRICED",
        # fallback
        "UNKNOWN",
    }
)
"""The stable codes. ``HTTP_<status>`` and an upper-cased unknown finish reason are also valid."""

EMPTY_BODY = "empty-body"
"""``EMPTY_RESPONSE``'s ``detail`` when the server answered with not one byte (HTTP 200, an empty body
or stream): a fault of the server (llama-cpp-python refuses an over-long prompt so), never the
model's choice."""
MODEL_STOPPED = "model-stopped"
"""``EMPTY_RESPONSE``'s ``detail`` when the server streamed a well-formed answer that holds nothing: the
model ended its turn at once (its first token was end-of-turn), with a stop reason and no content."""


def empty_body(message: str) -> LlmFailure:
    """The ``EMPTY_RESPONSE`` of a server that sent not one byte (``EMPTY_BODY``)."""
    return LlmFailure(code="EMPTY_RESPONSE", message=message, detail=EMPTY_BODY)


def model_stopped() -> LlmFailure:
    """The ``EMPTY_RESPONSE`` of a model that ended its turn with nothing (``MODEL_STOPPED``)."""
    return LlmFailure(
        code="EMPTY_RESPONSE",
        message="the model returned nothing: it ended its turn at once, with no text and no tool call",
        detail=MODEL_STOPPED,
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class FinishStop:
    kind: Literal["stop"] = "stop"


@dataclass(frozen=True, slots=True, kw_only=True)
class FinishToolCalls:
    kind: Literal["tool-calls"] = "tool-calls"


@dataclass(frozen=True, slots=True, kw_only=True)
class FinishMaxTokens:
    kind: Literal["max-tokens"] = "max-tokens"


@dataclass(frozen=True, slots=True, kw_only=True)
class FinishAborted:
    kind: Literal["aborted"] = "aborted"
    failure: LlmFailure


@dataclass(frozen=True, slots=True, kw_only=True)
class FinishError:
    kind: Literal["error"] = "error"
    failure: LlmFailure


@dataclass(frozen=True, slots=True, kw_only=True)
class FinishUnknown:
    kind: str
    raw: JsonObject


FinishReason: TypeAlias = (
    FinishStop | FinishToolCalls | FinishMaxTokens | FinishAborted | FinishError | FinishUnknown
)

# ---------------------------------------------------------------------------------------------------
# Stream chunks (closed union, tag ``type``)


@dataclass(frozen=True, slots=True, kw_only=True)
class BlockStartChunk:
    type: Literal["block-start"] = "block-start"
    index: int
    block_type: str


@dataclass(frozen=True, slots=True, kw_only=True)
class TextDeltaChunk:
    type: Literal["text-delta"] = "text-delta"
    index: int
    text: str


@dataclass(frozen=True, slots=True, kw_only=True)
class ReasoningDeltaChunk:
    type: Literal["reasoning-delta"] = "reasoning-delta"
    index: int
    text: str


class _DeltaTwin:
    """``TextDeltaChunk``'s and ``ReasoningDeltaChunk``'s slot layout without the frozen-dataclass
    ``__init__`` (``session.events._EventTwin`` explains the trick): a delta is built once per
    streamed token, and a frozen dataclass sets each field through ``object.__setattr__``."""

    __slots__ = ("type", "index", "text")  # noqa: RUF023  # the chunks' field order

    def __init__(self, type: str, index: int, text: str) -> None:
        self.type = type
        self.index = index
        self.text = text


if not (
    _DeltaTwin.__slots__ == TextDeltaChunk.__slots__ == ReasoningDeltaChunk.__slots__
):  # pragma: no cover - a field was added to one only
    raise TypeError("_DeltaTwin.__slots__ must list the delta chunks' fields in order")


def text_delta(index: int, text: str) -> TextDeltaChunk:
    """``TextDeltaChunk(index=index, text=text)``, built ~3x faster (an adapter's hot path)."""
    twin = _DeltaTwin("text-delta", index, text)
    twin.__class__ = TextDeltaChunk  # type: ignore[assignment]  # same layout, see _DeltaTwin
    return twin  # type: ignore[return-value]


def reasoning_delta(index: int, text: str) -> ReasoningDeltaChunk:
    """``ReasoningDeltaChunk(index=index, text=text)``, built as ``text_delta`` is."""
    twin = _DeltaTwin("reasoning-delta", index, text)
    twin.__class__ = ReasoningDeltaChunk  # type: ignore[assignment]  # same layout
    return twin  # type: ignore[return-value]


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolCallDeltaChunk:
    type: Literal["tool-call-delta"] = "tool-call-delta"
    index: int
    id: CallId
    name: str | None = None
    arguments_delta: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class BlockEndChunk:
    type: Literal["block-end"] = "block-end"
    index: int
    block: ContentBlock


@dataclass(frozen=True, slots=True, kw_only=True)
class UsageChunk:
    type: Literal["usage"] = "usage"
    usage: TokenUsage


@dataclass(frozen=True, slots=True, kw_only=True)
class FinishChunk:
    """The last chunk of every stream. ``replay_state`` is opaque adapter state
    (``{"response": …, "blocks": [...]?}``) returned only to the same adapter."""

    type: Literal["finish"] = "finish"
    reason: FinishReason
    replay_state: JsonObject | None = None


StreamChunk: TypeAlias = (
    BlockStartChunk
    | TextDeltaChunk
    | ReasoningDeltaChunk
    | ToolCallDeltaChunk
    | BlockEndChunk
    | UsageChunk
    | FinishChunk
)


@dataclass(frozen=True, slots=True, kw_only=True)
class HeldText:
    """Not a chunk: a network read's note that answer text is being held back (``chars`` of it so
    far; 0: nothing is held any more) while it may still be a tool call written as text
    (``providers.openai_compat.text_tools``).

    Only ``stream_reads`` hands it over, alone in place of a read's chunk list (``llm.provider``);
    ``stream`` leaves it out. It is not content: the agent logs it as the informational
    ``assistant/held`` event, so a view can say that a tool call is being written, and the held
    text itself arrives later as ordinary chunks — ``text-delta``s once released, a recovered
    tool-call block once decided."""

    type: Literal["held"] = "held"
    chars: int


# ---------------------------------------------------------------------------------------------------
# Requests


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolSchema:
    """What the model sees of a tool: nothing else ever goes on the wire."""

    name: str
    description: str
    parameters: JsonObject


ReasoningEffort: TypeAlias = str
"""An adapter-defined effort id (DeepSeek: ``off``/``low``/``high``/``max``). Unsupported → rejected."""

ReasoningPassback: TypeAlias = Literal["send", "omit"]
"""How a generic OpenAI-compatible server wants reasoning back, once it has said so with a 400:
``send`` — ``reasoning_content`` on every assistant message; ``omit`` — never. Unset (``None``):
sent back on a tool-call turn whose reasoning the server streamed as ``reasoning_content``."""


@dataclass(frozen=True, slots=True, kw_only=True)
class LlmCallConfig:
    """The route and sampling settings of one call; logged inside ``request/header``."""

    provider: str
    model: str
    reasoning_effort: ReasoningEffort | None = None
    temperature: float | None = None
    seed: int | None = None
    """Asks the server for repeatable sampling (OpenAI-compatible routes; Anthropic has none)."""
    max_tokens: int | None = None
    stop: tuple[str, ...] | None = None
    reasoning_passback: ReasoningPassback | None = None
    """The passback dialect the agent learned from the server (``agent.passback``); only the
    generic OpenAI-compatible profile reads it."""
    images: bool | None = None
    """Whether image blocks go to the model as images (``True``) or as their text descriptions
    (``False``). ``None`` until the adapter fills it from the model catalogue
    (``ModelInfo.images``; a model not known to take images gets ``False``); set by configuration
    (``DSH_VISION``) for a server the catalogue does not know."""


Purpose: TypeAlias = Literal["compaction", "session-title"]


@dataclass(frozen=True, slots=True, kw_only=True)
class GenerateRequest:
    """One model call. Everything here except ``session_id`` and ``purpose`` is rebuildable from the
    session log (system prompt + ``derive_messages()`` + the folded request header)."""

    provider: str
    model: str
    messages: tuple[Message, ...]
    system: str | None = None
    tools: tuple[ToolSchema, ...] = ()
    reasoning_effort: ReasoningEffort | None = None
    temperature: float | None = None
    seed: int | None = None
    max_tokens: int | None = None
    stop: tuple[str, ...] | None = None
    reasoning_passback: ReasoningPassback | None = None
    images: bool = False
    """Send image blocks as images; otherwise as their descriptions (``LlmCallConfig.images``)."""
    session_id: str | None = None
    purpose: Purpose | None = None

    @property
    def config(self) -> LlmCallConfig:
        return LlmCallConfig(
            provider=self.provider,
            model=self.model,
            reasoning_effort=self.reasoning_effort,
            temperature=self.temperature,
            seed=self.seed,
            max_tokens=self.max_tokens,
            stop=self.stop,
            reasoning_passback=self.reasoning_passback,
            images=True if self.images else None,
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelInfo:
    """Advisory route metadata; unknown model ids pass through with ``None`` fields."""

    context_window: int | None = None
    default_max_tokens: int | None = None
    reasoning_efforts: tuple[str, ...] = ()
    default_reasoning_effort: str | None = None
    max_output_tokens: int | None = None
    """The most output one response may have (the provider's cap; ``default_max_tokens`` is what we ask)."""
    images: bool | None = None
    """Whether the model takes image input; ``None`` when not known."""
    input_price_per_mtok: float | None = None
    cached_input_price_per_mtok: float | None = None
    """Cache-hit input; ``None`` means the input price."""
    cache_write_price_per_mtok: float | None = None
    """Cache-write input; ``None`` means the input price."""
    output_price_per_mtok: float | None = None
    prices_as_of: str | None = None
    """When the prices were last verified (ISO date) for catalogue list prices; ``None`` for a price
    the user set (``dsh_kernel.store.set_price``) or an unknown one."""
    label: str | None = None
    """A description shown beside the model id (e.g. that the offline demo is not a real model)."""
    reasoning_style: Literal["adaptive", "budget"] | None = None
    """How an effort goes on the wire where the provider has more than one way (Anthropic:
    ``adaptive`` → ``thinking.type`` adaptive + ``output_config.effort``; ``budget`` →
    ``thinking.budget_tokens``). ``None``: the adapter's only way."""
    reasoning_note: str | None = None
    """Why the model's efforts are what they are, when that is not obvious; said beside a refused
    effort and in ``%agent status``."""
