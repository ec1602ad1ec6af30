"""Turning a chat cell into a user message: ``$`expr``` values and ``&`fn``` tools.

* ``$`expr``` evaluates ``expr`` in the notebook namespace and appends a compact, size-capped
  description of the value (type, shape, columns, head, repr) to the message; in the prose the
  reference becomes ``expr`` in backticks.
* ``$`fig``` where the value is a matplotlib figure, a PIL image or an ``IPython.display.Image``
  also attaches it to the message as an image block (reduced as the ``python`` tool's images are:
  ``runtime.image_reduce``, at most ``images.per_call`` per message), after the text. For a model
  that takes images its description says it is attached; a model that takes none reads the block's
  stand-in instead (``llm.image_wire``: withheld, and the description), so the message says what
  happens to the image once. An image that cannot
  be attached (too large, corrupt, over the limit) says why in its description, and the message is
  sent without it.
* ``&`fn``` offers the notebook function ``fn`` to the model as a tool for this message (its schema
  comes from the signature and docstring).

What was inserted is recorded in the message's source (``{"kind": "user", "cell": {...}}``), so
the log shows exactly what the model was given. Errors name the reference and what to do.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import cast

from dsh_kernel.agent.system_prompt import PromptContext
from dsh_kernel.ids import new_message_id
from dsh_kernel.jsonvalue import JsonObject, JsonValue
from dsh_kernel.kernel.cells import find_references, unescape
from dsh_kernel.llm.types import ContentBlock, ImageBlock, Message, TextBlock, UserSource
from dsh_kernel.runtime.image_reduce import DEFAULT_IMAGE_CAPS, ImageCaps
from dsh_kernel.tools.types import ToolDefinition, attached_definition

MAX_MESSAGE_CHARS = 200_000
"""A chat cell longer than this is refused: put big text in a variable and reference it."""

DESCRIPTION_CHARS = 4_000
"""The cap for one ``$`x``` description."""


_ATTACHED_NOTES: dict[bool | None, str] = {
    True: "\n(attached to this message as an image)",
    # The wire's stand-in for the image says it was withheld, once (``llm.image_wire``).
    False: "",
    None: "\n(attached to this message: as an image to a model that takes images, else as text)",
}
"""What a ``$`x``` description adds when its image is attached, by whether the model takes images."""


class PromptError(ValueError):
    """A chat cell that cannot be sent; the message says what was wrong and what to do."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ExpandedPrompt:
    """A chat cell's prompt with its references expanded, and the tools its ``&`f``` named."""

    message: Message
    tools: tuple[ToolDefinition, ...]


def _evaluate(sigil: str, expr: str, namespace: dict[str, object]) -> object:
    """``expr``'s value; a ``PromptError`` naming the reference as the user wrote it (``sigil``)."""
    if expr.isidentifier():
        if expr not in namespace:
            raise PromptError(
                f"{sigil}`{expr}`: there is no variable {expr!r} in the notebook namespace; run the "
                "cell that defines it first, or check the spelling"
            )
        return namespace[expr]
    try:
        return eval(compile(expr, "<prompt reference>", "eval"), namespace)
    except Exception as exc:
        raise PromptError(
            f"{sigil}`{expr}` could not be evaluated: {type(exc).__name__}: {exc}"
        ) from exc


