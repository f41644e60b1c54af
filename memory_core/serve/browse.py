"""Reads for the console: keyset-paged card lists, a card's uses and evidence in context, and
counts for pictures. Every function stays inside one namespace (the caller's key's).

Layer: service.
"""

from __future__ import annotations

import base64
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import orjson
from sqlalchemy import String, and_, cast, func, or_, select
from sqlalchemy.engine import Engine
from sqlmodel import col

from memory_core.cards.filters import (
    MAX_LIMIT,
    TEXTS,
    TIMES,
    CardFilter,
    card_filters,
    sort_key,
)
from memory_core.db import READ_ONLY, read_session
from memory_core.effects.fdr import harm_ids, harms_tests
from memory_core.errors import InvalidInput, NotFound
from memory_core.models.card import Card, CardUse
from memory_core.models.trajectory import Trajectory
from memory_core.redact.fields import redact, redact_steps


@dataclass
class Page:
    """One page of cards and the cursor of the next page (None: the last page)."""

    cards: list[Any]  # rows of LISTED: what the list shows, not whole cards
    next_cursor: str | None = None


# the list's columns only: sorting whole rows (JSON columns and all) cost most of a page
LISTED = (
    col(Card.card_id),
    col(Card.scenario),
    col(Card.status),
    col(Card.kind),
    col(Card.confidence),
    col(Card.use_count),
    col(Card.updated_at),
    col(Card.created_at),
    col(Card.run_count),
    col(Card.last_used_at),
)


def _encode(value: Any, card_id: uuid.UUID) -> str:
    raw = orjson.dumps([value.isoformat() if isinstance(value, datetime) else value, str(card_id)])
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def _decode(cursor: str, sort: str) -> tuple[Any, uuid.UUID]:
    try:
        value, cid = orjson.loads(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)))
        if sort in TIMES:
            value = datetime.fromisoformat(value)
        elif sort in TEXTS:
            if not isinstance(value, str):
                raise ValueError("not a text")
        elif not isinstance(value, (int, float)):
            raise ValueError("not a number")
        return value, uuid.UUID(cid)
    except (ValueError, TypeError) as exc:
        raise InvalidInput("the page cursor is not one this server gave", field="after") from exc


def list_page(
    *, engine: Engine, namespace: str, filters: CardFilter, after: str | None, limit: int = 50
) -> Page:
    """One page of a namespace's cards after the cursor: keyset, so page 2,000 costs as page 1."""
    if not 1 <= limit <= MAX_LIMIT:
        raise InvalidInput(f"limit must be 1..{MAX_LIMIT}", field="limit")
    key = sort_key(filters.sort, engine.dialect.name)
    where = _where(engine, namespace, filters)
    if after:
        v, cid = _decode(after, filters.sort)
        if filters.descending:
            where.append(or_(key < v, and_(key == v, col(Card.card_id) < cid)))
        else:
            where.append(or_(key > v, and_(key == v, col(Card.card_id) > cid)))
    order = (
        (key.desc(), col(Card.card_id).desc())
        if filters.descending
        else (key.asc(), col(Card.card_id).asc())
    )
    listed = (*LISTED, key.label("sort_key"))
    with read_session(engine) as session:
        rows = list(
            session.execute(select(*listed).where(*where).order_by(*order).limit(limit + 1)).all()
        )
    more = len(rows) > limit
    rows = rows[:limit]
    nxt = _encode(rows[-1].sort_key, rows[-1].card_id) if more else None
    return Page(rows, nxt)


def _where(engine: Engine, namespace: str, filters: CardFilter) -> list[Any]:
    """The list's WHERE; the effect filter's harms verdict is the namespace's (effects.fdr)."""
    harmful: list[uuid.UUID] = []
    if filters.effect:
        with engine.connect().execution_options(**READ_ONLY) as conn:
            harmful = harm_ids(
                harms_tests(conn, rules=filters.effect_rules, namespaces=[namespace])
            )
    return card_filters(namespace, filters, harm_ids=harmful, dialect=engine.dialect.name)


def count_cards(*, engine: Engine, namespace: str, filters: CardFilter) -> int:
    """How many cards the filters select (the list's total)."""
    where = _where(engine, namespace, filters)
    with read_session(engine) as session:
        return int(
            session.execute(select(func.count()).select_from(Card).where(*where)).scalar_one()
        )


