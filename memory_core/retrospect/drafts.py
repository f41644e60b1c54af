"""Moved to memory_core.models.drafts (the card writer and the screen need them without
importing retrospection). Kept for the modules that still import them from here."""

from memory_core.models.drafts import DraftCard, Extraction, Extractor, TrajectoryView

__all__ = ["DraftCard", "Extraction", "Extractor", "TrajectoryView"]
