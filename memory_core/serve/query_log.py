"""Reads of the query log for the console: served queries newest first, keyset-paged, filtered
by card, key and time; each with its state (redacted), the cards served and withheld with their
scores, retrieval latency and the outcome reported for it. One namespace at a time.

Layer: service.
"""

from __future__ import annotations

import base64
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import orjson
from sqlalchemy import and_, or_, select
from sqlalchemy.engine import Engine
from sqlmodel import col

from memory_core.db import read_session
from memory_core.errors import InvalidInput, NotFound
from memory_core.models.api_key import ApiKey
from memory_core.models.card import Card, CardUse
from memory_core.models.query_log import QueryLog
from memory_core.redact import redact, redact_value

PAGE = 50  # queries on one page


@dataclass(frozen=True, kw_only=True)
class QueryFilter:
    """Which queries: of one card (served or withheld), of one key, within a time range."""

    card_id: uuid.UUID | None = None
    key_id: uuid.UUID | None = None
    since: datetime | None = None
    until: datetime | None = None

    def __post_init__(self) -> None:
        if self.since and self.until and self.since > self.until:
            raise InvalidInput("the time range ends before it starts", field="until")


@dataclass
class Served:
    """A card of a query: its id, score and scenario (redacted; None: no longer stored)."""

    card_id: uuid.UUID
    score: float
    scenario: str | None


@dataclass
class LoggedQuery:
    """One served query as the console shows it."""

    query_id: uuid.UUID
    asked_at: datetime
    key_id: uuid.UUID | None
    key_name: str
    via: str
    state: dict[str, Any]
    served: list[Served]
    withheld: list[Served]
    latency_ms: float
    outcome: str | None = None  # reported for the query (POST /v1/uses/{query_id}/outcome)


@dataclass
class QueryPage:
    """A page of queries and the cursor of the next (older) page."""

    queries: list[LoggedQuery] = field(default_factory=list)
    next_cursor: str | None = None


def parse_time(value: str | None, name: str) -> datetime | None:
    """An ISO date or time (UTC when it names no zone); None for an empty value."""
    raw = (value or "").strip()
    if not raw:
        return None
    try:
        when = datetime.fromisoformat(raw)
    except ValueError as exc:
        raise InvalidInput(f"{name} must be an ISO date or time, not {raw!r}", field=name) from exc
    return when if when.tzinfo else when.replace(tzinfo=UTC)


def _encode(at: datetime, query_id: uuid.UUID) -> str:
    raw = orjson.dumps([at.isoformat(), str(query_id)])
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def _decode(cursor: str) -> tuple[datetime, uuid.UUID]:
    try:
        at, qid = orjson.loads(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)))
        return datetime.fromisoformat(at), uuid.UUID(qid)
    except (ValueError, TypeError) as exc:
        raise InvalidInput("the page cursor is not one this server gave", field="after") from exc


def query_page(
    *,
    engine: Engine,
    namespace: str,
    filters: QueryFilter,
    after: str | None = None,
    limit: int = PAGE,
) -> QueryPage:
    """One page of the namespace's served queries, newest first, after the cursor."""
    q = QueryLog
    where: list[Any] = [col(q.namespace) == namespace]
    if filters.card_id is not None:
        # by the card's index alone (the card is checked to be this namespace's below): with
        # the namespace too, SQLite walked every use of the namespace by its index
        uses = select(col(CardUse.query_id)).where(col(CardUse.card_id) == filters.card_id)
        where.append(col(q.query_id).in_(uses))
    if filters.key_id is not None:
        where.append(col(q.key_id) == filters.key_id)
    if filters.since is not None:
        where.append(col(q.asked_at) >= filters.since)
    if filters.until is not None:
        where.append(col(q.asked_at) <= filters.until)
    if after:
        at, qid = _decode(after)
        where.append(or_(col(q.asked_at) < at, and_(col(q.asked_at) == at, col(q.query_id) < qid)))
    with read_session(engine) as session:
        if (
            filters.card_id is not None
            and not session.execute(
                select(col(Card.card_id)).where(
                    col(Card.card_id) == filters.card_id, col(Card.namespace) == namespace
                )
            ).first()
        ):  # another namespace's card is not found, as on its own page
            raise NotFound(f"no card {filters.card_id} in namespace {namespace!r}")
        rows = list(
            session.execute(
                select(q)
                .where(*where)
                .order_by(col(q.asked_at).desc(), col(q.query_id).desc())
                .limit(limit + 1)
            ).scalars()
        )
        more = len(rows) > limit
        rows = rows[:limit]
        page = _shown(session, namespace, rows)
    nxt = _encode(rows[-1].asked_at, rows[-1].query_id) if more else None
    return QueryPage(page, nxt)


def _shown(session: Any, namespace: str, rows: list[QueryLog]) -> list[LoggedQuery]:
    """The rows with their cards' scenarios, their keys' names and their outcomes (three reads
    of the page's ids, not one per query)."""
    ids = {uuid.UUID(c) for r in rows for c, _ in (*r.served, *r.withheld)}
    # by key alone, the namespace checked here: with `namespace = ...` in the statement SQLite
    # walked the namespace's index instead of the keys
    scenarios = {
        cid: scenario
        for cid, scenario, ns in (
            session.execute(
                select(col(Card.card_id), col(Card.scenario), col(Card.namespace)).where(
                    col(Card.card_id).in_(list(ids))
                )
            ).all()
            if ids
            else []
        )
        if ns == namespace
    }
    keys = {r.key_id for r in rows if r.key_id is not None}
    names = dict(
        session.execute(
            select(col(ApiKey.id), col(ApiKey.name)).where(col(ApiKey.id).in_(list(keys)))
        ).all()
        if keys
        else []
    )
    outcomes = dict(
        session.execute(
            select(col(CardUse.query_id), col(CardUse.outcome))
            .where(  # the page's queries are this namespace's: their ids select its uses
                col(CardUse.query_id).in_([r.query_id for r in rows]),
                col(CardUse.outcome).is_not(None),
            )
            .distinct()
        ).all()
        if rows
        else []
    )

    def cards(pairs: list[Any]) -> list[Served]:
        out = []
        for cid, score in pairs:
            card_id = uuid.UUID(cid)
            scenario = scenarios.get(card_id)
            out.append(Served(card_id, float(score), redact(scenario) if scenario else None))
        return out

    return [
        LoggedQuery(
            query_id=r.query_id,
            asked_at=r.asked_at,
            key_id=r.key_id,
            key_name=names.get(r.key_id, "") if r.key_id else "",
            via=r.via,
            # as the trajectory page shows a run: what an agent sent may hold a secret
            state=redact_value(r.state),
            served=cards(r.served),
            withheld=cards(r.withheld),
            latency_ms=r.latency_ms,
            outcome=outcomes.get(r.query_id),
        )
        for r in rows
    ]


def namespace_keys(*, engine: Engine, namespace: str) -> list[tuple[uuid.UUID, str]]:
    """The namespace's keys (id, name), for the filter: names only, never secrets."""
    with read_session(engine) as session:
        rows = session.execute(
            select(col(ApiKey.id), col(ApiKey.name))
            .where(col(ApiKey.namespace) == namespace)
            .order_by(col(ApiKey.name), col(ApiKey.id))
        ).all()
    return [(kid, name or f"key {str(kid)[:8]}") for kid, name in rows]
