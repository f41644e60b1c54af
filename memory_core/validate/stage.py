"""The validate stage: drafts through the suite; active, review, or rejected with the reasons."""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any, cast

from sqlalchemy import ARRAY, Uuid, any_, bindparam, insert, select, update
from sqlalchemy.engine import CursorResult, Engine
from sqlalchemy.sql.elements import ColumnElement
from sqlmodel import Session, col

from memory_core.cards.draft_rows import card_snapshot
from memory_core.db import session_scope
from memory_core.errors import LLMTransient
from memory_core.models.card import Card, CardStatus, CardVersion
from memory_core.models.columns import new_id, utcnow
from memory_core.models.validation import ValidationRun
from memory_core.retrospect.grounding import check_grounding, evidence_views
from memory_core.retrospect.rejections import keep_refused_of_cards, refused_entry
from memory_core.screen.gate import screen_card
from memory_core.validate.frame import cards_frame, draft_columns, draft_row
from memory_core.validate.regenerate import Regenerate
from memory_core.validate.summary import ValidationSummary, merged, report_folder

_CHUNK = 5000
Progress = Callable[[str, int, int], None]  # (what is happening, steps done, steps in all)
VALIDATE_STEPS = 5  # load, expectations loaded, suite run, regeneration, decisions written


def _set_status(session: Session, ids: Sequence[uuid.UUID], status: CardStatus) -> int:
    """Move these drafts (and only drafts: a card decided meanwhile stays) to status."""
    matches: list[ColumnElement[bool]]
    if session.get_bind().dialect.name == "postgresql":
        # one statement with an array beats chunks of IN lists by a third on 100k rows
        matches = [col(Card.card_id) == any_(bindparam("ids", list(ids), type_=ARRAY(Uuid())))]
    else:
        matches = [col(Card.card_id).in_(ids[i : i + _CHUNK]) for i in range(0, len(ids), _CHUNK)]
    now, moved = utcnow(), 0
    for match in matches:
        result = session.execute(
            update(Card)
            .where(match, col(Card.status) == CardStatus.draft.value)
            .values(status=status.value, updated_at=now)
        )
        moved += cast(CursorResult[Any], result).rowcount
    return moved


def _decided(
    session: Session,
    ids: Sequence[uuid.UUID],
    status: CardStatus,
    confidence: dict[uuid.UUID, float],
    review_below: float,
    now: datetime,
) -> int:
    """Move these drafts to status, each with a version by the validator saying why."""
    versions: dict[uuid.UUID, int] = {}
    for i in range(0, len(ids), _CHUNK):
        rows = session.execute(
            select(col(Card.card_id), col(Card.version)).where(
                col(Card.card_id).in_(ids[i : i + _CHUNK]),
                col(Card.status) == CardStatus.draft.value,
            )
        )
        versions.update({k: v for k, v in rows.tuples()})
    moved = _set_status(session, list(versions), status)
    if not versions:
        return moved
    session.execute(update(Card), [{"card_id": k, "version": v + 1} for k, v in versions.items()])
    why = (
        f"passed validation, confidence at least {review_below:g}: active"
        if status is CardStatus.active
        else f"passed validation, confidence below {review_below:g}: waits in review"
    )
    session.execute(
        insert(CardVersion),
        [
            {
                "id": new_id(),
                "card_id": k,
                "version": v + 1,
                "snapshot": {"status": status.value, "confidence": confidence[k]},
                "reason": why,
                "actor": "validator",
                "created_at": now,
            }
            for k, v in versions.items()
        ],
    )
    return moved


