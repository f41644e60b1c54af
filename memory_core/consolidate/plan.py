"""Plan a consolidation: which active cards are the same lesson, and what each merge makes.

Candidates are blocked by the tools a card acts with and the state variables its preconditions
read, so only cards that could be the same lesson are ever compared: same preconditions and
errors warned of (normalised) always merge; otherwise cosine similarity of stored vectors (or,
without an embedder, word overlap) above a threshold.
"""

from __future__ import annotations

import re
import uuid
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from memory_core.cards.confidence import RunEvidence, merged_confidence
from memory_core.consolidate.errors_alike import errors_of, same_errors, union_failure_modes
from memory_core.consolidate.rows import CardRow, PairJudge
from memory_core.errors import HindsightError, InvalidPrecondition
from memory_core.preconditions import compile_stored, normalise_expression

if TYPE_CHECKING:  # imported where vectors are compared: the API's card pages never do
    import numpy as np

_WORD = re.compile(r"[a-z0-9_]+")


def stable_key(row: CardRow) -> tuple[Any, ...]:
    """Who survives a merge (the smallest key): seen in the most runs, then the most evidence
    rows, then the most used, then the content's hash. Runs first: one run repeating a failure
    gives a row per repeat. Not created_at nor card_id: within a night they record the order in
    which workers happened to finish (and ids are random), so two runs on the same data chose
    different survivors (9 of 136 cards differed); use_count and evidence are the data's."""
    return (
        -row.run_count,
        -row.evidence_count,
        -row.use_count,
        row.signature,
        str(row.card_id),
    )


@dataclass
class Merge:
    """One cluster: the survivor absorbs the others."""

    survivor: CardRow
    absorbed: list[CardRow]
    failure_modes: list[dict[str, Any]]
    confidence: float
    why: str


@dataclass
class Supersede:
    """A newer card that contradicts an older one replaces it."""

    older: CardRow
    newer: CardRow
    reason: str


@dataclass
class MergePlan:
    """Every merge and supersession of one run, checked before it is applied."""

    merges: list[Merge] = field(default_factory=list)
    supersedes: list[Supersede] = field(default_factory=list)
    cards_seen: int = 0
    judged: int = 0  # pairs the judge was asked about
    unjudged: int = 0  # ... that got no usable answer (nothing changed for them)

    @property
    def absorbed(self) -> int:
        """Cards this plan retires."""
        return sum(len(m.absorbed) for m in self.merges)


def _variables(expression: str) -> frozenset[str]:
    try:
        return compile_stored(normalise_expression(expression)).variables
    except InvalidPrecondition:
        return frozenset({expression})


