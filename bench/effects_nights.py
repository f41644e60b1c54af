"""The service half of bench/effects.py: simulated nights through the real query path, the real
holdout, outcomes reported per query, and the real decay stage; and the holdout's latency."""

from __future__ import annotations

import contextlib
import statistics
import sys
import time
from datetime import timedelta
from pathlib import Path
from typing import Any
from unittest import mock

import numpy as np

HARMFUL_BELOW = -0.05


def _service(data_dir: Path, rate: float, seed: str) -> Any:
    from memory_core import db
    from memory_core.serve.service import MemoryService
    from memory_core.settings import Settings

    # no reviewer in the simulation: the 3-failures-in-a-row rule would send nearly every
    # card to review within two nights under both policies (base success rates 0.3 / 0.7)
    s = Settings(
        data_dir=data_dir,
        embedding={"provider": "none"},
        holdout={"rate": rate, "seed": seed},
        failures_to_review=10**6,
    )
    return MemoryService(engine=db.make_engine(s), settings=s), s


def _principal(svc: Any, ns: str) -> Any:
    from memory_core.serve.keys import create_key

    return svc.authenticate(create_key(engine=svc.engine, namespace=ns, scopes=["read"])[1])


def nights(
    *,
    data_dir: Path,
    states: list[dict[str, Any]],
    base: list[float],
    delta: dict[Any, float],
    aware: bool,
    rate: float,
    runs_per_night: int,
    n_nights: int,
    seed: int,
    ns: str,
    fdr: float,
) -> dict[str, Any]:
    """Nights of queries and outcomes, each ended by the decay stage."""
    from sqlalchemy import select
    from sqlmodel import Session

    from memory_core.decay import DecayParams, run_decay
    from memory_core.errors import NotFound
    from memory_core.models.card import Card, CardUse
    from memory_core.models.columns import utcnow
    from memory_core.serve.schemas import OutcomeRequest, QueryRequest
    from memory_core.settings import EffectRules

    svc, settings = _service(data_dir, rate if aware else 0.0, f"bench{seed}")
    who = _principal(svc, ns)
    rng = np.random.default_rng(seed + 1)
    start = utcnow()
    clock = [start]
    per_night: list[dict[str, Any]] = []
    last_runs: list[tuple[float, int]] = []
    params = settings.decay.model_dump()
    params["effects"] = EffectRules(aware=aware, fdr=fdr)
    with (
        mock.patch("memory_core.serve.service.utcnow", lambda: clock[0]),
        mock.patch("memory_core.decay.feedback.utcnow", lambda: clock[0]),
    ):
        for night in range(n_nights):
            night_start = start + timedelta(days=night)
            served_eff: list[tuple[float, int]] = []
            wins = 0
            for i in range(runs_per_night):
                clock[0] = night_start + timedelta(seconds=40 * i)
                k = int(rng.integers(len(states)))
                res = svc.query(
                    principal=who,
                    request=QueryRequest(task_state=states[k], run_id=f"n{night}-{i}"),
                )
                effs = [delta.get(h.card.card_id, 0.0) for h in res.cards]
                served_eff.append((sum(effs), len(effs)))
                won = rng.random() < min(0.98, max(0.02, base[k] + sum(effs)))
                wins += won
                # NotFound: nothing matched any more (all went to review)
                with contextlib.suppress(NotFound):
                    svc.report_outcome(
                        principal=who,
                        query_id=res.query_id,
                        request=OutcomeRequest(outcome="success" if won else "failure"),
                    )
            svc.uses.flush()
            with Session(svc.engine) as s:
                held = s.execute(
                    select(CardUse.card_id).where(
                        CardUse.arm == "withheld", CardUse.used_at >= night_start
                    )
                ).scalars()
                held_eff = [delta.get(c, 0.0) for c in held]
            clock[0] = night_start + timedelta(hours=23)
            report = run_decay(
                engine=svc.engine,
                params=DecayParams(**params, now=clock[0]),
                weights=settings.ranking,
            )
            svc.snapshots.invalidate()
            total = sum(n for _, n in served_eff)
            print(
                f"  {'aware' if aware else 'plain'} night {night + 1}: "
                f"{sum(e for e, _ in served_eff) / max(1, total):+.4f} per served card, "
                f"decay {report.counts}",
                file=sys.stderr,
                flush=True,
            )
            per_night.append(
                {
                    "night": night + 1,
                    "mean_true_effect_served": round(
                        sum(e for e, _ in served_eff) / max(1, total), 5
                    ),
                    "cards_served_per_run": round(total / runs_per_night, 3),
                    "success_rate": round(wins / runs_per_night, 4),
                    "withheld_per_run": round(len(held_eff) / runs_per_night, 4),
                    "helpful_effect_withheld_per_run": round(
                        sum(e for e in held_eff if e > 0) / runs_per_night, 5
                    ),
                    "effect_withheld_per_run": round(sum(held_eff) / runs_per_night, 5),
                    "decay": report.counts,
                }
            )
            last_runs = served_eff
    with Session(svc.engine) as s:
        status = {c.card_id: c.status for c in s.execute(select(Card)).scalars()}
    harmful = [c for c, d in delta.items() if d <= HARMFUL_BELOW]
    to_review = [c for c in delta if status.get(c) == "review"]
    svc.engine.dispose()
    return {
        "holdout_rate": rate if aware else 0.0,
        "runs_per_night": runs_per_night,
        "final_night_mean_true_effect_served": _ratio_ci(last_runs, rng),
        "harmful_cards": len(harmful),
        "harmful_in_review": sum(status.get(c) == "review" for c in harmful),
        "cards_in_review": len(to_review),
        "not_harmful_in_review": sum(delta[c] > HARMFUL_BELOW for c in to_review),
        "mean_success_last_5_nights": round(
            statistics.mean(n["success_rate"] for n in per_night[-5:]), 4
        ),
        "per_night": per_night,
    }