def validate_drafts(
    *,
    engine: Engine,
    reports_dir: Path | None,
    namespace: str | None = None,
    registry: frozenset[str] | None = None,
    review_below: float = 0.5,
    regenerate: Regenerate | None = None,
    on_progress: Progress | None = None,
    run_id: str | None = None,
) -> ValidationSummary:
    """Validate every draft: failing ones rejected (with the failed expectations in their
    history), passing ones active, or in review when their confidence is below review_below.
    A regeneration refused by its checks is kept as a rejection of the flow run `run_id`.

    on_progress, when given, hears each step as it starts and ends: (what, done, total) in
    steps of VALIDATE_STEPS. With a reports folder and no namespace, each namespace's drafts
    are validated apart, so that each report holds one namespace's text (and goes with it)."""
    if namespace is None and reports_dir is not None:
        with Session(engine) as session:
            found = session.execute(
                select(col(Card.namespace))
                .where(col(Card.status) == CardStatus.draft.value)
                .distinct()
                .order_by(col(Card.namespace))
            ).scalars()
            names = list(found)
        if len(names) > 1:
            parts = [
                validate_drafts(
                    engine=engine,
                    reports_dir=reports_dir,
                    namespace=ns,
                    registry=registry,
                    review_below=review_below,
                    regenerate=regenerate,
                    on_progress=on_progress,
                    run_id=run_id,
                )
                for ns in names
            ]
            return merged(parts)
        namespace = names[0] if names else None

    def step(what: str, done: int) -> None:
        if on_progress is not None:
            on_progress(what, done, VALIDATE_STEPS)

    step("reading the drafts", 0)
    with Session(engine) as session:
        q = select(*draft_columns()).where(col(Card.status) == CardStatus.draft.value)
        if namespace is not None:
            q = q.where(col(Card.namespace) == namespace)
        drafts: list[Any] = list(session.execute(q).all())
    if not drafts:
        step("no drafts to validate", VALIDATE_STEPS)
        return ValidationSummary()
    validation_id = new_id()
    docs = report_folder(reports_dir, namespace) if reports_dir else None
    n = len(drafts)
    step(f"{n} drafts read; loading the expectations", 1)
    # Great Expectations and pandas load only when there is something to check
    from memory_core.validate.suite import run_suite

    result = run_suite(
        cards_frame(drafts, registry=registry),
        docs_dir=docs,
        on_loaded=lambda: step(f"checking {n} drafts against the expectations", 2),
    )
    # ids come as text (hex on SQLite); failures are keyed by that same text
    failures = {uuid.UUID(k): v for k, v in result.failures.items()}
    rejected = [c for c in drafts if c.card_id in result.failures]
    passing = [c for c in drafts if c.card_id not in result.failures]
    step(
        f"{n} drafts checked, {len(rejected)} failed"
        + ("; regenerating" if regenerate and rejected else ""),
        3,
    )
    refusals: dict[uuid.UUID, dict[str, Any]] = {}  # regenerations refused by their checks
    fixed, waiting = _regenerated(engine, rejected, failures, regenerate, registry, refusals)
    step(f"writing the decisions on {n} drafts", 4)
    if fixed or waiting:
        rejected = [
            c for c in rejected if uuid.UUID(c.card_id) not in fixed and c.card_id not in waiting
        ]
        passing += [draft_row(c) for c in fixed.values()]
    active = [uuid.UUID(c.card_id) for c in passing if c.confidence >= review_below]
    review = [uuid.UUID(c.card_id) for c in passing if c.confidence < review_below]
    now = utcnow()
    with session_scope(engine) as session:
        for card in fixed.values():  # the regenerated fields replace the failing ones
            card.version += 1
            session.merge(card)
            session.add(
                CardVersion(
                    card_id=card.card_id,
                    version=card.version,
                    snapshot=card_snapshot(card.model_dump()),
                    actor="validator",
                    reason="regenerated after failing: " + "; ".join(failures[card.card_id]),
                )
            )
        confidence = {uuid.UUID(c.card_id): c.confidence for c in passing}
        activated = _decided(session, active, CardStatus.active, confidence, review_below, now)
        in_review = _decided(session, review, CardStatus.review, confidence, review_below, now)
        versions = {uuid.UUID(c.card_id): c.version for c in rejected}
        _set_status(session, list(versions), CardStatus.rejected)
        if versions:
            session.execute(
                update(Card), [{"card_id": i, "version": v + 1} for i, v in versions.items()]
            )
            session.execute(
                insert(CardVersion),
                [
                    {
                        "id": new_id(),
                        "card_id": i,
                        "version": v + 1,
                        "snapshot": {"status": CardStatus.rejected.value, "failed": failures[i]},
                        "reason": "rejected by validation: " + "; ".join(failures[i]),
                        "actor": "validator",
                        "created_at": now,
                    }
                    for i, v in versions.items()
                ],
            )
        drafts_rejected = keep_refused_of_cards(session, refusals, run_id) if refusals else 0
        session.add(
            ValidationRun(
                id=validation_id,
                namespace=namespace,
                created_at=now,
                evaluated=len(drafts),
                activated=activated,
                review=in_review,
                rejected=len(rejected),
                rule_failures=result.rule_failures,
                failed_cards={str(cid): rules for cid, rules in failures.items()},
                docs_path=str(result.docs_index) if result.docs_index else None,
            )
        )
    step(f"{n} drafts decided", VALIDATE_STEPS)
    return ValidationSummary(
        run_id=validation_id,
        drafts_rejected=drafts_rejected,
        evaluated=len(drafts),
        activated=activated,
        review=in_review,
        rejected=len(rejected),
        rule_failures=result.rule_failures,
        docs_index=str(result.docs_index) if result.docs_index else None,
        deferred=len(waiting),
    )


