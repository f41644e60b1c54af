"""Prefect flows: they only compose tasks; `nightly` runs the stages in order."""
