"""Conversational recall on LoCoMo-format data: does the right turn come back?

Each conversation is ingested as it comes (sessions in time order; one namespace per
conversation), facts are extracted by the rules (no LLM), and for every question the top k
turns are retrieved and scored against the question's `evidence` turn ids
(recall@k = share of the evidence turns in the top k, averaged over questions).

Systems, all on the same turns rendered the same way ("[date] speaker: text"):
* bm25:        bm25s over turns (English stopwords, Snowball stemming); `bm25 (no stem)` too
* dense:       all-MiniLM-L6-v2 over turns, cosine
* rrf:         reciprocal-rank fusion of the two
* hindsight:   memory_core.recall (turn + context scales, facts), what the product serves
* hindsight (no facts): the same without the extracted facts

    python bench/locomo_recall.py data/locomo [--k 1 5 10]

Writes bench/results/locomo_recall.json and locomo_recall.png.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
RESULTS = REPO / "bench" / "results"
TARGET = 0.68
CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop", 5: "adversarial"}


def _records(path: Path) -> list[dict[str, Any]]:
    files = sorted(path.glob("*.json")) if path.is_dir() else [path]
    out: list[dict[str, Any]] = []
    for f in files:
        data = json.loads(f.read_text())
        out.extend(data if isinstance(data, list) else [data])
    return out


def _bm25_ranks(texts: list[str], queries: list[str], stem: bool) -> list[list[int]]:
    import bm25s
    import numpy as np

    from memory_core.keywords import stem_words

    stemmer = stem_words if stem else None
    tokens = bm25s.tokenize(texts, stopwords="en", stemmer=stemmer, show_progress=False)
    bm = bm25s.BM25()
    bm.index(tokens, show_progress=False)
    words = bm25s.tokenize(
        queries, stopwords="en", stemmer=stemmer, return_ids=False, show_progress=False
    )
    out = []
    for ws in words:
        ws = [w for w in ws if w in tokens.vocab]
        if not ws:
            out.append([])
            continue
        scores = np.asarray(bm.get_scores(ws))
        out.append([int(i) for i in np.argsort(-scores, kind="stable")[:200] if scores[i] > 0])
    return out


def _rrf(*rankings: list[int], k: int = 60) -> list[int]:
    fused: dict[int, float] = defaultdict(float)
    for r in rankings:
        for rank, i in enumerate(r):
            fused[i] += 1.0 / (k + rank + 1)
    return sorted(fused, key=lambda i: (-fused[i], i))


def run(path: Path, ks: list[int], embedder_choice: str = "local") -> dict[str, Any]:
    import numpy as np

    from memory_core import db
    from memory_core.embed.factory import build_embedder
    from memory_core.facts.stage import extract_facts
    from memory_core.ingest.store import ingest
    from memory_core.recall import RecallIndex, fact_ranking, load_items
    from memory_core.settings import Settings

    records = _records(path)
    settings = Settings(
        data_dir=Path(tempfile.mkdtemp(prefix="locomo-")), embedding={"provider": embedder_choice}
    )
    embedder = build_embedder(settings)
    assert embedder is not None
    db.upgrade(settings)
    engine = db.make_engine(settings)
    # recall[system][category][k] -> per-question values
    recall: dict[str, dict[int, dict[int, list[float]]]] = defaultdict(
        lambda: defaultdict(lambda: defaultdict(list))
    )
    timing: dict[str, float] = defaultdict(float)
    counts = {"conversations": len(records), "turns": 0, "questions": 0, "no_evidence": 0}
    facts_total = 0
    for n, rec in enumerate(records):
        ns = f"conversation-{n}"
        conv = {k: v for k, v in rec.items() if k not in ("qa",)}
        t0 = time.perf_counter()
        report = ingest(engine=engine, records=[(ns, conv)], namespace=ns, task_type="default")
        assert report.stored == 1, report.refused
        facts_total += extract_facts(engine=engine, namespace=ns).new
        timing["ingest_and_facts_s"] += time.perf_counter() - t0
        t0 = time.perf_counter()
        items = load_items(engine=engine, namespace=ns)
        index = RecallIndex(items=items, embedder=embedder)
        timing["index_s"] += time.perf_counter() - t0
        counts["turns"] += len(items)
        texts = [it.rendered() for it in items]
        ids = [it.turn_id for it in items]
        qa = [q for q in rec.get("qa", []) if q.get("evidence")]
        counts["no_evidence"] += len(rec.get("qa", [])) - len(qa)
        counts["questions"] += len(qa)
        if not qa:
            continue
        questions = [q["question"] for q in qa]
        t0 = time.perf_counter()
        qvec = np.asarray(embedder.embed(questions), dtype=np.float32)
        assert index.vectors is not None
        sims = qvec @ index.vectors.T
        dense = [[int(i) for i in np.argsort(-row, kind="stable")[:200]] for row in sims]
        bm25 = _bm25_ranks(texts, questions, stem=True)
        bm25_plain = _bm25_ranks(texts, questions, stem=False)
        timing["baselines_s"] += time.perf_counter() - t0
        for qi, q in enumerate(qa):
            t0 = time.perf_counter()
            facts = fact_ranking(engine=engine, namespace=ns, text=q["question"], index=index)
            hs = index.search(
                text=q["question"], top_k=max(ks), vector=qvec[qi], extra={"facts": facts}
            )
            timing["hindsight_s"] += time.perf_counter() - t0
            hs_plain = index.search(text=q["question"], top_k=max(ks), vector=qvec[qi])
            position = {id(it): i for i, it in enumerate(items)}
            systems = {
                "bm25": bm25[qi],
                "bm25 (no stem)": bm25_plain[qi],
                "dense": dense[qi],
                "rrf": _rrf(bm25[qi], dense[qi]),
                "hindsight": [position[id(h.item)] for h in hs],
                "hindsight (no facts)": [position[id(h.item)] for h in hs_plain],
            }
            evidence = set(q["evidence"])
            for name, ranked in systems.items():
                for k in ks:
                    top = {ids[i] for i in ranked[:k]}
                    recall[name][int(q["category"])][k].append(len(evidence & top) / len(evidence))
        print(f"conversation {n + 1}/{len(records)}: {len(items)} turns, {len(qa)} questions")
    table: dict[str, Any] = {}
    for name, by_cat in recall.items():
        row: dict[str, Any] = {}
        for cat, by_k in sorted(by_cat.items()):
            row[str(cat)] = {f"r@{k}": round(float(np.mean(v)), 4) for k, v in by_k.items()}
            row[str(cat)]["n"] = len(by_k[ks[0]])
        for k in ks:
            vals = [v for c in (1, 2, 3, 4) for v in by_cat.get(c, {}).get(k, [])]
            row.setdefault("1-4", {})[f"r@{k}"] = round(float(np.mean(vals)), 4) if vals else None
        table[name] = row
    kmax = f"r@{max(ks)}"
    best_baseline = {
        c: max(table[b][c][kmax] for b in ("bm25", "bm25 (no stem)", "dense", "rrf"))
        for c in ("1", "2", "3", "4", "1-4")
        if c in table["bm25"]
    }
    hs_row = table["hindsight"]
    return {
        "data": str(path),
        "k": ks,
        "counts": {**counts, "facts": facts_total},
        "recall": table,
        "categories": CATEGORIES,
        "target": {
            "recall@10 categories 1-4": TARGET,
            "met": bool(
                hs_row["1-4"][kmax] >= TARGET
                and all(hs_row[c][kmax] > best_baseline[c] for c in ("1", "2", "3", "4"))
            ),
            "best_baseline": best_baseline,
        },
        "timing_s": {k: round(v, 1) for k, v in timing.items()},
    }


def plot(result: dict[str, Any], out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    systems = ["bm25", "dense", "rrf", "hindsight"]
    cats = ["1", "2", "3", "4", "1-4"]
    labels = [f"{c}\n{CATEGORIES.get(int(c), '') if c.isdigit() else 'all 1-4'}" for c in cats]
    kmax = f"r@{max(result['k'])}"
    fig, ax = plt.subplots(figsize=(9, 4.5))
    width = 0.8 / len(systems)
    for i, s in enumerate(systems):
        vals = [result["recall"][s][c][kmax] for c in cats]
        bars = ax.bar([x + i * width for x in range(len(cats))], vals, width, label=s)
        ax.bar_label(bars, fmt="%.2f", fontsize=7)
    ax.axhline(TARGET, color="grey", ls="--", lw=1, label=f"target {TARGET} (1-4)")
    ax.set_xticks([x + width * (len(systems) - 1) / 2 for x in range(len(cats))], labels)
    ax.set_ylabel(f"recall@{max(result['k'])} of evidence turns")
    ax.set_title("LoCoMo: evidence recall by question category")
    ax.set_ylim(0, 1)
    ax.legend(fontsize=8, loc="upper left")
    fig.tight_layout()
    fig.savefig(out, dpi=120)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("path", type=Path, help="a LoCoMo-format .json file or a folder of them")
    ap.add_argument("--k", type=int, nargs="+", default=[1, 5, 10])
    ap.add_argument("--out", type=Path, default=RESULTS / "locomo_recall.json")
    ap.add_argument(
        "--embedder",
        default="local",
        choices=["local", "local-torch"],
        help="local: MiniLM int8 on ONNX Runtime (the default install); local-torch: on PyTorch",
    )
    args = ap.parse_args()
    t0 = time.perf_counter()
    result = run(args.path, sorted(args.k), args.embedder)
    result["embedder"] = args.embedder
    result["wall_s"] = round(time.perf_counter() - t0, 1)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    plot(result, args.out.with_suffix(".png"))
    kmax = f"r@{max(result['k'])}"
    print(f"\nrecall@{max(result['k'])} of evidence turns ({result['counts']})")
    print(f"{'system':22}" + "".join(f"{c:>10}" for c in ("1", "2", "3", "4", "1-4")))
    for name, row in result["recall"].items():
        print(f"{name:22}" + "".join(f"{row[c][kmax]:>10.3f}" for c in ("1", "2", "3", "4", "1-4")))
    print(f"target met: {result['target']['met']}; {result['wall_s']} s")


if __name__ == "__main__":
    main()
