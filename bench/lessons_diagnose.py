"""Why do cautions score right writes above wrong ones? Per fold, the cautions that fire.

Learns each fold as bench/lessons.py does (the fold's database is kept under --work and
reused when present), then, for every write of the held-out runs, the contrast cautions
served in the top 3 (as bench/lessons_writes.score_writes ranks them): their preconditions,
confidence, supporting / contradicting / contrast runs and task groups. And for every active
caution, how many learning runs (and task groups), successful and failed, make a call that
meets its preconditions: what the contradiction counting could have seen.

With `--before` (another diagnosis of the same data, e.g. made by other code), the AUROC
differences of the same writes, with a paired bootstrap interval.

    python bench/lessons_diagnose.py data/tau-bench-airline/trajectories.json
        [--work /tmp/lessons-diag] [--out bench/results/lessons_diagnosis.json]
        [--before PREVIOUS_DIAGNOSIS.json]
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.lessons import _group  # noqa: E402
from bench.lessons_learn import _learn  # noqa: E402
from bench.lessons_metrics import auroc, bootstrap  # noqa: E402
from bench.lessons_writes import TOP, canon, expected_actions, is_write  # noqa: E402


def _engine(records: list[tuple[str, dict[str, Any]]], work: Path) -> Any:
    from memory_core import db
    from memory_core.settings import Settings
    from memory_core.settings_groups import EmbeddingSettings

    if (work / "done").exists():
        settings = Settings(data_dir=work, embedding=EmbeddingSettings(provider="none"))
        return db.make_engine(settings)
    engine = _learn(records, work)
    (work / "done").write_text("1")
    return engine


def _reach(card: Any, runs: list[Any], groups: dict[str, str]) -> dict[str, Any]:
    """Learning runs (and their task groups) with a call meeting the card's preconditions."""
    from memory_core.preconditions import compile_stored, holds_all, make_context
    from memory_core.task_state import states_before_calls

    compiled = [compile_stored(p) for p in card.preconditions]
    hit: dict[str, set[str]] = {"success": set(), "failure": set()}
    hit_groups: dict[str, set[str]] = {"success": set(), "failure": set()}
    for t in runs:
        calls = [s for s in t.steps if s.type == "tool_call" and s.tool]
        states = states_before_calls(calls, task_type=t.task_type, agent_id=t.agent_id)
        for state in states:
            if holds_all(compiled, make_context(state), frozenset(state)):
                hit[t.outcome.value].add(t.key)
                hit_groups[t.outcome.value].add(groups[t.key])
                break
    return {
        "learn_runs_success": len(hit["success"]),
        "learn_runs_failure": len(hit["failure"]),
        "learn_groups_success": len(hit_groups["success"]),
        "learn_groups_failure": len(hit_groups["failure"]),
    }


def _evidence(card: Any, engine: Any) -> dict[str, Any]:
    from sqlmodel import Session, col, select

    from memory_core.models.card import CardEvidence
    from memory_core.models.trajectory import Trajectory

    with Session(engine) as s:
        rows = s.exec(
            select(CardEvidence.trajectory_id, CardEvidence.result, Trajectory.task_group)
            .join(Trajectory, col(Trajectory.id) == col(CardEvidence.trajectory_id))
            .where(col(CardEvidence.card_id) == card.card_id)
        ).all()
    roles: dict[str, set[str]] = defaultdict(set)
    groups: dict[str, set[str]] = defaultdict(set)
    for tid, result, group in rows:
        role = str((result or {}).get("role", "supports"))
        roles[role].add(str(tid))
        groups[role].add(str(group))
    return {
        **{f"runs_{k}": len(v) for k, v in sorted(roles.items())},
        **{f"groups_{k}": len(v) for k, v in sorted(groups.items())},
    }


