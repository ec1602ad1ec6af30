"""The OpenAI-compatible Chat Completions adapter (DeepSeek, OpenAI, local servers)."""