def recent_uses(
    *, engine: Engine, namespace: str, card_id: uuid.UUID, limit: int = 20, skip: int = 0
) -> list[CardUse]:
    """The uses of a card, newest first: `limit` of them after the newest `skip`."""
    with read_session(engine) as session:
        return list(
            session.execute(
                select(CardUse)
                .where(col(CardUse.card_id) == card_id, col(CardUse.namespace) == namespace)
                .order_by(col(CardUse.used_at).desc(), col(CardUse.id))
                .offset(max(skip, 0))
                .limit(limit)
            ).scalars()
        )


def use_total(*, engine: Engine, namespace: str, card_id: uuid.UUID) -> int:
    """How many uses (served or withheld) a card has in the use log."""
    with read_session(engine) as session:
        return int(
            session.execute(
                select(func.count())
                .select_from(CardUse)
                .where(col(CardUse.card_id) == card_id, col(CardUse.namespace) == namespace)
            ).scalar_one()
        )


@dataclass
class StepWindow:
    """A trajectory around one step: the steps before and after it, redacted unless `raw`."""

    trajectory: Trajectory
    step: int
    steps: list[dict[str, Any]]
    first: int  # the index of steps[0]
    key: str  # the run's key as shown (redacted unless raw)
    raw: bool = False


def trajectory_window(
    *,
    engine: Engine,
    namespace: str,
    trajectory_id: uuid.UUID,
    step: int,
    around: int = 3,
    raw: bool = False,
) -> StepWindow:
    """The steps around one step of a trajectory of this namespace (NotFound otherwise),
    redacted as everything derived from a run is; `raw` (an admin's logged reveal) as stored."""
    with read_session(engine) as session:
        t = session.get(Trajectory, trajectory_id)
    if t is None or t.namespace != namespace:
        raise NotFound(f"no trajectory {trajectory_id} in namespace {namespace!r}")
    first = max(step - around, 0)
    steps = t.steps[first : step + around + 1]
    if raw:
        return StepWindow(t, step, steps, first, t.key, raw=True)
    return StepWindow(t, step, redact_steps(steps), first, redact(t.key))


def chain(*, engine: Engine, namespace: str, card_id: uuid.UUID, limit: int = 20) -> list[Card]:
    """A card's supersession chain, oldest first: what it replaced and what replaced it."""
    seen: dict[uuid.UUID, Card] = {}
    with read_session(engine) as session:
        start = session.get(Card, card_id)
        if start is None or start.namespace != namespace:
            raise NotFound(f"no card {card_id} in namespace {namespace!r}")
        back: list[Card] = []
        c: Card | None = start
        while c is not None and c.supersedes and len(back) < limit:
            c = session.get(Card, c.supersedes)
            if c is None or c.namespace != namespace or c.card_id in seen:
                break
            seen[c.card_id] = c
            back.append(c)
        fwd: list[Card] = []
        c = start
        while c is not None and c.superseded_by and len(fwd) < limit:
            c = session.get(Card, c.superseded_by)
            if c is None or c.namespace != namespace or c.card_id in seen:
                break
            seen[c.card_id] = c
            fwd.append(c)
    return [*reversed(back), start, *fwd]


def fact_conflicts(*, engine: Engine, namespace: str, limit: int = 50) -> list[Sequence[Card]]:
    """Facts that disagree: active facts of one key with the same query (two values where one
    should have superseded the other) or marked as competing claims when written."""
    live = (
        col(Card.namespace) == namespace,
        col(Card.kind) == "fact",
        col(Card.status) == "active",
    )
    with read_session(engine) as session:
        keys = list(
            session.execute(
                select(col(Card.key))
                .where(*live)
                .group_by(col(Card.key))
                .having(func.count() > 1)
                .order_by(col(Card.key))
                .limit(limit)
            ).scalars()
        )
        if not keys:
            return []
        rows = session.execute(
            select(Card)
            .where(*live, col(Card.key).in_(keys))
            .order_by(col(Card.key), col(Card.created_at), col(Card.card_id))
        ).scalars()
        by_key: dict[str | None, list[Card]] = {}
        for card in rows:
            by_key.setdefault(card.key, []).append(card)
    out: list[Sequence[Card]] = []
    for key in keys:
        out += _disagreeing(by_key.get(key, []))
    return out[:limit]


