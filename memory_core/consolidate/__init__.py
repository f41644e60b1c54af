"""Consolidation: near-duplicates merged, contradicted facts retired, with history."""