def block_of(row: CardRow) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The tools a card acts with and the state variables its preconditions read: only cards
    alike in both can be the same lesson (a pre-call warning and a recovery after the same
    error read different variables, and stay two cards)."""
    tools = tuple(sorted({str(a.get("tool", "")).lower() for a in row.action_sequence}))
    variables: set[str] = set()
    for p in row.preconditions:
        variables |= _variables(p)
    return tools, tuple(sorted(variables))


def structure(row: CardRow) -> tuple[Any, ...]:
    """Block, normalised preconditions and errors warned of: equal structure, the same lesson."""
    # two warnings before the same call of different errors are two lessons: merged, the card
    # would name one error, warn of both and add up the evidence of each
    return (
        block_of(row),
        tuple(sorted({normalise_expression(p) for p in row.preconditions})),
        tuple(sorted(errors_of(row))),
    )


def _words(row: CardRow) -> set[str]:
    text = " ".join([row.scenario, *row.preconditions]).lower()
    return set(_WORD.findall(text))


class _UnionFind:
    def __init__(self) -> None:
        self.parent: dict[uuid.UUID, uuid.UUID] = {}

    def find(self, x: uuid.UUID) -> uuid.UUID:
        self.parent.setdefault(x, x)
        while self.parent[x] != x:
            self.parent[x] = self.parent[self.parent[x]]
            x = self.parent[x]
        return x

    def union(self, a: uuid.UUID, b: uuid.UUID) -> None:
        self.parent[self.find(a)] = self.find(b)


def _similar_pairs(
    block: Sequence[CardRow],
    vectors: dict[uuid.UUID, np.ndarray] | None,
    *,
    floor: float,
    floor_words: float,
) -> Iterable[tuple[CardRow, CardRow, float, str]]:
    """Pairs of the block at least `floor` alike (cosine; without vectors, word overlap)."""
    if vectors is not None and all(r.card_id in vectors for r in block):
        import numpy as np

        m = np.stack([vectors[r.card_id] for r in block])
        for start in range(0, len(block), 512):  # bounded memory on big blocks
            sims = m[start : start + 512] @ m.T
            for i, j in zip(*np.nonzero(sims >= floor), strict=True):
                a, b = start + int(i), int(j)
                if a < b:
                    yield block[a], block[b], float(sims[i, j]), "cosine"
        return
    words = [_words(r) for r in block]
    for a in range(len(block)):
        for b in range(a + 1, len(block)):
            union = len(words[a] | words[b])
            overlap = len(words[a] & words[b]) / union if union else 0.0
            if overlap >= floor_words:
                yield block[a], block[b], overlap, "word overlap"


def plan_merges(
    rows: Sequence[CardRow],
    *,
    vectors: dict[uuid.UUID, np.ndarray] | None,
    cosine: float,
    jaccard: float,
    judge: PairJudge | None = None,
    judge_floor: float = 0.75,
    judge_floor_words: float = 0.5,
    max_judged: int = 200,
    runs: Mapping[uuid.UUID, Mapping[uuid.UUID, RunEvidence]] | None = None,
) -> MergePlan:
    """Cluster near-duplicates; the card with the most evidence survives (see stable_key).
    With a judge, pairs alike but below the thresholds are asked about: "same" merges,
    "contradicts" retires the older card; anything else (or no answer) changes nothing.
    The plan depends on the cards' content only, not on the order they come in."""
    uf, why = _UnionFind(), defaultdict(list)
    rows = sorted(rows, key=stable_key)
    blocks: dict[Any, list[CardRow]] = defaultdict(list)
    by_structure: dict[Any, uuid.UUID] = {}
    for row in rows:
        blocks[block_of(row)].append(row)
        key = structure(row)
        if key in by_structure:
            uf.union(row.card_id, by_structure[key])
            why[row.card_id].append("same preconditions and tools")
        else:
            by_structure[key] = row.card_id
    ambiguous: list[tuple[float, CardRow, CardRow]] = []
    for block in blocks.values():
        if len(block) < 2:
            continue
        floor = judge_floor if judge else cosine
        floor_words = judge_floor_words if judge else jaccard
        for a, b, score, how in _similar_pairs(
            block, vectors, floor=min(floor, cosine), floor_words=min(floor_words, jaccard)
        ):
            if not same_errors(a, b):  # alike texts, different errors: two lessons
                continue
            if score >= (cosine if how == "cosine" else jaccard):
                uf.union(a.card_id, b.card_id)
                why[a.card_id].append(f"{how} {score:.2f}")
            elif uf.find(a.card_id) != uf.find(b.card_id):
                ambiguous.append((score, a, b))
    plan = MergePlan(cards_seen=len(rows))
    if judge is not None:
        ambiguous.sort(key=lambda x: (-x[0], stable_key(x[1]), stable_key(x[2])))
        _ask_judge(judge, ambiguous[:max_judged], uf, why, plan)
    clusters: dict[uuid.UUID, list[CardRow]] = defaultdict(list)
    for row in rows:
        clusters[uf.find(row.card_id)].append(row)
    for members in clusters.values():
        if len(members) < 2:
            continue
        members.sort(key=stable_key)
        survivor, absorbed = members[0], members[1:]
        reasons = sorted({w for r in members for w in why.get(r.card_id, [])})
        plan.merges.append(
            Merge(
                survivor=survivor,
                absorbed=absorbed,
                failure_modes=union_failure_modes(r.failure_modes for r in members),
                confidence=merged_confidence(
                    (r.confidence, (runs or {}).get(r.card_id, {})) for r in members
                ),
                why="; ".join(reasons[:3]) or "near-duplicates",
            )
        )
    merged = {r.card_id for m in plan.merges for r in (m.survivor, *m.absorbed)}
    plan.supersedes = [
        s
        for s in plan.supersedes
        if s.older.card_id not in merged and s.newer.card_id not in merged
    ]
    return plan


def _ask_judge(
    judge: PairJudge,
    pairs: Sequence[tuple[float, CardRow, CardRow]],
    uf: _UnionFind,
    why: dict[uuid.UUID, list[str]],
    plan: MergePlan,
) -> None:
    retired: set[uuid.UUID] = set()
    for score, a, b in pairs:
        older, newer = sorted((a, b), key=lambda r: (r.created_at, r.signature, str(r.card_id)))
        if {older.card_id, newer.card_id} & retired:
            continue
        verdict = judge(older, newer)
        plan.judged += 1
        if verdict is None:
            plan.unjudged += 1
        elif verdict.relation == "same":
            uf.union(older.card_id, newer.card_id)
            why[older.card_id].append(f"judged the same ({score:.2f}): {verdict.reason}")
        elif verdict.relation == "contradicts":
            plan.supersedes.append(Supersede(older, newer, verdict.reason))
            retired.update({older.card_id, newer.card_id})


class PlanInvalid(HindsightError):
    """A consolidation plan broke an invariant; nothing was applied."""


def check_plan(plan: MergePlan, rows: Sequence[CardRow]) -> None:
    """Every card in at most one merge, survivors never absorbed, confidences in 0..1."""
    ids = {r.card_id for r in rows}
    seen: set[uuid.UUID] = set()
    for m in plan.merges:
        members = [m.survivor.card_id, *(a.card_id for a in m.absorbed)]
        if seen & set(members) or not set(members) <= ids or len(set(members)) != len(members):
            raise PlanInvalid(f"merge into {m.survivor.card_id} overlaps another or unknown cards")
        seen.update(members)
        if not 0.0 <= m.confidence <= 1.0 or not m.absorbed:
            raise PlanInvalid(f"merge into {m.survivor.card_id} is malformed")
    for s in plan.supersedes:
        pair = {s.older.card_id, s.newer.card_id}
        if pair & seen or not pair <= ids or len(pair) != 2:
            raise PlanInvalid(f"supersession of {s.older.card_id} overlaps another change")
        seen.update(pair)