def _ratio_ci(runs: list[tuple[float, int]], rng: np.random.Generator) -> dict[str, float]:
    """Mean effect per served card over the runs, with a 95% bootstrap interval (over runs)."""
    eff = np.array([e for e, _ in runs])
    cnt = np.array([n for _, n in runs])
    idx = rng.integers(len(runs), size=(2000, len(runs)))
    boot = eff[idx].sum(axis=1) / np.maximum(1, cnt[idx].sum(axis=1))
    return {
        "mean": round(float(eff.sum() / max(1, cnt.sum())), 5),
        "low": round(float(np.percentile(boot, 2.5)), 5),
        "high": round(float(np.percentile(boot, 97.5)), 5),
    }


def latency(data_dir: Path, states: list[dict[str, Any]], *, ns: str) -> dict[str, Any]:
    """In-process query time with the holdout at 0 and 0.05 (interleaved blocks, medians)."""
    from memory_core.serve.schemas import QueryRequest

    out: dict[str, list[float]] = {"0.0": [], "0.05": []}
    services = {r: _service(data_dir, float(r), "lat")[0] for r in out}
    who = {r: _principal(s, ns) for r, s in services.items()}
    for svc in services.values():  # warm: the snapshot and the served rows
        for st in states[:50]:
            svc.query(principal=who_of(who, svc, services), request=QueryRequest(task_state=st))
        svc.uses.flush()
    for block in range(10):
        for r, svc in services.items():
            w = who[r]
            for i, st in enumerate(states):
                req = QueryRequest(task_state=st, run_id=f"b{block}-{i}")
                t0 = time.perf_counter()
                svc.query(principal=w, request=req)
                out[r].append(time.perf_counter() - t0)
            svc.uses.flush()  # the background writer's work, outside the query
    res: dict[str, Any] = {}
    for r, xs in out.items():
        res[f"rate_{r}"] = {
            "queries": len(xs),
            "median_us": round(statistics.median(xs) * 1e6, 1),
            "mean_us": round(statistics.mean(xs) * 1e6, 1),
            "p99_us": round(float(np.percentile(xs, 99)) * 1e6, 1),
        }
    a, b = res["rate_0.0"], res["rate_0.05"]
    res["extra_median"] = round(b["median_us"] / a["median_us"] - 1, 4)
    res["extra_mean"] = round(b["mean_us"] / a["mean_us"] - 1, 4)
    for svc in services.values():
        svc.engine.dispose()
    return res


def who_of(who: dict[str, Any], svc: Any, services: dict[str, Any]) -> Any:
    """The principal of a service."""
    return next(who[r] for r, s in services.items() if s is svc)
