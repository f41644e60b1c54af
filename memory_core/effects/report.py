"""The effects report: every card with outcomes in an arm, its estimate, grouped by verdict."""

from __future__ import annotations

import uuid
from collections import Counter
from pathlib import Path

from pydantic import BaseModel
from sqlalchemy import or_
from sqlalchemy.engine import Engine
from sqlmodel import col, select

from memory_core.db import READ_ONLY, read_session
from memory_core.effects.estimate import Effect, Verdict, estimate
from memory_core.effects.fdr import harms_tests
from memory_core.models.card import Card
from memory_core.settings import EffectRules


class CardEffect(BaseModel):
    """One card's measured effect."""

    card_id: uuid.UUID
    namespace: str
    status: str
    scenario: str
    pinned: bool
    effect: Effect


class EffectsReport(BaseModel):
    """Cards by verdict, worst first within each."""

    namespace: str | None
    counts: dict[str, int]
    cards: list[CardEffect]


_ORDER = {Verdict.harms: 0, Verdict.helps: 1, Verdict.no_effect: 2, Verdict.unclear: 3}


def effects_report(
    *,
    engine: Engine,
    namespace: str | None = None,
    rules: EffectRules | None = None,
    limit: int | None = None,
) -> EffectsReport:
    """The estimate of every card with at least one outcome in either arm."""
    q = select(Card).where(or_(col(Card.served_outcomes) > 0, col(Card.withheld_outcomes) > 0))
    if namespace is not None:
        q = q.where(col(Card.namespace) == namespace)
    out: list[CardEffect] = []
    r = rules or EffectRules()
    with engine.connect().execution_options(**READ_ONLY) as conn:
        tests = harms_tests(conn, rules=r, namespaces=None if namespace is None else [namespace])
    with read_session(engine) as session:
        for c in session.execute(q).scalars():
            eff = estimate(
                served_uses=c.served_outcomes,
                served_successes=c.served_successes,
                withheld_uses=c.withheld_outcomes,
                withheld_successes=c.withheld_successes,
                rules=r,
                harms=tests.get(c.card_id),
            )
            out.append(
                CardEffect(
                    card_id=c.card_id,
                    namespace=c.namespace,
                    status=c.status,
                    scenario=c.scenario,
                    pinned=c.pinned,
                    effect=eff,
                )
            )
    out.sort(key=lambda e: (_ORDER[e.effect.verdict], e.effect.difference or 0.0, str(e.card_id)))
    counts = Counter(e.effect.verdict.value for e in out)
    return EffectsReport(
        namespace=namespace,
        counts={v.value: counts.get(v.value, 0) for v in Verdict},
        cards=out if limit is None else out[:limit],
    )


_COLOURS = {
    "helps": "tab:green",
    "harms": "tab:red",
    "no_effect": "tab:grey",
    "unclear": "tab:blue",
}


def plot_report(report: EffectsReport, path: Path, *, top: int = 40) -> Path:
    """Each card's difference and interval, by verdict (matplotlib, the dev extra)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = [c for c in report.cards if c.effect.difference is not None][:top]
    fig, ax = plt.subplots(figsize=(7, max(2.5, 0.22 * len(rows) + 1)))
    for i, c in enumerate(rows):
        e = c.effect
        assert e.difference is not None and e.low is not None and e.high is not None
        colour = _COLOURS[e.verdict.value]
        ax.plot([e.low, e.high], [i, i], color=colour, lw=2)
        ax.plot([e.difference], [i], "o", color=colour, ms=4)
    ax.axvline(0, color="black", lw=0.8)
    ax.set_yticks(range(len(rows)))
    ax.set_yticklabels([f"{str(c.card_id)[:8]} {c.scenario[:30]}" for c in rows], fontsize=6)
    ax.invert_yaxis()
    level = rows[0].effect.level if rows else 0.99
    ax.set_xlabel(f"success rate served - withheld ({level:.0%} interval)")
    ax.set_title(", ".join(f"{k}: {v}" for k, v in report.counts.items()), fontsize=8)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