def _regenerated(
    engine: Engine,
    rejected: list[Any],
    failures: dict[uuid.UUID, list[str]],
    regenerate: Regenerate | None,
    registry: frozenset[str] | None,
    refusals: dict[uuid.UUID, dict[str, Any]],
) -> tuple[dict[uuid.UUID, Card], set[str]]:
    """LLM drafts that failed get one regeneration; those whose new version passes the suite
    and the grounding checks every LLM card passes; and the card ids (as text) whose
    regeneration must wait because the LLM was unreachable. A regeneration refused by the
    trust screen or its grounding goes into `refusals`, as a refused draft is kept."""
    if regenerate is None or not rejected:
        return {}, set()
    ids = [uuid.UUID(r.card_id) for r in rejected]
    cards: list[Card] = []
    with Session(engine) as session:
        for i in range(0, len(ids), _CHUNK):
            cards += session.execute(
                select(Card).where(
                    col(Card.card_id).in_(ids[i : i + _CHUNK]),
                    Card.provenance["producer"].as_string() == "llm",
                )
            ).scalars()
    candidates, waiting = [], set()
    answers: dict[uuid.UUID, dict[str, Any]] = {}  # each candidate's answer, as the LLM gave it
    for card in cards:
        if card.provenance.get("regenerated"):
            continue
        try:
            changes = regenerate(card, failures[card.card_id])
        except LLMTransient as exc:  # this card only: the others are still regenerated
            waiting.add(next(r.card_id for r in rejected if uuid.UUID(r.card_id) == card.card_id))
            failures[card.card_id] = [*failures[card.card_id], f"regeneration waits: {exc}"]
            continue
        if changes is None:
            continue
        injected = screen_card(changes)
        if injected:  # a regenerated card that reads as an instruction stays rejected
            failures[card.card_id] = [*failures[card.card_id], *injected]
            refusals[card.card_id] = _refusal(card, changes, injected)
            continue
        candidates.append(Card.model_validate({**card.model_dump(), **changes}))
        answers[card.card_id] = changes
    if not candidates:
        return {}, waiting
    from memory_core.validate.suite import run_suite

    second = run_suite(cards_frame(candidates, registry=registry))
    passed = [c for c in candidates if str(c.card_id) not in second.failures]
    views = evidence_views(engine=engine, card_ids=[c.card_id for c in passed])
    fixed = {}
    for c in passed:
        verdict = check_grounding(
            preconditions=c.preconditions,
            tools=[str(a.get("tool", "")) for a in c.action_sequence],
            texts=_texts(c),
            views=views.get(c.card_id, []),
            known_tools=registry or frozenset(),
        )
        if verdict.flags:  # a regenerated card is held to a first draft's standard
            flags = [f"regenerated card: {f}" for f in verdict.flags]
            failures[c.card_id] = [*failures[c.card_id], *flags]
            refusals[c.card_id] = _refusal(c, answers[c.card_id], flags)
        else:
            fixed[c.card_id] = c
    return fixed, waiting


def _refusal(card: Card, answer: dict[str, Any], flags: list[str]) -> dict[str, Any]:
    """A refused regeneration as a run's marker keeps it (the card stays rejected)."""
    return refused_entry(
        status=CardStatus.rejected.value,
        reason="; ".join(flags),
        # the model's answer: the provenance beside it is ours
        raw=json.dumps(
            {k: v for k, v in answer.items() if k != "provenance"}, ensure_ascii=False, default=str
        ),
        scenario=str(answer.get("scenario") or card.scenario),
        producer=card.provenance.get("producer"),
    )


def _texts(card: Card) -> list[str]:
    out = [card.scenario, card.expected_outcome, card.actual_outcome]
    out += [str(a.get("note", "")) for a in card.action_sequence]
    out += [str(v) for a in card.action_sequence for v in (a.get("params_template") or {}).values()]
    out += [f"{f.get('mode', '')} {f.get('handling', '')}" for f in card.failure_modes]
    return out


def latest_run(*, engine: Engine) -> ValidationRun | None:
    """The most recent validation run, if any."""
    with Session(engine) as session:
        return session.execute(
            select(ValidationRun).order_by(col(ValidationRun.created_at).desc()).limit(1)
        ).scalar_one_or_none()