def _disagreeing(cards: list[Card]) -> list[list[Card]]:
    """The groups (two or more) of one key's facts joined by a shared query or a conflict mark."""
    root = {c.card_id: c.card_id for c in cards}

    def find(x: uuid.UUID) -> uuid.UUID:
        while root[x] != x:
            root[x] = root[root[x]]
            x = root[x]
        return x

    by_query: dict[str | None, uuid.UUID] = {}
    for c in cards:
        first = by_query.setdefault(c.query, c.card_id)
        links = [first, *(uuid.UUID(str(o)) for o in c.provenance.get("conflicts_with") or [])]
        for other in links:
            if other in root:
                root[find(other)] = find(c.card_id)
    groups: dict[uuid.UUID, list[Card]] = {}
    for c in cards:
        groups.setdefault(find(c.card_id), []).append(c)
    return [g for g in groups.values() if len(g) > 1]


def expiring_facts(*, engine: Engine, namespace: str, limit: int = 50) -> list[Card]:
    """Active facts with an expiry, soonest first."""
    with read_session(engine) as session:
        return list(
            session.execute(
                select(Card)
                .where(
                    col(Card.namespace) == namespace,
                    col(Card.kind) == "fact",
                    col(Card.status) == "active",
                    col(Card.valid_until).is_not(None),
                )
                .order_by(col(Card.valid_until))
                .limit(limit)
            ).scalars()
        )


@dataclass
class EvidenceRun:
    """A run a card's evidence cites: key (redacted), outcome, task group, and the page step
    of each of its tool calls (evidence counts calls; a chat run's page counts messages)."""

    key: str
    outcome: str
    task_type: str
    call_steps: list[int]


def runs_of(
    *, engine: Engine, namespace: str, trajectory_ids: Sequence[uuid.UUID]
) -> dict[uuid.UUID, EvidenceRun]:
    """The runs behind a card's evidence table, by id: every one asked for that the namespace
    still holds, looked up RUNS_CHUNK ids at a time (one IN list stays small on any backend)."""
    wanted = list(dict.fromkeys(trajectory_ids))
    out: dict[uuid.UUID, EvidenceRun] = {}
    with read_session(engine) as session:
        for at in range(0, len(wanted), RUNS_CHUNK):
            rows = session.execute(
                select(Trajectory).where(
                    col(Trajectory.namespace) == namespace,
                    col(Trajectory.id).in_(wanted[at : at + RUNS_CHUNK]),
                )
            ).scalars()
            out.update((t.id, _evidence_run(t)) for t in rows)
    return out


RUNS_CHUNK = 500


def _evidence_run(t: Trajectory) -> EvidenceRun:
    """What the evidence table shows of one run."""
    calls = [
        int(x.get("index", n))
        for n, x in enumerate(t.steps)
        if x.get("type") == "tool_call" and x.get("tool")
    ]
    return EvidenceRun(redact(t.key), t.outcome, t.task_type, calls)


def card_by_prefix(*, engine: Engine, namespace: str, value: str) -> uuid.UUID:
    """The one card of this namespace whose id is `value` or starts with it (tables show 8
    characters); a clear error when none or several do."""
    try:
        return uuid.UUID(value)
    except ValueError:
        pass
    prefix = value.strip().lower().replace("-", "")
    if len(prefix) < 4 or any(ch not in "0123456789abcdef" for ch in prefix):
        raise InvalidInput(
            f"{value!r} is not a card id: give the id or at least its first 4 hex characters",
            field="card_id",
        )
    # PostgreSQL prints a uuid with dashes, SQLite stores 32 hex digits: compare without dashes
    as_hex = func.replace(func.lower(cast(col(Card.card_id), String)), "-", "")
    with read_session(engine) as session:
        found = list(
            session.execute(
                select(col(Card.card_id))
                .where(col(Card.namespace) == namespace, as_hex.like(f"{prefix}%"))
                .order_by(col(Card.card_id))
                .limit(6)
            ).scalars()
        )
    if not found:
        raise NotFound(f"no card of namespace {namespace!r} has an id starting with {value!r}")
    if len(found) > 1:
        shown = ", ".join(str(f) for f in found[:5]) + (", ..." if len(found) > 5 else "")
        raise InvalidInput(
            f"{value!r} is ambiguous: cards {shown} start with it; give more characters",
            field="card_id",
        )
    return found[0] if isinstance(found[0], uuid.UUID) else uuid.UUID(str(found[0]))
