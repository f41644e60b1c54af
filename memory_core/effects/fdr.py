"""The harms test across a namespace: Benjamini-Hochberg over the per-card p-values.

Each card with enough outcomes in both arms is one test of "served does worse than withheld".
Judged one by one at a fixed level, a namespace of many near-zero cards collects false
"harms" verdicts in proportion to its size; the step-up procedure of Benjamini and Hochberg
(1995) keeps the expected share of false ones among the namespace's "harms" verdicts at or
below `fdr` (EffectRules.fdr; 0: each card is judged alone by its interval, as before).

The p-value is the Newcombe interval's own (memory_core.effects.estimate), inverted: the
one-sided tail 1 - Phi(z*) where z* is the z at which the interval's upper bound reaches zero.
So a card's verdict and its displayed interval come from one arithmetic, it stays exact for a
withheld arm of 20 outcomes where a Wald z-test is not, and no prior is involved (a posterior
tail would need one). BH and not Benjamini-Yekutieli: the tests share only the noise of the
cards served alongside (bench/effects_sim.py); BH holds under positive dependence, BY would
cost a factor ln(m) of power for a dependence we do not have.

Verdicts depend on the namespace, so the per-card tests are computed here, from the cards
table, and handed to `estimate` (Python) or as card ids to the SQL filters (decay, lists).
"""

from __future__ import annotations

import threading
import uuid
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from math import erfc, sqrt
from typing import TYPE_CHECKING, Any

from sqlalchemy import String, cast, select
from sqlalchemy.engine import Connection

from memory_core.effects.estimate import HarmsTest
from memory_core.models.card import Card
from memory_core.settings import EffectRules

if TYPE_CHECKING:  # imported where tested: an API worker that never tests holds no numpy
    import numpy as np

Z_MAX = 12.0  # p below 1 - Phi(12) ~ 2e-33 is reported as that bound (conservative)
MEMO_NAMESPACES = 64  # namespaces whose last tests are kept (least recently read dropped)

# (namespace, min_served, min_withheld, fdr) -> (the tested rows, their tests): every card
# page and list re-tests its namespace, and at 1,000 tested cards the arithmetic (10 ms) cost
# several times the indexed read; keyed by the rows read, so a hit is never stale
Memo = OrderedDict[tuple[Any, ...], tuple[frozenset[Any], dict[uuid.UUID, HarmsTest]]]
_memo: Memo = OrderedDict()
_memo_lock = threading.Lock()


