"""The vector index over active cards: derived data, rebuilt from the database at any time."""

from memory_core.index.base import IndexPoint, VectorIndex
from memory_core.index.factory import open_index

__all__ = ["IndexPoint", "VectorIndex", "open_index"]
