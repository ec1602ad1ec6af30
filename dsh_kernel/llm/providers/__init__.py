"""HTTP model providers: Chat Completions (DeepSeek, OpenAI, any compatible server) and Anthropic.

Each adapter is five parts — ``wire`` (shapes at the edge), ``serialize`` (request body), ``sse``
(event payloads), ``translate`` (payloads → ``StreamChunk``s) and ``adapter`` (the ``Provider``) —
over two shared modules: ``sse`` (byte-level SSE framing) and ``transport`` (one bounded HTTP attempt
and the failure mapping). Configuration and key resolution live in ``dsh_kernel.llm.config``.
"""

from dsh_kernel.llm.providers.anthropic.adapter import MessagesProvider
from dsh_kernel.llm.providers.base import KeySource, ProviderDefaults, Timeouts
from dsh_kernel.llm.providers.openai_compat.adapter import ChatCompletionsProvider
from dsh_kernel.llm.providers.openai_compat.profiles import DEEPSEEK, GENERIC, OPENAI, ChatProfile

__all__ = [
    "DEEPSEEK",
    "GENERIC",
    "OPENAI",
    "ChatCompletionsProvider",
    "ChatProfile",
    "KeySource",
    "MessagesProvider",
    "ProviderDefaults",
    "Timeouts",
]
