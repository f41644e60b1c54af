"""A card's confidence as a calibrated estimate from the runs behind it, not a running product.

Every evidence triple names one run (trajectory) and, in its `result`, how that run bears on
the lesson: `role` is "supports" (the default), "contradicts", or "contrast" (a run shown
beside the others for comparison, e.g. a successful run of the same task: it explains the
card and counts neither way); `outcome` is how the run
ended; `confirms` says whether the run confirms the lesson (for a recovery: the run that
recovered went on to succeed). Without `confirms`, a supporting run confirms when it
succeeded. Runs are counted once, however many triples they gave; a result that names its
run's task `group` makes the runs of one task count once together (the trials of one task are
not independent evidence: a task tried four times that fails four times is one lesson seen,
not four).

The estimate is the posterior mean of Beta(1 + supporting units, 1 + contradicting units),
a unit being a task group, or a run that names none. A lesson no run confirms (a recovery
seen only in runs that failed anyway), or whose evidence does not favour it (no more
supporting units than contradicting ones: the mean is at or below the prior's), is capped
below the review threshold: it is kept and flagged, never served above a confirmed lesson.
Merging two cards unions their runs; confidences are never combined directly.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

PRIOR_SUPPORT = 1.0
PRIOR_AGAINST = 1.0
UNCONFIRMED_CAP = 0.45  # below the default review threshold (0.5): such a card waits for review
CONTRADICTS = "contradicts"
CONTRAST = "contrast"


@dataclass(frozen=True)
class RunEvidence:
    """How one run bears on a lesson."""

    supports: bool
    confirms: bool
    outcome: str
    group: str | None = None  # the run's task group, when its evidence names one


def run_of(result: Mapping[str, Any]) -> RunEvidence | None:
    """Read one evidence triple's result into the run's bearing on the lesson (None: none)."""
    if result.get("role") == CONTRAST:
        return None
    outcome = str(result.get("outcome", "unknown"))
    supports = result.get("role", "supports") != CONTRADICTS
    confirms = result.get("confirms")
    if not isinstance(confirms, bool):
        confirms = outcome == "success"
    group = result.get("group")
    return RunEvidence(
        supports=supports,
        confirms=supports and confirms,
        outcome=outcome,
        group=str(group) if group not in (None, "") else None,
    )


def runs_of(triples: Iterable[tuple[uuid.UUID, Mapping[str, Any]]]) -> dict[uuid.UUID, RunEvidence]:
    """One bearing per run: a run read as both supporting and contradicting contradicts."""
    runs: dict[uuid.UUID, RunEvidence] = {}
    for tid, result in triples:
        run = run_of(result)
        if run is not None:
            runs[tid] = runs_of_pair(runs.get(tid), run)
    return runs


@dataclass(frozen=True)
class Estimate:
    """Counts behind a confidence, and the confidence itself."""

    supporting: int  # units (task groups, or runs that name none)
    contradicting: int
    confirmed: bool
    successful_runs: int
    confidence: float


def estimate(runs: Mapping[uuid.UUID, RunEvidence]) -> Estimate:
    """Beta posterior mean over supporting and contradicting units, capped when unconfirmed
    or not favoured."""
    units: dict[tuple[str, str], RunEvidence] = {}
    for tid, r in runs.items():
        key = ("group", r.group) if r.group else ("run", str(tid))
        units[key] = runs_of_pair(units.get(key), r)
    s = sum(u.supports for u in units.values())
    c = len(units) - s
    mean = (PRIOR_SUPPORT + s) / (PRIOR_SUPPORT + PRIOR_AGAINST + s + c)
    confirmed = any(r.confirms for r in runs.values())
    value = mean if confirmed and s > c else min(mean, UNCONFIRMED_CAP)
    return Estimate(
        supporting=s,
        contradicting=c,
        confirmed=confirmed,
        successful_runs=sum(r.outcome == "success" for r in runs.values()),
        confidence=round(value, 6),
    )


def favoured(triples: Iterable[tuple[uuid.UUID, Mapping[str, Any]]]) -> bool:
    """More supporting units than contradicting ones in this evidence."""
    e = estimate(runs_of(triples))
    return e.supporting > e.contradicting


def confidence_of(triples: Iterable[tuple[uuid.UUID, Mapping[str, Any]]]) -> float:
    """The confidence a set of evidence triples supports."""
    return estimate(runs_of(triples)).confidence


def merged_confidence(
    members: Iterable[tuple[float, Mapping[uuid.UUID, RunEvidence]]],
) -> float:
    """A merge's confidence: the estimate over the union of the members' runs.

    The first member is the survivor; its offset from its own evidence estimate (outcome
    feedback, decay) carries over, so a merge never undoes what feedback taught.
    """
    items = list(members)
    if not items:
        raise ValueError("a merge needs at least one member")
    union: dict[uuid.UUID, RunEvidence] = {}
    for _, runs in items:
        for tid, r in runs.items():
            union[tid] = runs_of_pair(union.get(tid), r)
    survivor_conf, survivor_runs = items[0]
    offset = survivor_conf - estimate(survivor_runs).confidence if survivor_runs else 0.0
    if not union:  # nothing recorded: never inflate, keep the best stated confidence
        return round(max(c for c, _ in items), 6)
    return round(min(max(estimate(union).confidence + offset, 0.0), 1.0), 6)


def runs_of_pair(old: RunEvidence | None, new: RunEvidence) -> RunEvidence:
    """Two readings of one run combined (the cautious one wins)."""
    if old is None:
        return new
    supports = old.supports and new.supports
    return RunEvidence(
        supports=supports,
        confirms=supports and (old.confirms or new.confirms),
        outcome=old.outcome,
        group=old.group or new.group,
    )


def supporting_runs(triples: Iterable[tuple[uuid.UUID, Mapping[str, Any]]]) -> int:
    """The distinct runs that support the lesson (a card's run_count, what ranking's support
    counts): a run repeating a failure counts once; contrast and contradicting runs not at all."""
    return sum(r.supports for r in runs_of(triples).values())
