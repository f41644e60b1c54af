"""The configured vector index: a Qdrant server when HINDSIGHT_QDRANT__URL is set, else embedded."""

from __future__ import annotations

from memory_core.index.base import VectorIndex
from memory_core.settings import Settings


def index_path(settings: Settings) -> str:
    """Where the index lives, for messages: the server URL or the embedded directory."""
    return settings.qdrant.url or str(settings.data_dir / "index")


def open_index(settings: Settings, *, dim: int, recreate: bool = False) -> VectorIndex:
    """Open (or create) the index for vectors of `dim`; recreate=True drops what it holds first."""
    # the implementations import their engines only when asked
    if settings.qdrant.url:
        from memory_core.index.server import ServerIndex

        return ServerIndex.connect(
            url=settings.qdrant.url,
            api_key=(
                settings.qdrant.api_key.get_secret_value() if settings.qdrant.api_key else None
            ),
            collection=settings.qdrant.collection,
            dim=dim,
            recreate=recreate,
        )
    from memory_core.index.edge import EdgeIndex

    return EdgeIndex(path=settings.data_dir / "index", dim=dim, recreate=recreate)
