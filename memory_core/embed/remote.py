"""Any OpenAI-compatible embeddings endpoint, through the `openai` package."""

from __future__ import annotations

import math
from collections.abc import Sequence

import openai

from memory_core.errors import EmbedderUnavailable, LLMRefused, LLMTransient


class OpenAIEmbedder:
    """Embeddings from /v1/embeddings; the dimension is learned from the first answer."""

    def __init__(
        self, *, base_url: str, model: str, api_key: str | None, timeout_s: float = 60.0
    ) -> None:
        self.model = model
        self.dim = 0
        self._client = openai.OpenAI(
            base_url=base_url, api_key=api_key or "unused", timeout=timeout_s, max_retries=2
        )

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """One unit-length vector per text (normalised here: not every server does)."""
        if not texts:
            return []
        try:
            resp = self._client.embeddings.create(model=self.model, input=list(texts))
        except openai.APIStatusError as exc:
            kind = LLMTransient if exc.status_code == 429 or exc.status_code >= 500 else LLMRefused
            raise kind(f"embeddings {self.model}: {exc.status_code} {exc.message}") from exc
        except (openai.APITimeoutError, openai.APIConnectionError) as exc:
            raise LLMTransient(f"embeddings {self.model}: {type(exc).__name__}: {exc}") from exc
        rows = sorted(resp.data, key=lambda d: d.index)
        if len(rows) != len(texts):
            raise EmbedderUnavailable(
                f"{self.model} returned {len(rows)} vectors for {len(texts)} texts"
            )
        out = []
        for row in rows:
            norm = math.sqrt(sum(x * x for x in row.embedding)) or 1.0
            out.append([x / norm for x in row.embedding])
        if self.dim and any(len(v) != self.dim for v in out):
            raise EmbedderUnavailable(f"{self.model} changed its dimension")
        self.dim = len(out[0])
        return out