def expand_prompt(
    text: str,
    namespace: dict[str, object],
    *,
    images: ImageCaps = DEFAULT_IMAGE_CAPS,
    sends_images: bool | None = None,
) -> ExpandedPrompt | None:
    """Build the message for a chat cell; ``None`` for an empty cell. ``sends_images``: whether
    the model in use takes images (``kernel.magic.vision.sends_images``; ``None``: not known), for
    what an attached image's description says."""
    if not text.strip():
        return None
    if len(text) > MAX_MESSAGE_CHARS:
        raise PromptError(
            f"this message is {len(text):,} characters; the limit is {MAX_MESSAGE_CHARS:,}. Put "
            "large text in a variable (e.g. text = open('file.txt').read()) and reference it as "
            "$`text`, which inserts a size-capped description"
        )
    from dsh_kernel.runtime.describe import describe_value
    from dsh_kernel.tools.decorator import build_definition

    refs = find_references(text)
    parts: list[str] = []
    pos = 0
    blocks: list[str] = []
    inserted: list[JsonValue] = []
    tools: list[ToolDefinition] = []
    seen_tools: set[str] = set()
    attached: list[ImageBlock] = []
    for ref in refs:
        parts.append(unescape(text[pos : ref.start]))
        pos = ref.end
        if ref.sigil == "$":
            value = _evaluate(ref.sigil, ref.expr, namespace)
            description = describe_value(value, max_chars=DESCRIPTION_CHARS)
            entry: JsonObject = {"expr": ref.expr, "type": type(value).__name__}
            image = _attach_image(value, images, attached)
            if isinstance(image, ImageBlock):
                if all(b.sha256 != image.sha256 for b in attached):
                    attached.append(image)
                entry["image"] = image.sha256
                description = image.description + _ATTACHED_NOTES[sends_images]
            elif image is not None:
                description += f"\n(not attached as an image: {image})"
            blocks.append(f'<value of="{ref.expr}">\n{description}\n</value>')
            entry["chars"] = len(description)
            inserted.append(entry)
            parts.append(f"`{ref.expr}`")
        else:
            fn = _evaluate(ref.sigil, ref.expr, namespace)
            given = attached_definition(fn)  # an ``@tool`` function, or a definition
            if given is not None:
                defn = given
            elif not callable(fn):
                raise PromptError(
                    f"&`{ref.expr}`: {ref.expr!r} is a {type(fn).__name__}, not a function; "
                    "&`name` offers a notebook function (or a @tool) as a tool"
                )
            else:
                try:
                    defn = build_definition(fn)
                except Exception as exc:
                    raise PromptError(f"&`{ref.expr}` cannot be offered as a tool: {exc}") from exc
            if defn.name not in seen_tools:
                seen_tools.add(defn.name)
                tools.append(defn)
            parts.append(f"`{ref.expr}` (offered to you as the tool `{defn.name}`)")
    parts.append(unescape(text[pos:]))
    body = "".join(parts)
    if blocks:
        body += "\n\n" + "\n\n".join(blocks)
    cell: JsonObject = {"raw": text} if refs else {}
    if inserted:
        cell["inserted"] = inserted
    if tools:
        cell["tools"] = [t.name for t in tools]
    content: tuple[ContentBlock, ...] = (TextBlock(text=body), *attached)
    message = Message(
        id=new_message_id(),
        role="user",
        content=content,
        source=UserSource(extra={"cell": cell} if cell else {}),
    )
    return ExpandedPrompt(message=message, tools=tuple(tools))


def _attach_image(
    value: object, caps: ImageCaps, attached: list[ImageBlock]
) -> ImageBlock | str | None:
    """The image block for ``value`` (an image object), a reason it is not attached, or ``None``
    when it is no image."""
    from dsh_kernel.runtime.figures import is_image_object
    from dsh_kernel.runtime.image_blocks import object_image_block

    if not is_image_object(value):
        return None
    if len(attached) >= caps.per_call:
        return f"the limit is {caps.per_call} images per message (DSH_IMAGES_PER_CALL)"
    return object_image_block(value, caps)


def variables_context(namespace: dict[str, object], shell: object) -> PromptContext | None:
    """The runtime context's list of the notebook's variables (type and shape; the names IPython put
    in the namespace itself, ``open``, ``In``, ``exit`` …, left out), or ``None`` when there are none."""
    from dsh_kernel.runtime.describe import list_variables

    hidden_ns: object = getattr(shell, "user_ns_hidden", None)
    hidden = cast("dict[object, object]", hidden_ns) if isinstance(hidden_ns, dict) else {}
    rows = [r for r in list_variables(namespace) if r.name not in hidden]
    if not rows:
        return None
    # Type and shape only: a repr would change on every mutation and re-send the snapshot.
    lines = [f"- {r.name}: {r.type}" + (f" {r.shape}" if r.shape else "") for r in rows[:40]]
    if len(rows) > 40:
        lines.append(f"- … and {len(rows) - 40} more (use the `inspect` tool)")
    return PromptContext(name="notebook variables", order=10, text="\n".join(lines))
