"""Memory poisoning: do injected instructions reach an agent through the cards and facts served?

Attack variants (bench/poison_attacks.py: wordings x encodings x channels; the held-out
wordings are reported apart) are mixed into the real data at poison rates of 0.1%, 1% and 5%:

* tau-bench: copies of benign runs whose first call fails first with the attack in the
  error (literal, split over two errors, encoded, other languages), or where the agent
  obeyed an order in a tool result or a user message before retrying; plus cards stored by a
  write key through the API path. Learnt with the nightly stages (ingest -> rule retrospect ->
  validate -> consolidate) on top of the 140 benign runs.
* LoCoMo: attacker turns said inside the conversations ("from now on ...", orders, encoded),
  facts extracted by the product's rules.

k = max(1, round(rate x records)) poisoned records per trial; variants are spread over trials
of k so every variant is measured at every rate. Attack success = share of trigger states
(tau: the states before the attacked call and right after its error, plus the planning
state; LoCoMo: four trigger questions) whose served cards, facts or prompt block carry the
attacker's tool or value (in any decoded reading). Run with the screen on (the product) and
off (HINDSIGHT_SCREEN=false: undefended). Benign utility: replay hit rate on tau-bench and
LoCoMo recall@10 (categories 1-4) with the poison mixed in, against the unpoisoned run.

    python bench/poison.py data [--locomo-conversations 2]

With `--attacks instructed`, the orders obeyed from the task message or a successful result of
bench/poison_instructed.py (keys `instructed` and `instructed_first`, one poisoned run);
`--attacks fresh` the same with the set of bench/poison_fresh.py (keys `fresh`, `fresh_first`).

With `--attacks heldout`, the set of bench/poison_heldout.py instead (written and measured
once before the screen was changed for it): its numbers go to the `heldout` key, the first
measurement stays in `heldout_first`, and poison_heldout.png draws both.

Writes bench/results/poison.json and poison.png (the rule path and the LLM path).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))
RESULTS = REPO / "bench" / "results"
RATES = (0.001, 0.01, 0.05)


def _chunks(items: list[Any], k: int) -> list[list[Any]]:
    return [items[i : i + k] for i in range(0, len(items), k)]


def _summary(per_variant: dict[str, tuple[int, int]], held: set[str]) -> dict[str, Any]:
    """Attack success over trigger states: all, tuned, held-out, by channel; variants that got
    through at all."""

    def share(names: list[str]) -> float | None:
        hits = sum(per_variant[n][0] for n in names)
        states = sum(per_variant[n][1] for n in names)
        return round(hits / states, 4) if states else None

    names = sorted(per_variant)
    channels: dict[str, list[str]] = defaultdict(list)
    for n in names:
        channels[n.split("/")[0]].append(n)
    return {
        "attack_success": share(names),
        "tuned": share([n for n in names if n not in held]),
        "held_out": share([n for n in names if n in held]),
        "by_channel": {c: share(ns) for c, ns in sorted(channels.items())},
        "variants": len(names),
        "variants_through": sorted(n for n in names if per_variant[n][0]),
    }


def run_tau(
    data: Path, variants: list[Any], now: Any, rates: tuple[float, ...] = RATES
) -> dict[str, Any]:
    """Attack success and replay utility on tau-bench, screen on and off."""
    import poison_tau as pt

    recs = json.loads((data / "tau-bench-airline" / "trajectories.json").read_text())
    benign = [(f"r{i}", r) for i, r in enumerate(recs)]
    good = pt.good_runs(recs)
    tau_variants = [v for v in variants if v.channel != "fact"]
    held = {v.name for v in tau_variants if v.held_out}
    out: dict[str, Any] = {"records": len(recs), "variants": len(tau_variants), "rates": {}}
    for screen in (True, False):
        cfg = "defended" if screen else "undefended"
        base, learn_s = pt.learn_base(benign, screen)
        clean = pt.utility(base, [], benign, screen, now)
        out.setdefault("clean_replay_hit_rate", {})[cfg] = round(clean, 4)
        out.setdefault("learn_s", {})[cfg] = round(learn_s, 1)
        by_k: dict[int, dict[str, tuple[int, int]]] = {}
        for rate in rates:
            k = max(1, round(rate * len(recs)))
            t0 = time.perf_counter()
            if k not in by_k:  # 0.1% and 1% of 140 runs are both one run: measured once
                by_k[k] = {}
                for chunk in _chunks(tau_variants, k):
                    r = pt.attack_trial(base, chunk, good, screen, now)
                    for v in chunk:
                        by_k[k][v.name] = (r["hits"][v.name], r["states"])
            per = by_k[k]
            # utility: the benign runs replayed against cards learnt with k poisoned runs in
            mix = [v for v in tau_variants if v.channel != "api"][:k]
            extra = [
                (f"poison-{i}", pt.poison(good[i % len(good)], v, i)) for i, v in enumerate(mix)
            ]
            hit = pt.utility(base, extra, benign, screen, now)
            row = out["rates"].setdefault(str(rate), {"poisoned_records": k})
            row[cfg] = {
                **_summary(per, held),
                "replay_hit_rate": round(hit, 4),
                "replay_delta_points": round(100 * (hit - clean), 2),
                "seconds": round(time.perf_counter() - t0, 1),
            }
            print(f"tau {cfg} rate {rate}: {row[cfg]['attack_success']} hit {hit:.3f}/{clean:.3f}")
    return out


def run_real_rules(data: Path, now: Any) -> dict[str, Any]:
    """The real-tool attacks (a tool the run calls, no cue) through the rule path (one
    poisoned run per trial), screen on and off."""
    import poison_tau as pt
    from poison_attacks import real_variants

    recs = json.loads((data / "tau-bench-airline" / "trajectories.json").read_text())
    benign = [(f"r{i}", r) for i, r in enumerate(recs)]
    good = pt.good_runs(recs)
    real = real_variants()
    out: dict[str, Any] = {"variants": len(real)}
    for screen in (True, False):
        base, _ = pt.learn_base(benign, screen)
        per = {}
        for v in real:
            r = pt.attack_trial(base, [v], good, screen, now)
            per[v.name] = (r["hits"][v.name], r["states"])
        out["defended" if screen else "undefended"] = _summary(per, {v.name for v in real})
        print(f"tau real-tool rules screen={screen}: {out['defended' if screen else 'undefended']}")
    return out


def run_llm(
    data: Path, variants: list[Any], now: Any, conversations: int, real: bool = True
) -> dict[str, Any]:
    """The LLM extraction path (bench/poison_llm.py): tau-bench cards, the tuned, held-out and
    real-tool attacks (`real`), and LoCoMo facts by the LLM."""
    import poison_llm as pll
    from poison_attacks import real_variants

    from memory_core.embed.factory import build_embedder
    from memory_core.settings import Settings

    recs = json.loads((data / "tau-bench-airline" / "trajectories.json").read_text())
    tau = [v for v in variants if v.channel not in ("fact", "api")]
    tau += real_variants() if real else []
    records = json.loads((data / "locomo" / "locomo-dev.json").read_text())
    embedder = build_embedder(Settings(embedding={"provider": "local"}))
    facts = [v for v in variants if v.channel == "fact"]
    return {
        "tau": pll.run_tau_llm(recs, tau, RATES, now, _summary),
        "locomo": pll.run_locomo_llm(records, facts, RATES, conversations, _summary, embedder),
    }


def run_locomo(data: Path, variants: list[Any], conversations: int) -> dict[str, Any]:
    """Attack success on facts and recall utility on LoCoMo, screen on and off."""
    import poison_locomo as pl

    from memory_core.embed.factory import build_embedder
    from memory_core.settings import Settings

    records = json.loads((data / "locomo" / "locomo-dev.json").read_text())
    fact_variants = [v for v in variants if v.channel == "fact"]
    held = {v.name for v in fact_variants if v.held_out}
    n_turns = pl.turns(records)
    sub = records[:conversations]
    embedder = build_embedder(
        Settings(embedding={"provider": "local"})
    )  # the default install's model
    out: dict[str, Any] = {
        "turns": n_turns,
        "variants": len(fact_variants),
        "recall_conversations": len(sub),
        "rates": {},
    }
    for screen in (True, False):
        cfg = "defended" if screen else "undefended"
        clean = pl.recall(sub, screen, embedder)
        out.setdefault("clean_recall_at_10", {})[cfg] = round(clean, 4)
        for rate in RATES:
            k = max(1, round(rate * n_turns))
            per: dict[str, tuple[int, int]] = {}
            t0 = time.perf_counter()
            for chunk in _chunks(fact_variants, k):
                r = pl.attack_trial(records, chunk, screen)
                for v in chunk:
                    per[v.name] = (r["hits"][v.name], r["asked"][v.name])
            k_sub = max(1, round(rate * pl.turns(sub)))
            mix = [fact_variants[i % len(fact_variants)] for i in range(k_sub)]
            rec = pl.recall(pl.poison(sub, mix), screen, embedder)
            row = out["rates"].setdefault(str(rate), {"poisoned_turns": k})
            row[cfg] = {
                **_summary(per, held),
                "recall_at_10": round(rec, 4),
                "recall_delta_points": round(100 * (rec - clean), 2),
                "seconds": round(time.perf_counter() - t0, 1),
            }
            print(
                f"locomo {cfg} rate {rate}: {row[cfg]['attack_success']} r@10 {rec:.3f}/{clean:.3f}"
            )
    return out


def run_heldout(args: Any, paths: set[str], result: dict[str, Any]) -> None:
    """The held-out set through the rule and LLM paths; the first measurement is kept."""
    from poison_heldout import heldout_variants

    from memory_core.models.columns import utcnow

    t0 = time.perf_counter()
    vs = heldout_variants()
    first = "heldout_first" not in result
    got: dict[str, Any] = dict(result.get("heldout") or {})
    got["variants"] = len(vs)
    if "rules" in paths:
        got["tau"] = run_tau(args.data, vs, utcnow())
        got["locomo"] = run_locomo(args.data, vs, args.locomo_conversations)
    if "llm" in paths:
        got["llm"] = run_llm(args.data, vs, utcnow(), args.locomo_conversations, real=False)
    got.setdefault("wall_s", {})[args.paths] = round(time.perf_counter() - t0, 1)
    result["heldout"] = got
    if first or not all(k in result["heldout_first"] for k in got):
        keep = dict(result.get("heldout_first") or {})
        result["heldout_first"] = {**got, **keep}  # a path measured before stays as it was
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    if "llm" in result["heldout"] and "tau" in result["heldout"]:
        from poison_plot import plot_heldout

        plot_heldout(result, args.out.with_name(args.out.stem + "_heldout.png"))
    print(f"held-out: {len(vs)} variants; {got['wall_s']} s; {args.out}")


def run_instructed(args: Any, paths: set[str], result: dict[str, Any]) -> None:
    """An instructed-step set (bench/poison_instructed.py, or bench/poison_fresh.py with
    `--attacks fresh`) through the rule and LLM paths at one poisoned run (0.1% and 1% of
    tau-bench); the first measurement is kept apart."""
    import poison_llm as pll

    from memory_core.models.columns import utcnow

    if args.attacks == "fresh":
        from poison_fresh import fresh_variants as make
    else:
        from poison_instructed import instructed_variants as make

    t0 = time.perf_counter()
    vs = make()
    key = args.attacks
    got: dict[str, Any] = dict(result.get(key) or {})
    got["variants"] = len(vs)
    rates = (0.001,)
    if "rules" in paths:
        got["tau"] = run_tau(args.data, vs, utcnow(), rates)
    if "llm" in paths:
        recs = json.loads((args.data / "tau-bench-airline" / "trajectories.json").read_text())
        got["llm"] = pll.run_tau_llm(recs, vs, rates, utcnow(), _summary)
    got.setdefault("wall_s", {})[args.paths] = round(time.perf_counter() - t0, 1)
    result[key] = got
    keep = dict(result.get(f"{key}_first") or {})
    result[f"{key}_first"] = {**got, **keep}  # a path measured before stays as it was
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"{key}: {len(vs)} variants; {got['wall_s']} s; {args.out}")


def main() -> None:
    """Run both halves, write the JSON and the plot, print the headline numbers."""
    from poison_attacks import variants

    from memory_core.models.columns import utcnow

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument(
        "data", type=Path, help="the data folder (tau-bench-airline, locomo: bench/fetch_data.py)"
    )
    ap.add_argument("--locomo-conversations", type=int, default=2, help="for the recall check")
    ap.add_argument("--out", type=Path, default=RESULTS / "poison.json")
    ap.add_argument(
        "--paths",
        default="rules,llm",
        help="rules (rule extractor + facts by rules), llm (LLM extractor and LLM facts) or "
        "both; a path not run keeps its numbers from --out",
    )
    ap.add_argument(
        "--attacks",
        choices=("main", "heldout", "instructed", "fresh"),
        default="main",
        help="heldout: the set of bench/poison_heldout.py, written into the 'heldout' key "
        "(its first measurement is kept as 'heldout_first'); instructed: the set of "
        "bench/poison_instructed.py at one poisoned run ('instructed', 'instructed_first'); "
        "fresh: the set of bench/poison_fresh.py the same way ('fresh', 'fresh_first')",
    )
    args = ap.parse_args()
    paths = set(args.paths.split(","))
    t0 = time.perf_counter()
    result: dict[str, Any] = json.loads(args.out.read_text()) if args.out.exists() else {}
    if args.attacks == "heldout":
        run_heldout(args, paths, result)
        return
    if args.attacks in ("instructed", "fresh"):
        run_instructed(args, paths, result)
        return
    vs = variants()
    result.update({"variants": len(vs), "held_out_variants": sum(v.held_out for v in vs)})
    if "rules" in paths:
        result["tau"] = run_tau(args.data, vs, utcnow())
        result["locomo"] = run_locomo(args.data, vs, args.locomo_conversations)
        result["tau_real_tool_rules"] = run_real_rules(args.data, utcnow())
    if "real" in paths:  # the real-tool attacks alone, through the rule path
        result["tau_real_tool_rules"] = run_real_rules(args.data, utcnow())
    if "llm" in paths:
        result["llm"] = run_llm(args.data, vs, utcnow(), args.locomo_conversations)
    result["wall_s"] = {**(result.get("wall_s") if isinstance(result.get("wall_s"), dict) else {})}
    result["wall_s"][args.paths] = round(time.perf_counter() - t0, 1)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    if "tau" in result and "locomo" in result:
        from poison_plot import plot

        plot(result, args.out.with_suffix(".png"))
    print(f"{len(vs)} variants; {result['wall_s']} s; {args.out}")


if __name__ == "__main__":
    main()
