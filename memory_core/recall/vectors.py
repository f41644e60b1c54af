"""Item vectors: derived data, cached per text and model in one file under the data directory."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from memory_core.embed.base import Embedder


class VectorCache:
    """Item vectors by text hash and model, kept in one .npz file (or in memory only)."""

    def __init__(self, *, path: Path | None = None) -> None:
        self.path = path
        self.vectors: dict[str, np.ndarray] = {}
        if path is not None and path.is_file():
            with np.load(path) as data:
                self.vectors = {k: data[k] for k in data.files}

    def embed(self, *, embedder: Embedder, texts: Sequence[str]) -> np.ndarray:
        """Unit vectors of the texts; only unseen texts go to the embedder."""
        keys = [hashlib.sha256(f"{embedder.model}\x1f{t}".encode()).hexdigest() for t in texts]
        todo = list(dict.fromkeys(k for k in keys if k not in self.vectors))
        if todo:
            by_key = dict(zip(keys, texts, strict=True))
            for k, v in zip(todo, embedder.embed([by_key[k] for k in todo]), strict=True):
                self.vectors[k] = np.asarray(v, dtype=np.float32)
            if self.path is not None:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                np.savez(self.path, **self.vectors)  # type: ignore[arg-type]
        if not keys:
            return np.zeros((0, embedder.dim or 1), dtype=np.float32)
        return np.stack([self.vectors[k] for k in keys])


def vector_cache_path(*, data_dir: Path, namespace: str) -> Path:
    """Where a namespace's item vectors are cached."""
    digest = hashlib.sha256(namespace.encode()).hexdigest()[:16]
    return data_dir / "recall" / f"{digest}.npz"