def run(path: Path, folds: int, work: Path) -> dict[str, Any]:
    from memory_core.ingest.store import iter_sources
    from memory_core.models.columns import utcnow
    from memory_core.replay import parse_all, ranked_cards, served_cards
    from memory_core.task_state import states_before_calls

    records = [(n, r) for n, r in iter_sources([str(path)]) if isinstance(r, dict)]
    groups = sorted({_group(r, n) for n, r in records})
    out: dict[str, Any] = {"folds": []}
    all_rows: list[dict[str, Any]] = []
    for f in range(folds):
        held = set(groups[f::folds])
        learn = [(n, r) for n, r in records if _group(r, n) not in held]
        test = [(n, r) for n, r in records if _group(r, n) in held]
        engine = _engine(learn, work / f"fold{f}")
        learned, _ = parse_all(learn, namespace="bench", task_type="default")
        tested, _ = parse_all(test, namespace="bench", task_type="default")
        group_of = {
            t.key: _group(r, t.key)
            for (_, r), t in zip(learn + test, learned + tested, strict=True)
        }
        snapshot, cards = served_cards(engine=engine, namespace="bench")
        now = utcnow()
        cautions = {
            cid: c for cid, c in cards.items() if c.provenance.get("pattern") == "contrast_caution"
        }
        info = {
            str(cid): {
                "preconditions": c.preconditions,
                "confidence": c.confidence,
                **_evidence(c, engine),
                **_reach(c, learned, group_of),
                "fired_right": 0,
                "fired_wrong": 0,
            }
            for cid, c in cautions.items()
        }
        by_key = {t.key: r for (_, r), t in zip(test, tested, strict=True)}
        others: dict[str, dict[str, Any]] = {}
        for t in tested:
            expected = expected_actions(by_key[t.key])
            calls = [s for s in t.steps if s.type == "tool_call" and s.tool]
            states = states_before_calls(calls, task_type=t.task_type, agent_id=t.agent_id)
            for call, state in zip(calls, states, strict=True):
                if not is_write(call.tool or "") or expected is None:
                    continue
                served = ranked_cards(
                    snapshot=snapshot, cards=cards, state=state, top_k=TOP, now=now,
                    pre_call_only=True,
                )  # fmt: skip
                wrong = canon(call.tool or "", call.args) not in expected
                fired = [c for c, _ in served if c.card_id in cautions]
                for c in fired:
                    info[str(c.card_id)]["fired_wrong" if wrong else "fired_right"] += 1
                for c, _ in served:  # every pre-call card served: what "hindsight" scores
                    other = others.setdefault(
                        str(c.card_id),
                        {
                            "pattern": c.provenance.get("pattern"),
                            "preconditions": c.preconditions,
                            "confidence": c.confidence,
                            "fired_right": 0,
                            "fired_wrong": 0,
                        },
                    )
                    other["fired_wrong" if wrong else "fired_right"] += 1
                all_rows.append(
                    {
                        "fold": f,
                        "tool": call.tool,
                        "wrong": wrong,
                        "run_failed": t.outcome.value == "failure",
                        "served": [str(c.card_id) for c, _ in served],
                        "cautions": [str(c.card_id) for c in fired],
                        "score": max((c.confidence for c in fired), default=0.0),
                        "hindsight": max((c.confidence for c, _ in served), default=0.0),
                    }
                )
        out["folds"].append({"fold": f, "cautions": info, "served": others})
    out["rows"] = all_rows
    out["auroc"] = auroc([(r["score"], r["wrong"]) for r in all_rows])
    out["auroc_hindsight"] = auroc([(r["hindsight"], r["wrong"]) for r in all_rows])
    return out


def compare(before: dict[str, Any], after: dict[str, Any]) -> dict[str, Any]:
    """AUROC after minus before on the same writes, with a paired bootstrap interval."""
    a, b = before["rows"], after["rows"]
    same = [(r["fold"], r["tool"], r["wrong"]) for r in a] == [
        (r["fold"], r["tool"], r["wrong"]) for r in b
    ]
    if not same:
        raise SystemExit("the two diagnoses are not of the same writes")
    pairs = list(zip(a, b, strict=True))
    out: dict[str, Any] = {}
    for name, key in (("hindsight cautions", "score"), ("hindsight", "hindsight")):

        def delta(ps: Any, key: str = key) -> float:
            now = auroc([(y[key], y["wrong"]) for _, y in ps]) or 0.5
            return now - (auroc([(x[key], x["wrong"]) for x, _ in ps]) or 0.5)

        out[name] = {"auroc_delta": round(delta(pairs), 4), "ci": bootstrap(pairs, delta)}
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("path", type=Path)
    ap.add_argument("--folds", type=int, default=5)
    ap.add_argument("--work", type=Path, default=Path("/tmp/lessons-diag"))
    ap.add_argument("--out", type=Path, default=REPO / "bench/results/lessons_diagnosis.json")
    ap.add_argument("--before", type=Path, default=None)
    args = ap.parse_args()
    result = run(args.path, args.folds, args.work)
    if args.before:
        result["against_before"] = compare(json.loads(args.before.read_text()), result)
        print(result["against_before"])
    args.out.write_text(json.dumps(result, indent=1) + "\n")
    print("auroc cautions", result["auroc"], "hindsight", result["auroc_hindsight"])


if __name__ == "__main__":
    main()
