"""Prefect tasks: thin wrappers that run one memory_core stage function on one unit of work."""
