"""The ONNX int8 MiniLM against the PyTorch MiniLM: per-text cosine agreement and throughput.

Texts are real: LoCoMo turns and tau-bench messages (bench/fetch_data.py), shuffled with a fixed
seed. Both models embed the same texts; the cosine of the two vectors of each text says how far
the swap moves it (1.0: identical direction).

    python bench/embed_swap.py [--n 2000] [--data data]

Writes bench/results/embed_swap.json.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
RESULTS = REPO / "bench" / "results"


def _texts(data: Path) -> list[str]:
    out: list[str] = []
    for f in sorted((data / "locomo").glob("*.json")):
        doc = json.loads(f.read_text())
        for conv in doc if isinstance(doc, list) else [doc]:
            for turns in conv.get("conversation", {}).values():
                if isinstance(turns, list):
                    out += [t["text"] for t in turns if isinstance(t, dict) and t.get("text")]
    for f in sorted((data / "tau-bench-airline").rglob("*.json"))[:200]:
        doc = json.loads(f.read_text())
        for run in doc if isinstance(doc, list) else [doc]:
            msgs = run.get("messages") or run.get("traj") or [] if isinstance(run, dict) else []
            out += [
                m["content"]
                for m in msgs
                if isinstance(m, dict) and isinstance(m.get("content"), str) and m["content"]
            ]
    return out


def _timed(embedder: Any, texts: list[str]) -> tuple[Any, float]:
    import numpy as np

    embedder.embed(texts[:8])  # load the model outside the timing
    t0 = time.perf_counter()
    vectors = np.asarray(embedder.embed(texts), dtype=np.float32)
    return vectors, time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--n", type=int, default=2000)
    # the data folder bench/fetch_data.py fills, else the shared one beside the repository
    found = (d for d in (REPO / "data", REPO.parent / "shared" / "data") if (d / "locomo").is_dir())
    ap.add_argument("--data", type=Path, default=next(found, REPO / "data"))
    args = ap.parse_args()
    import numpy as np

    from memory_core.embed.local import LocalMiniLM
    from memory_core.embed.onnx import OnnxMiniLM

    texts = _texts(args.data)
    random.Random(17).shuffle(texts)
    texts = texts[: args.n]
    onnx_v, onnx_s = _timed(OnnxMiniLM(), texts)
    torch_v, torch_s = _timed(LocalMiniLM(), texts)
    cos = (onnx_v * torch_v).sum(axis=1)
    result = {
        "texts": len(texts),
        "cosine": {
            "median": float(np.median(cos)),
            "mean": float(cos.mean()),
            "p1": float(np.percentile(cos, 1)),
            "min": float(cos.min()),
            "share_above_0.95": float((cos > 0.95).mean()),
        },
        "texts_per_s": {"onnx_int8": len(texts) / onnx_s, "torch_fp32": len(texts) / torch_s},
    }
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "embed_swap.json").write_text(json.dumps(result, indent=2))
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
