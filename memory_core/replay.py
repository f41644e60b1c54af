"""Replay: what the memory would have told an agent at each tool call of runs it already made.

For every tool call of every trajectory in a file, the task state known just before the call
(the same `states_before_calls` retrospection uses) is put to the namespace's served set
through the same retrieval the read API runs, and the call is classified:

* hit: the call failed and a served card warned about that error;
* miss: the call failed and no served card warned about it;
* noise: the call succeeded and cards were served for it;
* quiet: the call succeeded and nothing was served.

A card warns about an error when one of its failure modes (or an error-code literal in its
preconditions) carries the error's normalised signature or code. Nothing is written: the
trajectories are parsed, never stored, and the retrieval is the pure function (no use is
recorded, no snapshot cache is touched).
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import select
from sqlalchemy.engine import Engine
from sqlmodel import Session, col

from memory_core.errors import InvalidInput
from memory_core.ingest.limits import DEFAULT_LIMITS, InputLimits
from memory_core.ingest.store import parse_each
from memory_core.models.card import Card, CardStatus
from memory_core.models.columns import utcnow
from memory_core.models.trajectory import Refusal, TrajectoryCreate
from memory_core.replay_report import (
    CallReplay,
    ReplayReport,
    ServedCard,
    Totals,
    TrajectoryReplay,
    Verdict,
)
from memory_core.serve.retrieval import retrieve
from memory_core.serve.snapshot import Snapshot, load_snapshot
from memory_core.settings import RankingWeights
from memory_core.task_state import (
    error_code,
    error_signature,
    normalise_error,
    states_before_calls,
)

PRE_CALL = frozenset({"tool", "args"})  # the variables of the call about to be made
MIN_CONTAINED = 12  # a signature shorter than this must equal a failure mode, not sit inside one
_CODE_LITERAL = re.compile(r"error_code\s*==\s*['\"]?([\w.]+)")
_LETTER = re.compile(r"[a-z]")


def _norm(text: str) -> str:
    return normalise_error(text) if text else ""


def _matches(signature: str, mode: str) -> bool:
    if not signature or not mode:
        return False
    if signature == mode:
        return True
    shorter, longer = sorted((signature, mode), key=len)
    # an LLM card words the error inside a sentence; a bare "<n>" must not match every number
    return len(shorter) >= MIN_CONTAINED and bool(_LETTER.search(shorter)) and shorter in longer


def card_warns(card: Card, *, signature: str, code: str) -> bool:
    """Whether the card warns about an error with this normalised signature (or code)."""
    for fm in card.failure_modes:
        mode = str(fm.get("mode", ""))
        if _matches(signature, _norm(mode)):
            return True
        if code and code == error_code(mode):
            return True
    if code:
        for p in card.preconditions:
            if any(m.group(1).casefold() == code.casefold() for m in _CODE_LITERAL.finditer(p)):
                return True
    return False


def served_cards(*, engine: Engine, namespace: str) -> tuple[Snapshot, dict[uuid.UUID, Card]]:
    """The served set (as the API loads it) and its rows, read once for a whole replay."""
    snapshot = load_snapshot(engine=engine, namespace=namespace)
    with Session(engine) as session:
        rows = session.execute(
            select(Card).where(
                col(Card.namespace) == namespace, col(Card.status) == CardStatus.active.value
            )
        ).scalars()
        cards = {c.card_id: c for c in rows}
        for c in cards.values():
            session.expunge(c)
    return snapshot, cards


def ranked_cards(
    *,
    snapshot: Snapshot,
    cards: dict[uuid.UUID, Card],
    state: dict[str, Any],
    top_k: int,
    now: datetime,
    weights: RankingWeights | None = None,
    pre_call_only: bool = False,
) -> list[tuple[Card, float]]:
    """The cards the read API would return for this state, best first (nothing recorded)."""
    found = retrieve(
        snapshot=snapshot,
        state=state,
        now=now,
        top_k=top_k if not pre_call_only else max(top_k * 4, 20),
        weights=weights,
    )
    matches = found.matches
    if pre_call_only:  # as check_action: only cards keyed on the call about to be made
        matches = [m for m in matches if any(c.variables & PRE_CALL for c in m.entry.compiled)]
    out = [(cards[m.entry.card_id], m.score.score) for m in matches if m.entry.card_id in cards]
    return out[:top_k]


def replay_trajectory(
    trajectory: TrajectoryCreate,
    *,
    snapshot: Snapshot,
    cards: dict[uuid.UUID, Card],
    top_k: int,
    now: datetime,
    weights: RankingWeights | None = None,
    pre_call_only: bool = False,
) -> TrajectoryReplay:
    """Classify every tool call of one parsed trajectory."""
    calls = [s for s in trajectory.steps if s.type == "tool_call" and s.tool]
    states = states_before_calls(
        calls, task_type=trajectory.task_type, agent_id=trajectory.agent_id
    )
    totals = Totals(trajectories=1)
    out: list[CallReplay] = []
    for i, (call, state) in enumerate(zip(calls, states, strict=True)):
        ranked = ranked_cards(
            snapshot=snapshot,
            cards=cards,
            state=state,
            top_k=top_k,
            now=now,
            weights=weights,
            pre_call_only=pre_call_only,
        )
        sig = error_signature(call.error, call.args) if call.error else None
        code = error_code(call.error) if call.error else None
        served = [
            ServedCard(
                card_id=c.card_id,
                rank=r,
                scenario=c.scenario,
                score=round(score, 6),
                warned=bool(call.error) and card_warns(c, signature=sig or "", code=code or ""),
            )
            for r, (c, score) in enumerate(ranked, start=1)
        ]
        if call.error:
            verdict = Verdict.hit if any(s.warned for s in served) else Verdict.miss
        else:
            verdict = Verdict.noise if served else Verdict.quiet
        totals.add(verdict)
        out.append(
            CallReplay(
                trajectory=trajectory.key,
                call=i,
                step=call.index,
                tool=call.tool or "",
                error=call.error,
                signature=sig,
                code=code or None,
                verdict=verdict,
                served=served,
                state={k: v for k, v in state.items() if k != "args"},
            )
        )
    return TrajectoryReplay(
        key=trajectory.key, outcome=trajectory.outcome.value, totals=totals, calls=out
    )


def parse_all(
    records: Iterable[tuple[str, Any]],
    *,
    namespace: str,
    task_type: str,
    max_observation_chars: int = 4000,
    limits: InputLimits = DEFAULT_LIMITS,
) -> tuple[list[TrajectoryCreate], list[Refusal]]:
    """Parse records as ingest would (nothing stored); refused ones are named with the reason."""
    parsed: list[TrajectoryCreate] = []
    refused: list[Refusal] = []
    for each in parse_each(
        records,
        namespace=namespace,
        task_type=task_type,
        max_observation_chars=max_observation_chars,
        limits=limits,
    ):
        if isinstance(each, Refusal):
            refused.append(each)
        else:
            parsed.append(each)
    return parsed, refused


def replay(
    *,
    engine: Engine,
    namespace: str,
    trajectories: Sequence[TrajectoryCreate],
    top_k: int = 5,
    weights: RankingWeights | None = None,
    pre_call_only: bool = False,
    now: datetime | None = None,
    refused: Sequence[Refusal] = (),
) -> ReplayReport:
    """Replay parsed trajectories against the namespace's served cards; reads only."""
    if top_k < 1:
        raise InvalidInput("top_k must be at least 1", field="top_k")
    snapshot, cards = served_cards(engine=engine, namespace=namespace)
    now = now or utcnow()
    runs = [
        replay_trajectory(
            t,
            snapshot=snapshot,
            cards=cards,
            top_k=top_k,
            now=now,
            weights=weights,
            pre_call_only=pre_call_only,
        )
        for t in trajectories
    ]
    totals = Totals()
    for r in runs:
        totals.trajectories += 1
        for c in r.calls:
            totals.add(c.verdict)
    return ReplayReport(
        namespace=namespace,
        top_k=top_k,
        pre_call_only=pre_call_only,
        active_cards=len(snapshot.entries),
        trajectories=runs,
        totals=totals,
        hit_rate=totals.hit_rate,
        noise_rate=totals.noise_rate,
        refused=list(refused),
    )
