"""Ingest: parse trajectories (OpenAI chat messages or generic steps) and store them once."""