def _upper(k1: np.ndarray, n1: np.ndarray, k2: np.ndarray, n2: np.ndarray, z: np.ndarray) -> Any:
    """Newcombe's upper bound of p1 - p2 at z (element-wise; estimate.newcombe's twin)."""
    import numpy as np

    p1, p2 = k1 / n1, k2 / n2
    z2 = z * z

    def wilson(p: np.ndarray, n: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        denom = 1 + z2 / n
        centre = (p + z2 / (2 * n)) / denom
        half = z / denom * np.sqrt(p * (1 - p) / n + z2 / (4 * n * n))
        return np.maximum(0.0, centre - half), np.minimum(1.0, centre + half)

    _, u1 = wilson(p1, n1)
    l2, _ = wilson(p2, n2)
    return p1 - p2 + np.sqrt((u1 - p1) ** 2 + (p2 - l2) ** 2)


def harms_p(
    k1: Sequence[int], n1: Sequence[int], k2: Sequence[int], n2: Sequence[int]
) -> list[float]:
    """One-sided p-values of "served does worse": 1 - Phi(z*) where the upper bound is 0."""
    import numpy as np

    a1, b1, a2, b2 = (np.asarray(x, dtype=float) for x in (k1, n1, k2, n2))
    if len(a1) == 0:
        return []
    lo, hi = np.zeros_like(a1), np.full_like(a1, Z_MAX)
    # the upper bound grows with z (both Wilson intervals widen): bisect for its zero
    for _ in range(60):
        mid = (lo + hi) / 2
        below = _upper(a1, b1, a2, b2, mid) < 0
        lo, hi = np.where(below, mid, lo), np.where(below, hi, mid)
    worse = (a1 / b1 < a2 / b2).tolist()
    return [0.5 * erfc(z / sqrt(2)) if w else 1.0 for z, w in zip(lo.tolist(), worse, strict=True)]


def bh_adjust(ps: Sequence[float]) -> list[float]:
    """Benjamini-Hochberg adjusted p-values (q-values), in the input's order."""
    m = len(ps)
    order = sorted(range(m), key=lambda i: ps[i])
    out = [1.0] * m
    running = 1.0
    for rank in range(m, 0, -1):  # q_(i) = min over j >= i of m p_(j) / j
        i = order[rank - 1]
        running = min(running, ps[i] * m / rank)
        out[i] = running
    return out


def namespace_tests(
    counts: Sequence[tuple[int, int, int, int]], *, rules: EffectRules
) -> list[HarmsTest | None]:
    """The harms test of each card of one namespace from its (served successes, served uses,
    withheld successes, withheld uses); None where an arm has too few outcomes."""
    idx = [
        i
        for i, (_, n1, _, n2) in enumerate(counts)
        if n1 >= rules.min_served and n2 >= rules.min_withheld
    ]
    out: list[HarmsTest | None] = [None] * len(counts)
    if rules.fdr <= 0 or not idx:
        return out
    k1, n1, k2, n2 = zip(*(counts[i] for i in idx), strict=True)
    ps = harms_p(k1, n1, k2, n2)
    for i, p, q in zip(idx, ps, bh_adjust(ps), strict=True):
        # built unvalidated: the numbers are ours, and validation was half the time at 6,000
        out[i] = HarmsTest.model_construct(
            p=p, q=q, tested=len(ps), fdr=rules.fdr, harms=q <= rules.fdr
        )
    return out


def harms_tests(
    conn: Connection, *, rules: EffectRules, namespaces: Iterable[str] | None = None
) -> dict[uuid.UUID, HarmsTest]:
    """The harms test of every card with enough outcomes, per namespace (all when None)."""
    if rules.fdr <= 0:
        return {}
    c = Card.__table__.c  # type: ignore[attr-defined]
    q = select(
        # the id as text: parsing 1,000 UUIDs cost 5 ms on SQLite, needed on a memo miss only
        cast(c.card_id, String).label("card_id"),
        c.namespace,
        c.served_outcomes,
        c.served_successes,
        c.withheld_outcomes,
        c.withheld_successes,
    ).where(c.served_outcomes >= rules.min_served, c.withheld_outcomes >= rules.min_withheld)
    if namespaces is not None:
        q = q.where(c.namespace.in_(sorted(set(namespaces))))
    by_ns: dict[str, list[tuple[Any, ...]]] = {}
    for r in conn.execute(q).all():
        by_ns.setdefault(r.namespace, []).append(tuple(r))
    out: dict[uuid.UUID, HarmsTest] = {}
    for ns, rows in by_ns.items():
        out.update(_tested(ns, rows, rules))
    return out


def _tested(
    ns: str, rows: Sequence[tuple[Any, ...]], rules: EffectRules
) -> dict[uuid.UUID, HarmsTest]:
    """One namespace's tests from its (id, namespace, served, served ok, withheld, withheld ok)
    rows; memoised on the rows themselves (the same rows, the same tests)."""
    rows_key = frozenset(rows)
    key = (ns, rules.min_served, rules.min_withheld, rules.fdr)
    with _memo_lock:
        hit = _memo.get(key)
        if hit is not None and hit[0] == rows_key:
            _memo.move_to_end(key)
            return hit[1]
    counts = [(ok, n, wok, wn) for _, _, n, ok, wn, wok in rows]
    tests = {
        uuid.UUID(r[0]): t
        for r, t in zip(rows, namespace_tests(counts, rules=rules), strict=True)
        if t is not None
    }
    with _memo_lock:
        _memo[key] = (rows_key, tests)
        _memo.move_to_end(key)
        while len(_memo) > MEMO_NAMESPACES:
            _memo.popitem(last=False)
    return tests


def harm_ids(tests: dict[uuid.UUID, HarmsTest]) -> list[uuid.UUID]:
    """The cards judged harmful, sorted (for SQL: `card_id IN (...)`)."""
    return sorted((cid for cid, t in tests.items() if t.harms), key=str)
