"""Does a card help? The holdout and effect-aware decay on the tau-bench cards.

Cards are learnt from the 140 tau-bench airline runs with the nightly stages (rules, the
review queue approved); the agent population queries at the real pre-call states of those
runs where a card matches. Each card gets a hidden true effect; a run succeeds with its base
rate (0.3, or 0.7 where the real run was rewarded) plus the effects of the cards it was
served. Reported:

1. (bench/effects_sim.py) against uses per card: the estimate's error, harms recall and
   precision, at holdout rates 5%, 10%, 20%;
2. 30 simulated nights through the real service (holdout, outcomes per query, decay), with
   effect-aware decay and with the +0.05/-0.1 rule alone: the mean true effect of the cards
   served each night, and what withholding cost;
3. the holdout's extra query latency (in process, rate 0.05 against 0).

    python bench/effects.py [--runs-per-night 1000] [--replicates 200]
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from effects_nights import latency, nights
from effects_sim import simulate
from lessons_learn import _learn

from memory_core.settings import EffectRules

REPO = Path(__file__).resolve().parents[1]
# the data folder bench/fetch_data.py fills, else the shared one beside the repository
DATA = (
    next(
        (
            d
            for d in (REPO / "data", REPO.parent / "shared" / "data")
            if (d / "tau-bench-airline").is_dir()
        ),
        REPO / "data",
    )
    / "tau-bench-airline"
)
RESULTS = Path(__file__).parent / "results"
NS = "bench"


def learn(data_dir: Path) -> tuple[Any, list[dict[str, Any]], list[float]]:
    """The cards (all approved) and the matching states with their base success rates."""
    from sqlalchemy import update

    from memory_core.db import session_scope
    from memory_core.models.card import Card
    from memory_core.replay import parse_all
    from memory_core.task_state import states_before_calls

    recs = json.loads((DATA / "trajectories.json").read_text())
    records = [(f"r{i}", r) for i, r in enumerate(recs)]
    engine = _learn(records, data_dir)
    with session_scope(engine) as s:  # a reviewer approves the queue
        s.execute(update(Card).where(Card.status == "review").values(status="active"))
    parsed, _ = parse_all(records, namespace=NS, task_type="default")
    states: list[dict[str, Any]] = []
    base: list[float] = []
    reward = {f"r{i}": float(r.get("reward") or 0.0) for i, r in enumerate(recs)}
    for t, (name, _) in zip(parsed, records, strict=True):
        calls = [x for x in t.steps if x.type == "tool_call" and x.tool]
        for st in states_before_calls(calls, task_type=t.task_type, agent_id=t.agent_id):
            states.append(st)
            base.append(0.3 + 0.4 * reward[name])
    return engine, states, base


def matching(engine: Any, states: list[dict[str, Any]], base: list[float]) -> Any:
    """Top-5 matches of each state (holdout off); only states where some card matches."""
    from memory_core.models.columns import utcnow
    from memory_core.serve.retrieval import retrieve
    from memory_core.serve.snapshot import load_snapshot

    snap = load_snapshot(engine=engine, namespace=NS)
    ids = sorted(snap.entries, key=str)
    index = {cid: i for i, cid in enumerate(ids)}
    kept, kept_base, matches = [], [], []
    for st, b in zip(states, base, strict=True):
        r = retrieve(snapshot=snap, state=st, now=utcnow(), top_k=5)
        if r.matches:
            kept.append(st)
            kept_base.append(b)
            matches.append([index[m.entry.card_id] for m in r.matches])
    return ids, kept, kept_base, matches


def plot(result: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(14, 4))
    for rate, by_n in result["estimator"].items():
        ns = [int(n) for n in by_n]
        axes[0].plot(ns, [by_n[n]["mean_abs_error"] for n in by_n], "o-", label=f"holdout {rate}")
        axes[1].plot(ns, [by_n[n]["harms_recall"] or 0 for n in by_n], "o-", label=f"recall {rate}")
        prec = [by_n[n]["harms_precision"] for n in by_n]
        axes[1].plot(
            [n for n, p in zip(ns, prec, strict=True) if p is not None],
            [p for p in prec if p is not None],
            "x--",
            label=f"precision {rate}",
        )
    for ax, title in zip(axes[:2], ("|estimate - true effect|", "harms verdict"), strict=True):
        ax.set_xscale("log")
        ax.set_xlabel("uses per card (served + withheld)")
        ax.set_title(title)
        ax.legend(fontsize=7)
    axes[1].axhline(0.9, color="grey", lw=0.8)
    for name, run in result.get("nights", {}).items():
        m = [n["mean_true_effect_served"] for n in run["per_night"]]
        axes[2].plot(range(1, len(m) + 1), m, label=name)
    axes[2].set_xlabel("night")
    axes[2].set_title("mean true effect of served cards")
    axes[2].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs-per-night", type=int, default=1000)
    ap.add_argument("--nights", type=int, default=30)
    ap.add_argument("--rate", type=float, default=0.05, help="holdout rate of the nights")
    ap.add_argument("--replicates", type=int, default=200)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--skip-nights", action="store_true")
    ap.add_argument(
        "--fdr", type=float, default=EffectRules().fdr, help="harms FDR level (0: each card alone)"
    )
    args = ap.parse_args()
    rules = EffectRules(fdr=args.fdr)
    work = Path(tempfile.mkdtemp(prefix="effects-bench-"))
    t0 = time.perf_counter()
    engine, states, base = learn(work / "learnt")
    engine.dispose()
    learn_s = time.perf_counter() - t0
    from memory_core import db
    from memory_core.settings import Settings

    engine = db.make_engine(Settings(data_dir=work / "learnt"))
    ids, states, base, matches = matching(engine, states, base)
    engine.dispose()
    print(f"{len(ids)} cards, {len(states)} matching states (learnt in {learn_s:.0f} s)")
    result: dict[str, Any] = {
        "cards": len(ids),
        "matching_states": len(states),
        "mean_matches_per_state": round(statistics.mean(len(m) for m in matches), 2),
        "rules": rules.model_dump(),
    }
    t0 = time.perf_counter()
    # the configured harms test and, on the same simulated outcomes, each card judged alone
    result["estimator"], result["estimator_per_card"] = simulate(
        matches=matches,
        base=base,
        cards=len(ids),
        rates=[0.05, 0.1, 0.2],
        replicates=args.replicates,
        seed=args.seed,
        rules=[rules, rules.model_copy(update={"fdr": 0.0})],
    )
    result["estimator_replicates"] = args.replicates
    result["estimator_note"] = (
        f"estimator: the harms verdict by the namespace's Benjamini-Hochberg test at fdr "
        f"{rules.fdr:g}; estimator_per_card: the same simulated outcomes judged by each card's "
        f"own {rules.z:g}-z interval (fdr 0, the rule before)"
    )
    print(f"estimator simulated in {time.perf_counter() - t0:.0f} s")
    for key in ("estimator", "estimator_per_card"):
        for rate, by_n in result[key].items():
            for n, m in by_n.items():
                print(f"  {key} rate {rate} uses {n:>5}: {m}")
    result["latency"] = latency(work / "learnt", states, ns=NS)
    print("latency", result["latency"])
    if not args.skip_nights:
        rng = np.random.default_rng(args.seed)
        from effects_sim import draw_effects

        delta = dict(zip(ids, draw_effects(rng, len(ids)).tolist(), strict=True))
        result["nights"] = {}
        for aware in (True, False):
            name = "effect-aware decay" if aware else "+0.05/-0.1 rule alone"
            d = work / ("aware" if aware else "plain")
            shutil.copytree(work / "learnt", d)
            result["nights"][name] = nights(
                data_dir=d,
                states=states,
                base=base,
                delta=delta,
                aware=aware,
                rate=args.rate,
                runs_per_night=args.runs_per_night,
                n_nights=args.nights,
                seed=args.seed,
                ns=NS,
                fdr=args.fdr,
            )
            print(name, {k: v for k, v in result["nights"][name].items() if k != "per_night"})
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "effects.json").write_text(json.dumps(result, indent=2) + "\n")
    plot(result, RESULTS / "effects.png")
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
