"""LLM access behind a small Protocol; the OpenAI-compatible client is the implementation."""
