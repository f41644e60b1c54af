"""The statistical half of bench/effects.py: how well the estimate finds each card's hidden
effect, against the number of uses per card, on the tau-bench cards' real co-occurrence.

A use is a real tau-bench state at which the card matches; the other cards matching the same
state are served or withheld too, so their effects are the noise the estimate must see
through. Each replicate draws new hidden effects; the estimate is memory_core.effects'."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any

import numpy as np

from memory_core.effects.estimate import Verdict, estimate
from memory_core.effects.fdr import namespace_tests
from memory_core.settings import EffectRules

USES = [50, 100, 200, 500, 1000, 2000, 5000]
HARMFUL_BELOW, HELPFUL_ABOVE = -0.05, 0.05  # what "truly harms / helps" means here


def draw_effects(rng: np.random.Generator, n: int) -> np.ndarray:
    """Hidden effects: 70% near zero, 15% helpful (+0.05..+0.25), 15% harmful (-0.25..-0.05)."""
    kind = rng.random(n)
    null = np.clip(rng.normal(0.0, 0.01, n), -0.03, 0.03)
    helpful = rng.uniform(0.05, 0.25, n)
    harmful = rng.uniform(-0.25, -0.05, n)
    return np.where(kind < 0.70, null, np.where(kind < 0.85, helpful, harmful))


def success_p(base: np.ndarray, served_effect: np.ndarray) -> np.ndarray:
    """A run's success probability: its base rate plus the effects of the cards it was served."""
    return np.clip(base + served_effect, 0.02, 0.98)


def simulate(
    *,
    matches: list[list[int]],
    base: list[float],
    cards: int,
    rates: list[float],
    replicates: int,
    seed: int,
    rules: Sequence[EffectRules],
) -> list[dict[str, Any]]:
    """Per holdout rate and uses per card: estimator error, harms recall and precision; one
    result per rules, all judging the same simulated outcomes (a paired comparison)."""
    rng = np.random.default_rng(seed)
    width = max(len(m) for m in matches)
    table = np.full((len(matches), width), -1)
    for i, m in enumerate(matches):
        table[i, : len(m)] = m
    base_arr = np.asarray(base)
    states_of = [np.flatnonzero((table == c).any(axis=1)) for c in range(cards)]
    n_max = max(USES)
    out: list[dict[str, Any]] = [{} for _ in rules]
    for rate in rates:
        rows: dict[tuple[int, int], list[tuple[float, float | None, Verdict]]] = {
            (i, n): [] for i in range(len(rules)) for n in USES
        }
        for _ in range(replicates):
            delta = draw_effects(rng, cards)
            padded = np.append(delta, 0.0)  # index -1: no card
            counts: dict[int, list[tuple[int, tuple[int, int, int, int]]]] = {n: [] for n in USES}
            for c in range(cards):
                if len(states_of[c]) == 0:
                    continue
                s = rng.choice(states_of[c], n_max)
                held = rng.random((n_max, width)) < rate  # every matching card's own draw
                others = table[s]
                served_eff = np.where(held | (others == c), 0.0, padded[others]).sum(axis=1)
                own_held = held[others == c]  # one per use: this card's arm
                p = success_p(base_arr[s], served_eff + np.where(own_held, 0.0, delta[c]))
                won = rng.random(n_max) < p
                cum_s = np.cumsum(~own_held)
                cum_sk = np.cumsum(~own_held & won)
                cum_w = np.cumsum(own_held)
                cum_wk = np.cumsum(own_held & won)
                for n in USES:
                    k = (cum_sk[n - 1], cum_s[n - 1], cum_wk[n - 1], cum_w[n - 1])
                    counts[n].append((c, (int(k[0]), int(k[1]), int(k[2]), int(k[3]))))
            for (i, r), n in itertools.product(enumerate(rules), USES):
                tests = namespace_tests([k for _, k in counts[n]], rules=r)
                for (c, (k1, n1, k2, n2)), t in zip(counts[n], tests, strict=True):
                    e = estimate(
                        served_uses=n1,
                        served_successes=k1,
                        withheld_uses=n2,
                        withheld_successes=k2,
                        rules=r,
                        harms=t,
                    )
                    rows[i, n].append((float(delta[c]), e.difference, e.verdict))
        for i in range(len(rules)):
            out[i][str(rate)] = {str(n): _metrics(rows[i, n]) for n in USES}
    return out


def _metrics(rows: list[tuple[float, float | None, Verdict]]) -> dict[str, Any]:
    err = [abs(d - t) for t, d, _ in rows if d is not None]
    harmful = [v for t, _, v in rows if t <= HARMFUL_BELOW]
    said_harms = [t for t, _, v in rows if v is Verdict.harms]
    said_helps = [t for t, _, v in rows if v is Verdict.helps]
    return {
        "cards": len(rows),
        "mean_abs_error": round(float(np.mean(err)), 4) if err else None,
        "median_abs_error": round(float(np.median(err)), 4) if err else None,
        "harms_recall": round(sum(v is Verdict.harms for v in harmful) / len(harmful), 4)
        if harmful
        else None,
        "harms_verdicts": len(said_harms),
        "harms_precision": round(sum(t <= HARMFUL_BELOW for t in said_harms) / len(said_harms), 4)
        if said_harms
        else None,
        "harms_on_a_card_that_does_not_harm": sum(t >= 0 for t in said_harms),
        "helps_precision": round(sum(t >= HELPFUL_ABOVE for t in said_helps) / len(said_helps), 4)
        if said_helps
        else None,
        "no_effect_verdicts": sum(v is Verdict.no_effect for _, _, v in rows),
    }
