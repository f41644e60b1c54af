"""A card's effect: the success rate of runs it was served to minus that of runs it was withheld
from, with an interval, and a verdict.

The interval is Newcombe's hybrid score interval for a difference of two proportions (method
10 of Newcombe 1998), built from the two arms' Wilson score intervals. Why this one and not a
Beta-binomial posterior:

* it is closed-form, so the decay stage computes it in one SQL expression over every card
  (memory_core.effects.sql), set-based, as the rest of decay is; a posterior of a difference
  needs sampling or numerical integration per card;
* its coverage stays near the nominal level with few uses in the withheld arm (a 5% holdout
  gives a card 10 withheld uses in 200) and rates near 0 or 1, where the Wald interval
  collapses; it needs no prior, so a verdict never leans on a choice nobody measured.

The verdict reads the interval at `z` (default 2.576, 99% two-sided: many cards are judged at
once, and a card wrongly judged harmful leaves the served set):
helps (lower bound > 0), harms (with `fdr` > 0, the default: the namespace's Benjamini-Hochberg
test, memory_core.effects.fdr; with 0, upper bound < 0), no effect (the interval lies within
+-margin: enough evidence that the card changes nothing worth serving it for), and unclear
(too few outcomes in an arm, or the interval still spans both; shown as "no measurable
effect yet").
"""

from __future__ import annotations

from enum import StrEnum
from math import sqrt

from pydantic import BaseModel

from memory_core.settings import EffectRules


class Verdict(StrEnum):
    """What the evidence says about a card."""

    helps = "helps"
    harms = "harms"
    no_effect = "no_effect"
    unclear = "unclear"


LABELS = {
    Verdict.helps: "helps",
    Verdict.harms: "harms",
    Verdict.no_effect: "no effect",
    Verdict.unclear: "no measurable effect yet",
}


class HarmsTest(BaseModel):
    """One card's harms test within its namespace."""

    p: float  # one-sided p-value of served < withheld (Newcombe, inverted)
    q: float  # Benjamini-Hochberg adjusted p-value over the namespace's tested cards
    tested: int  # the namespace's cards with enough outcomes in both arms
    fdr: float  # the false discovery rate the verdict is held to
    harms: bool  # q <= fdr


class Effect(BaseModel):
    """Outcomes per arm, the difference in success rate (served - withheld), its interval."""

    served_uses: int
    served_successes: int
    withheld_uses: int
    withheld_successes: int
    served_rate: float | None
    withheld_rate: float | None
    difference: float | None
    low: float | None
    high: float | None
    level: float
    verdict: Verdict
    label: str
    harms_test: HarmsTest | None = None  # within the namespace (memory_core.effects.fdr)


def wilson(*, successes: int, n: int, z: float) -> tuple[float, float]:
    """Wilson score interval of a proportion (0, 1 when n is 0)."""
    if n <= 0:
        return 0.0, 1.0
    p = successes / n
    z2 = z * z
    denom = 1 + z2 / n
    centre = (p + z2 / (2 * n)) / denom
    half = z / denom * sqrt(p * (1 - p) / n + z2 / (4 * n * n))
    return max(0.0, centre - half), min(1.0, centre + half)


def newcombe(*, k1: int, n1: int, k2: int, n2: int, z: float) -> tuple[float, float, float]:
    """p1 - p2 and Newcombe's hybrid score interval for it (arms with n > 0)."""
    p1, p2 = k1 / n1, k2 / n2
    l1, u1 = wilson(successes=k1, n=n1, z=z)
    l2, u2 = wilson(successes=k2, n=n2, z=z)
    d = p1 - p2
    low = d - sqrt((p1 - l1) ** 2 + (u2 - p2) ** 2)
    high = d + sqrt((u1 - p1) ** 2 + (p2 - l2) ** 2)
    return d, low, high


def level_of(z: float) -> float:
    """The two-sided confidence level of z."""
    from math import erf

    return erf(z / sqrt(2))


def estimate(
    *,
    served_uses: int,
    served_successes: int,
    withheld_uses: int,
    withheld_successes: int,
    rules: EffectRules | None = None,
    harms: HarmsTest | None = None,
) -> Effect:
    """The effect of one card from its outcome counts per arm; with `rules.fdr` its harms
    verdict is its namespace's test (memory_core.effects.fdr.harms_tests; none: not harms)."""
    r = rules or EffectRules()
    rate1 = served_successes / served_uses if served_uses else None
    rate2 = withheld_successes / withheld_uses if withheld_uses else None
    d = low = high = None
    verdict = Verdict.unclear
    if served_uses and withheld_uses:
        d, low, high = newcombe(
            k1=served_successes, n1=served_uses, k2=withheld_successes, n2=withheld_uses, z=r.z
        )
        if served_uses >= r.min_served and withheld_uses >= r.min_withheld:
            harmful = (harms is not None and harms.harms) if r.fdr > 0 else high < 0
            verdict = judge(low=low, high=high, margin=r.margin, harms=harmful)
    return Effect(
        served_uses=served_uses,
        served_successes=served_successes,
        withheld_uses=withheld_uses,
        withheld_successes=withheld_successes,
        served_rate=rate1,
        withheld_rate=rate2,
        difference=d,
        low=low,
        high=high,
        level=round(level_of(r.z), 4),
        verdict=verdict,
        label=LABELS[verdict],
        harms_test=harms if r.fdr > 0 else None,
    )


def judge(*, low: float, high: float, margin: float, harms: bool) -> Verdict:
    """The verdict of an interval and the harms test (enough outcomes already checked)."""
    if harms:
        return Verdict.harms
    if low > 0:
        return Verdict.helps
    if -margin < low and high < margin:
        return Verdict.no_effect
    return Verdict.unclear
