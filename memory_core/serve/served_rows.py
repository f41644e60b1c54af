"""Served cards' public rows as the API shows them, held per snapshot (Snapshot.rows): read
once from the database, kept current with each use, and read again in the feed's thread when a
change of the card dropped them (serve/feed_poller.py).

Layer: snapshot.
"""

from __future__ import annotations

import itertools
import logging
import uuid
from collections.abc import Sequence
from datetime import datetime

from pydantic import TypeAdapter
from sqlalchemy import bindparam, select
from sqlalchemy.engine import Engine
from sqlalchemy.exc import SQLAlchemyError
from sqlmodel import Session, col

from memory_core.cards.query import to_public
from memory_core.db import READ_ONLY
from memory_core.models.card import Card, CardStatus
from memory_core.serve.snapshot import USE_FIELDS, ServedRow, Snapshot, served_row
from memory_core.settings import Settings

log = logging.getLogger(__name__)
ROW_CACHE = 50_000  # served rows kept per snapshot (about 1 KB each)
_DATETIME = TypeAdapter(datetime)
# built once: a select built per call (its IN list coerced each time) cost more than the read
_CARDS_BY_ID = select(Card).where(col(Card.card_id).in_(bindparam("ids", expanding=True)))


class ServedRows:
    """The public rows of served cards, from the snapshot or read once."""

    def __init__(self, *, engine: Engine, settings: Settings) -> None:
        self.engine = engine
        self.settings = settings

    def get(self, snap: Snapshot, ids: Sequence[uuid.UUID]) -> dict[uuid.UUID, ServedRow]:
        """The public rows of these cards: from the snapshot, else read once (active only).

        A card retired in another process is still served until the snapshot is replaced
        (within the refresh interval), as its preconditions are: both come from the snapshot.
        """
        cached = snap.rows
        missing = [cid for cid in ids if cid not in cached]
        if missing:
            cached.update(self._public(snap.namespace, missing))
            if len(cached) > ROW_CACHE:  # drop the oldest half
                for cid in list(itertools.islice(cached, len(cached) // 2)):
                    cached.pop(cid, None)
        return {cid: cached[cid] for cid in ids if cid in cached}

    def refill(self, snap: Snapshot, ids: list[uuid.UUID]) -> None:
        """Served rows a feed catch-up dropped (their cards changed), read again in the feed's
        thread: a hot card changed by feedback is not read by the query that next serves it.
        A row a query put there meanwhile (with its use) is kept."""
        try:
            rows = self._public(snap.namespace, ids)
        except SQLAlchemyError as exc:  # read on its next serve, as any row not held
            log.warning("served rows of %d changed cards not read again: %s", len(ids), exc)
            return
        for cid, row in rows.items():
            snap.rows.setdefault(cid, row)

    def _public(self, namespace: str, ids: Sequence[uuid.UUID]) -> dict[uuid.UUID, ServedRow]:
        """The cards' public rows as served, from the database (active ones only)."""
        out = {}
        for cid, card in self._active(namespace, ids).items():
            public = to_public(card, rules=self.settings.decay.effects)
            last = public.last_used_at
            out[cid] = served_row(
                public.model_dump_json(exclude=set(USE_FIELDS)).encode(),
                public.use_count,
                None if last is None else _DATETIME.dump_python(last, mode="json"),
                public.decay_tier,
            )
        return out

    def _active(self, namespace: str, ids: Sequence[uuid.UUID]) -> dict[uuid.UUID, Card]:
        if not ids:
            return {}
        with (
            self.engine.connect().execution_options(**READ_ONLY) as conn,
            Session(bind=conn) as session,
        ):
            # by primary key alone: given namespace and status too, SQLite (no statistics)
            # picks the (namespace, status) index for 3+ ids and scans the namespace
            # (23 ms of a 33 ms query at 100k cards)
            cards = session.execute(_CARDS_BY_ID, {"ids": list(ids)}).scalars()
            return {
                c.card_id: c
                for c in cards
                if c.namespace == namespace and c.status == CardStatus.active.value
            }
