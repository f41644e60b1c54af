"""Hindsight's domain: models, storage, preconditions, extraction, ranking (no Prefect/FastAPI)."""
