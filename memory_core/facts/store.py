"""Facts (key / query / value statements): write, supersede by the newest statement, forget.

A fact is a card of kind "fact". The same key, query and value is the same fact (a repeated
statement only refreshes it); the same key and query with another value is a newer statement
that supersedes the older one, with a version row saying why.
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Sequence
from datetime import datetime
from typing import Any, cast

from pydantic import Field, field_validator
from sqlalchemy import select, update
from sqlalchemy.engine import CursorResult, Engine
from sqlalchemy.exc import IntegrityError
from sqlmodel import Session, col

from memory_core.cards.draft_rows import card_snapshot
from memory_core.cards.query import to_public
from memory_core.db import session_scope
from memory_core.errors import ConcurrentUpdate, InvalidInput, NotFound
from memory_core.facts.conflicts import mark_conflicts
from memory_core.facts.standing import Said, corroborate, corroborates
from memory_core.ingest.limits import CleanInput
from memory_core.models.card import (
    LIVE_STATUSES,
    Card,
    CardKind,
    CardPublic,
    CardStatus,
    CardVersion,
    FactStanding,
)
from memory_core.models.columns import utcnow
from memory_core.redact import has_secret, only_redacted
from memory_core.screen.gate import fact_reasons
from memory_core.screen.provenance import Origin, with_origin

MAX_VALUE = 2000
_RETRIES = 3


class FactIn(CleanInput):
    """A statement to remember: what it is about (key), the question it answers, the value."""

    key: str = Field(min_length=1, max_length=256)
    value: str = Field(min_length=1, max_length=MAX_VALUE)
    query: str | None = Field(default=None, max_length=1000)
    valid_until: datetime | None = None
    confidence: float = Field(default=0.8, ge=0.0, le=1.0)
    source: dict[str, Any] = Field(default_factory=dict)

    @field_validator("key", "value", "query")
    @classmethod
    def _stripped(cls, v: str | None) -> str | None:
        if v is None:
            return None
        v = " ".join(v.split())
        if not v:
            raise ValueError("must not be blank")
        return v


def normalise_key(key: str) -> str:
    """Keys compare case- and spacing-insensitively ("Preferred editor" == "preferred_editor")."""
    return "_".join(key.lower().replace("-", " ").replace("_", " ").split())


def fact_signature(*, key: str, query: str | None, value: str) -> str:
    """Same key, query and value: the same fact."""
    norm = "\x1f".join((normalise_key(key), (query or "").lower(), value.lower()))
    return hashlib.sha256(f"fact\x1f{norm}".encode()).hexdigest()


def _key_subject(key: str) -> str:
    """A written fact's subject: its key's first part ("user.editor" -> "user")."""
    head, dot, _ = normalise_key(key).partition(".")
    return head if dot else ""


def _scenario(fact: FactIn) -> str:
    text = f"{fact.query} {fact.value}" if fact.query else f"{fact.key}: {fact.value}"
    return text[:500]


def write_fact(
    *,
    engine: Engine,
    namespace: str,
    fact: FactIn,
    actor: str,
    now: datetime | None = None,
    origin: Origin = Origin.operator,
    said: Sequence[str] = (),
    known: frozenset[str] | None = None,
    screen: bool = True,
    review: bool = False,
    standing: FactStanding = FactStanding.operator,
    speaker: str | None = None,
    subject: str | None = None,
    corroboration: Sequence[dict[str, Any]] = (),
) -> CardPublic:
    """Store a fact (active at once); an older value for the same key and query is superseded.

    A fact (or the statement it was taken from, `said`) that reads as an instruction to the
    agent is stored quarantined, with the reason, and supersedes nothing. With `review` (a
    non-admin key's statement) it waits for a person and supersedes only once approved.
    A claim (`standing`, what `speaker` said) never replaces a corroborated or written value:
    it is kept in history as superseded by it. The same claim from another speaker, or with
    `corroboration`, makes the stored one corroborated."""
    for field_name in ("key", "value", "query"):
        if has_secret(getattr(fact, field_name) or ""):
            raise InvalidInput(
                "looks like a credential; facts must not hold secrets", field=field_name
            )
    if only_redacted(fact.value):
        raise InvalidInput("holds nothing but a redacted secret", field="value")
    flags = (
        fact_reasons(key=fact.key, value=fact.value, query=fact.query, said=said, known=known)
        if screen
        else []
    )
    for _ in range(_RETRIES):
        try:
            return _write_once(
                engine=engine,
                namespace=namespace,
                fact=fact,
                actor=actor,
                now=now,
                origin=origin,
                flags=flags,
                review=review,
                said_by=Said(
                    standing=standing,
                    speaker=speaker[:256] if speaker else None,
                    subject=(subject or _key_subject(fact.key))[:256] or None,
                    corroboration=list(corroboration),
                ),
            )
        except ConcurrentUpdate:
            continue  # another writer changed the older statement meanwhile: decide again
    raise ConcurrentUpdate(f"fact {fact.key!r} kept changing under {_RETRIES} attempts")


def _write_once(
    *,
    engine: Engine,
    namespace: str,
    fact: FactIn,
    actor: str,
    now: datetime | None,
    origin: Origin,
    flags: list[str],
    review: bool,
    said_by: Said,
) -> CardPublic:
    now = now or utcnow()
    key = normalise_key(fact.key)
    sig = fact_signature(key=key, query=fact.query, value=fact.value)
    status = CardStatus.quarantined if flags else CardStatus.review if review else CardStatus.active
    with session_scope(engine) as session:
        same = (
            session.execute(
                select(Card).where(
                    col(Card.namespace) == namespace,
                    col(Card.signature) == sig,
                    # a statement already approved is only refreshed by a repeat waiting for review
                    col(Card.status).in_(
                        {status.value, CardStatus.active.value} if review else {status.value}
                    ),
                )
            )
            .scalars()
            .first()
        )
        if same is not None:  # said again: refresh, no new version (unless now corroborated)
            same.updated_at = now
            same.valid_until = fact.valid_until
            if why := corroborates(same, said_by):
                corroborate(session, same, said_by, actor=actor, reason=why, now=now)
            session.add(same)
            return to_public(same)
        other = _live_elsewhere(session, namespace, sig)
        if other is not None:  # the same statement already stands in another status
            if other.status == CardStatus.review.value and status is CardStatus.active:
                _approved_by_repeat(session, other, actor=actor, now=now)
            # else kept as it is: a quarantine waits for a person, and a flagged repeat
            # neither withdraws nor corroborates what is served
            return to_public(other)
        # a quarantined statement, or one waiting in review, replaces nothing (yet)
        live = status is CardStatus.active
        older = _current(session, namespace=namespace, key=key, query=fact.query) if live else []
        # a claim does not replace what more than a speaker's word stands behind: it is kept,
        # superseded by that value at once (history, `--all`)
        stronger = [o for o in older if o.standing != FactStanding.claim.value]
        outranked = said_by.standing is FactStanding.claim and bool(stronger)
        if outranked:
            live, older = False, []
            kept = _kept_claim(session, namespace, sig, stronger[0].card_id)
            if kept is not None:  # the outranked claim said again: refresh its history row
                kept.updated_at = now
                session.add(kept)
                return to_public(kept)
        provenance = with_origin(
            {"producer": actor, **({"source": fact.source} if fact.source else {})},
            origin,
            **({"key_id": actor.removeprefix("key:")} if actor.startswith("key:") else {}),
            **({"flags": flags} if flags else {}),
            **({"corroboration": said_by.corroboration} if said_by.corroboration else {}),
        )
        card = Card(
            namespace=namespace,
            kind=CardKind.fact.value,
            scenario=_scenario(fact),
            key=key,
            query=fact.query,
            value=fact.value,
            valid_until=fact.valid_until,
            confidence=fact.confidence,
            status=CardStatus.superseded.value if outranked else status.value,
            signature=sig,
            provenance=provenance,
            created_at=now,
            updated_at=now,
            supersedes=older[0].card_id if older else None,
            superseded_by=stronger[0].card_id if outranked else None,
            subject=said_by.subject,
            speaker=said_by.speaker,
            standing=said_by.standing.value,
        )
        session.add(card)
        try:
            session.flush()
        except IntegrityError as exc:
            if not _signature_taken(exc):
                raise
            # another writer stored the same statement since it was looked for: decide again
            raise ConcurrentUpdate(f"fact {key!r} was stored meanwhile") from exc
        session.add(
            CardVersion(
                card_id=card.card_id,
                version=1,
                snapshot=card_snapshot(card.model_dump()),
                actor=actor,
                reason="quarantined: " + "; ".join(flags)
                if flags
                else f"a claim of {said_by.speaker or 'a speaker'}: {stronger[0].value!r} "
                "stands on more than a speaker's word and stays"
                if outranked
                else "fact stated, waiting for review"
                if review
                else "fact stated",
                created_at=now,
            )
        )
        if live:
            _take_over(session, card, older, actor=actor, now=now)
        return to_public(card)


def _signature_taken(exc: IntegrityError) -> bool:
    """The error is the live-signature index's (PostgreSQL names it, SQLite its columns)."""
    text = str(exc.orig)
    return "uq_card_live_signature" in text or "card.namespace, card.signature" in text


def _live_elsewhere(session: Session, namespace: str, sig: str) -> Card | None:
    """The live card of this signature (one at most: the live-signature index), any status."""
    q = select(Card).where(
        col(Card.namespace) == namespace,
        col(Card.signature) == sig,
        col(Card.status).in_(LIVE_STATUSES),
    )
    return session.execute(q).scalars().first()


def _approved_by_repeat(session: Session, card: Card, *, actor: str, now: datetime) -> None:
    """A statement waiting in review, stated again by a writer that needs none: approved."""
    card.status = CardStatus.active.value
    session.flush()  # the older value is read without this card in the active set
    approve_fact(session, card, actor=actor)
    card.version += 1
    card.updated_at = now
    session.add(card)
    session.add(
        CardVersion(
            card_id=card.card_id,
            version=card.version,
            snapshot={**card_snapshot(card.model_dump()), "changed_fields": ["status"]},
            reason="approved: stated again by a writer whose statements need no review",
            actor=actor,
            created_at=now,
        )
    )


def _take_over(
    session: Session, card: Card, older: Sequence[Card], *, actor: str, now: datetime
) -> None:
    mark_conflicts(session, card, now=now)
    for old in older:
        supersede(
            session,
            old,
            by=card.card_id,
            actor=actor,
            reason=f"newer statement of {card.key!r}: {card.value!r} replaces {old.value!r}",
            now=now,
        )


def approve_fact(session: Session, card: Card, *, actor: str) -> None:
    """A fact approved in review takes over from the value served until now."""
    older = [
        c
        for c in _current(session, namespace=card.namespace, key=card.key or "", query=card.query)
        if c.card_id != card.card_id
    ]
    if older:
        card.supersedes = older[0].card_id
    _take_over(session, card, older, actor=actor, now=utcnow())


def _kept_claim(session: Session, namespace: str, sig: str, by: uuid.UUID) -> Card | None:
    q = select(Card).where(
        col(Card.namespace) == namespace,
        col(Card.signature) == sig,
        col(Card.status) == CardStatus.superseded.value,
        col(Card.superseded_by) == by,
    )
    return session.execute(q).scalars().first()


def _current(session: Session, *, namespace: str, key: str, query: str | None) -> list[Card]:
    q = select(Card).where(
        col(Card.namespace) == namespace,
        col(Card.kind) == CardKind.fact.value,
        col(Card.key) == key,
        col(Card.status) == CardStatus.active.value,
    )
    q = q.where(col(Card.query).is_(None) if query is None else col(Card.query) == query)
    return list(session.execute(q).scalars())


def supersede(
    session: Session, old: Card, *, by: uuid.UUID, actor: str, reason: str, now: datetime
) -> None:
    """Retire a card in favour of another; fails (ConcurrentUpdate) if it changed meanwhile."""
    result = session.execute(
        update(Card)
        .where(col(Card.card_id) == old.card_id, col(Card.version) == old.version)
        .values(
            status=CardStatus.superseded.value,
            superseded_by=by,
            version=old.version + 1,
            updated_at=now,
        )
        .execution_options(synchronize_session=False)
    )
    if cast(CursorResult[Any], result).rowcount != 1:
        raise ConcurrentUpdate(f"card {old.card_id} changed while being superseded")
    snapshot = card_snapshot(old.model_dump())
    snapshot.update(status=CardStatus.superseded.value, superseded_by=str(by))
    session.add(
        CardVersion(
            card_id=old.card_id,
            version=old.version + 1,
            snapshot=snapshot,
            actor=actor,
            reason=reason,
            created_at=now,
        )
    )


def forget_fact(*, engine: Engine, namespace: str, fact_id: uuid.UUID, actor: str) -> CardPublic:
    """Take a fact out of retrieval for good (kept in history, status forgotten)."""
    now = utcnow()
    with session_scope(engine) as session:
        card = session.get(Card, fact_id)
        if card is None or card.namespace != namespace or card.kind != CardKind.fact.value:
            raise NotFound(f"no fact {fact_id} in namespace {namespace!r}")
        if card.status == CardStatus.forgotten.value:
            return to_public(card)
        result = session.execute(
            update(Card)
            .where(col(Card.card_id) == fact_id, col(Card.version) == card.version)
            .values(status=CardStatus.forgotten.value, version=card.version + 1, updated_at=now)
            .execution_options(synchronize_session=False)
        )
        if cast(CursorResult[Any], result).rowcount != 1:
            raise ConcurrentUpdate(f"fact {fact_id} changed meanwhile; try again")
        session.add(
            CardVersion(
                card_id=fact_id,
                version=card.version + 1,
                snapshot={"status": CardStatus.forgotten.value},
                actor=actor,
                reason="forgotten on request",
                created_at=now,
            )
        )
        session.refresh(card)
        return to_public(card)
