"""The vision setting: whether images go to the model, and its line in ``%agent status``.

Which models take images is the model catalogue's (``dsh_kernel.llm.catalogue``): a model it knows
to take them gets the images of the history (a plot the ``python`` tool drew, an image shown with
`` $`fig` ``); every other model gets their text descriptions (``dsh_kernel.llm.image_wire``). A server
the catalogue does not know — a vision model behind vLLM, Ollama or LM Studio — is told by
configuration: ``DSH_VISION`` or ``c.DshKernel.vision`` (the environment wins), read by
``parse_vision``:

- ``on``: images go as images (``LlmCallConfig.images=True``), whatever the catalogue says —
  except to DeepSeek, which refuses image parts (``ChatProfile.image_parts``);
- ``off``: descriptions only, even to a model that takes images (``images=False``);
- ``auto`` or nothing: as the catalogue says (``None``).

Anything else is refused with one line naming the accepted values. The setting is the host's, kept
for every session of the kernel (``AgentHost`` sets ``Agent.images``) and applied per request, so a
model switch in the middle of a session needs nothing: the next request asks the new route.
``sends_images`` says whether the next request sends images, ``vision_text`` what it does and why.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from dsh_kernel.errors import UsageError
from dsh_kernel.llm.types import LlmCallConfig

if TYPE_CHECKING:
    from dsh_kernel.agent.agent import Agent

VISION_VALUES: Final = {"on": True, "off": False, "auto": None, "": None}
HOW_TO_SET: Final = "DSH_VISION=on or c.DshKernel.vision = 'on'"


def parse_vision(raw: str, where: str = "") -> bool | None:
    """``raw`` as the vision setting (module docstring); a ``UsageError`` for anything else, its
    message starting with ``where`` (e.g. ``"DSH_VISION="``)."""
    text = raw.strip().lower()
    if text not in VISION_VALUES:
        raise UsageError(
            f"{where}{raw.strip()!r} is not a vision setting: use on (images go to the model), "
            "off (their text descriptions do) or auto (as the model catalogue says)"
        )
    return VISION_VALUES[text]


def sends_images(agent: Agent) -> bool:
    """Whether the next request sends image blocks as images (else as their descriptions)."""
    if agent.model_info.label is not None:  # the offline demo: no model reads anything
        return False
    prepared = agent.provider.prepare_call(
        LlmCallConfig(provider=agent.provider.id, model=agent.model, images=agent.images)
    )
    return prepared.config.images is True


def vision_text(agent: Agent) -> str:
    """Whether the next request sends images, and why (``%agent status``)."""
    if agent.model_info.label is not None:  # the offline demo: no model reads anything
        return f"not sent — {agent.model_info.label}"
    if sends_images(agent):
        why = "configured: vision on" if agent.images else f"{agent.model} takes them"
        return f"sent to the model ({why})"
    if agent.images is False:
        why = "configured: vision off"
    elif agent.images:
        why = f"{agent.provider.id} takes none, whatever the vision setting"
    elif agent.model_info.images is False:
        why = f"{agent.model} takes none"
    else:
        why = f"{agent.model} is not known to take images; {HOW_TO_SET} sends them"
    return f"not sent, described in text ({why})"
