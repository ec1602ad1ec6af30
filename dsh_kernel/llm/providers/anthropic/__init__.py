"""The Anthropic Messages API adapter."""
