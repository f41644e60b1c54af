"""One set of grounding checks for every LLM-made card: first drafts, regenerated drafts and
judged merges alike. A card is grounded in the runs it claims as evidence: its preconditions
compile and hold on some state of those runs (so they read task-state variables the runs
have), its action tools were called there (or are known), and it carries no instruction-like
text lifted from a run."""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from sqlalchemy import select
from sqlalchemy.engine import Engine
from sqlmodel import Session, col

from memory_core.errors import InvalidPrecondition
from memory_core.models.card import CardEvidence, CardStatus
from memory_core.models.drafts import TrajectoryView, view_of
from memory_core.models.trajectory import Trajectory
from memory_core.preconditions import compile_all, holds_all, make_context
from memory_core.task_state import planning_state, states_before_calls

# instruction-like text that has no business inside advice distilled from a run
INJECTION = re.compile(
    r"ignore (all |any |the )?(previous|prior|above|earlier) (instructions|rules)"
    r"|disregard (all |the )?(previous|prior|above|system)"
    r"|(new|updated) (system )?instructions?\s*:"
    r"|you (must|should) (now )?always"
    r"|system prompt",
    re.IGNORECASE,
)
UNGROUNDED = "its preconditions hold on no state of the run it came from"


@dataclass
class Grounding:
    """The verdict: None (fine), rejected or quarantined, with the reasons."""

    status: CardStatus | None = None
    flags: list[str] = field(default_factory=list)


def check_grounding(
    *,
    preconditions: Sequence[str],
    tools: Iterable[str],
    texts: Iterable[str],
    views: Sequence[TrajectoryView],
    known_tools: frozenset[str] = frozenset(),
) -> Grounding:
    """Check a card against the runs it came from (rejected: not true there; quarantined:
    tools never called, or injected text)."""
    out = Grounding()
    try:
        compiled = compile_all(list(preconditions))
    except InvalidPrecondition as exc:
        compiled = []
        out.status = CardStatus.rejected
        out.flags.append(str(exc))
    states = [
        s
        for v in views
        for s in states_before_calls(v.steps, task_type=v.task_type, agent_id=v.agent_id)
    ]
    if compiled and states:
        candidates = states + [planning_state(s) for s in states]
        if not any(holds_all(compiled, make_context(s), frozenset(s)) for s in candidates):
            out.status = CardStatus.rejected
            out.flags.append(UNGROUNDED)
    called = {s.tool for v in views for s in v.steps if s.type == "tool_call" and s.tool}
    strangers = sorted(set(tools) - called - known_tools)
    if strangers:
        out.flags.append(f"action tool(s) {', '.join(strangers)} never called in the source run")
    if any(INJECTION.search(t) for t in texts):
        out.flags.append("instruction-like text from the run found in the card")
    if out.flags and out.status is None:
        out.status = CardStatus.quarantined
    return out


def evidence_views(
    *, engine: Engine, card_ids: Sequence[uuid.UUID]
) -> dict[uuid.UUID, list[TrajectoryView]]:
    """The source runs of each card, from its evidence rows."""
    if not card_ids:
        return {}
    with Session(engine) as session:
        pairs = session.execute(
            select(col(CardEvidence.card_id), col(CardEvidence.trajectory_id))
            .where(col(CardEvidence.card_id).in_(list(card_ids)))
            .distinct()
        ).all()
        runs = {
            r.id: r
            for r in session.execute(
                select(Trajectory).where(col(Trajectory.id).in_({t for _, t in pairs}))
            ).scalars()
        }
        out: dict[uuid.UUID, list[TrajectoryView]] = {cid: [] for cid in card_ids}
        for cid, tid in pairs:
            if tid in runs:
                out[cid].append(view_of(runs[tid]))
    return out
