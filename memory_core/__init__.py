"""Hindsight's domain: models, storage, preconditions, extraction and ranking (no Prefect, no FastAPI)."""
