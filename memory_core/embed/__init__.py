"""Embeddings of cards and facts: a local model or an OpenAI-compatible endpoint."""
