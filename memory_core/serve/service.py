"""The one service the read API and the MCP server call: every operation takes the caller's
principal, checks its scope, and works only inside the principal's namespace."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any

from sqlalchemy import select, text
from sqlalchemy.engine import Engine
from sqlmodel import Session, col

from memory_core.cards.query import get_card as _get_card
from memory_core.cards.query import list_cards as _list_cards
from memory_core.cards.query import to_public
from memory_core.errors import InvalidInput, NotFound
from memory_core.models.card import Card, CardPublic, CardStatus, CardVersion
from memory_core.models.columns import utcnow
from memory_core.serve.keys import KeyRing, Principal
from memory_core.serve.retrieval import prompt_block, public_checks, retrieve
from memory_core.serve.schemas import (
    CardHit,
    CheckActionRequest,
    CheckActionResult,
    Explanation,
    HistoryEntry,
    NearMiss,
    QueryRequest,
    QueryResult,
)
from memory_core.serve.snapshot import SnapshotCache
from memory_core.serve.uses import UseRecorder
from memory_core.serve.writes import WriteOperations
from memory_core.settings import Settings

MAX_PAGE = 200
_PRE_CALL = frozenset({"tool", "args"})


def _use_context(state: dict[str, Any], via: str) -> dict[str, Any]:
    """What a use row keeps of the state: short scalar values only."""
    kept = {
        # PostgreSQL's JSONB refuses NUL; one such value must not poison a batch of uses
        k.replace("\x00", ""): v.replace("\x00", "") if isinstance(v, str) else v
        for k, v in state.items()
        if isinstance(v, (str, int, float, bool)) and len(str(v)) <= 200
    }
    return {"via": via, "state": dict(list(kept.items())[:20])}


class MemoryService(WriteOperations):
    """Retrieval, reads and writes of one database, for many namespaces."""

    def __init__(self, *, engine: Engine, settings: Settings) -> None:
        self.engine = engine
        self.settings = settings
        self.snapshots = SnapshotCache(engine=engine, refresh_s=settings.serve.snapshot_refresh_s)
        self.uses = UseRecorder(engine=engine, flush_s=settings.serve.use_flush_s)
        self.keys = KeyRing(engine=engine, cache_s=settings.serve.key_cache_s)

    def start(self) -> None:
        """Start the background use writer."""
        self.uses.start()

    def close(self) -> None:
        """Write pending uses and stop."""
        self.uses.close()

    def authenticate(self, secret: str | None) -> Principal:
        """The caller behind a key (Unauthorized when there is none)."""
        return self.keys.verify(secret)

    def ready(self) -> dict[str, Any]:
        """Readiness: the database answers and uses are being written."""
        with self.engine.connect() as conn:
            conn.execute(text("SELECT 1"))
        return {
            "database": "ok",
            "uses_written": self.uses.written,
            "use_writer": (self.uses.last_error or "ok"),
        }

    # -- retrieval ---------------------------------------------------------------------

    def query(
        self, *, principal: Principal, request: QueryRequest, via: str = "api"
    ) -> QueryResult:
        """Cards whose preconditions hold on the task state, best first (explained on request)."""
        principal.require("read")
        hits, retrieval = self._retrieve(principal, request, via=via)
        result = QueryResult(cards=hits)
        if request.prompt_tokens is not None:
            result.prompt = prompt_block([h.card for h in hits], max_tokens=request.prompt_tokens)
        if request.explain:
            result.explain = Explanation(
                active_cards=retrieval.active_cards,
                candidates=retrieval.candidates,
                near_misses=[
                    NearMiss(
                        card_id=m.entry.card_id,
                        scenario=m.entry.scenario,
                        checks=public_checks(m.checks),
                        score=m.score,
                    )
                    for m in retrieval.near_misses
                ],
            )
        return result

    def _retrieve(
        self,
        principal: Principal,
        request: QueryRequest,
        *,
        via: str,
        needs: frozenset[str] = frozenset(),
    ) -> tuple[list[CardHit], Any]:
        ns = principal.namespace
        snap = self.snapshots.get(ns)
        now = utcnow()
        retrieval = retrieve(
            snapshot=snap,
            state=request.task_state,
            now=now,
            top_k=request.top_k if not needs else max(request.top_k * 4, 20),
            weights=self.settings.ranking,
            query=request.query,
            explain=request.explain,
            near_misses=self.settings.serve.near_misses,
        )
        matches = retrieval.matches
        if needs:  # only cards keyed on the call about to be made
            matches = [m for m in matches if any(c.variables & needs for c in m.entry.compiled)]
        matches = matches[: request.top_k]
        rows = self._active_rows(ns, [m.entry.card_id for m in matches])
        matches = [m for m in matches if m.entry.card_id in rows]
        use_ids: dict[uuid.UUID, uuid.UUID] = {}
        if request.record_use and matches:
            use_ids = self.uses.record(
                namespace=ns,
                card_ids=[m.entry.card_id for m in matches],
                context=_use_context(request.task_state, via),
                now=now,
            )
            for m in matches:  # ranking follows the uses before the rows are written
                m.entry.use_count += 1
                m.entry.seen_at = now
                snap.max_uses = max(snap.max_uses, m.entry.use_count)
        hits = [
            CardHit(
                card=to_public(rows[m.entry.card_id]),
                score=m.score,
                use_id=use_ids.get(m.entry.card_id),
                checks=public_checks(m.checks) if request.explain else None,
            )
            for m in matches
        ]
        return hits, retrieval

    def _active_rows(self, namespace: str, ids: Sequence[uuid.UUID]) -> dict[uuid.UUID, Card]:
        if not ids:
            return {}
        with Session(self.engine) as session:
            # by primary key alone: given namespace and status too, SQLite (no statistics)
            # picks the (namespace, status) index for 3+ ids and scans the namespace
            # (23 ms of a 33 ms query at 100k cards)
            cards = session.execute(select(Card).where(col(Card.card_id).in_(list(ids)))).scalars()
            return {
                c.card_id: c
                for c in cards
                if c.namespace == namespace and c.status == CardStatus.active.value
            }

    def check_action(
        self, *, principal: Principal, request: CheckActionRequest, via: str = "api"
    ) -> CheckActionResult:
        """Cards keyed on this call (tool, args) and their failure modes: warnings before it."""
        state = {**request.task_state, "tool": request.tool, "args": request.args}
        q = QueryRequest(task_state=state, top_k=request.top_k)
        principal.require("read")
        hits, _ = self._retrieve(principal, q, via=via, needs=_PRE_CALL)
        warnings = [
            {
                "card_id": str(h.card.card_id),
                "confidence": h.card.confidence,
                "mode": fm.get("mode", ""),
                "handling": fm.get("handling", ""),
            }
            for h in hits
            for fm in h.card.failure_modes
        ]
        return CheckActionResult(tool=request.tool, warnings=warnings, cards=hits)

    # -- reads -------------------------------------------------------------------------

    def get_card(self, *, principal: Principal, card_id: uuid.UUID) -> CardPublic:
        """One card of the caller's namespace, with its evidence."""
        principal.require("read")
        with Session(self.engine) as session:
            return _get_card(session=session, namespace=principal.namespace, card_id=card_id)

    def list_cards(
        self,
        *,
        principal: Principal,
        statuses: Sequence[str] | None = None,
        kind: str | None = None,
        text: str | None = None,
        min_confidence: float | None = None,
        limit: int = 50,
        offset: int = 0,
    ) -> list[CardPublic]:
        """Cards of the caller's namespace, most recently updated first."""
        principal.require("read")
        if not 1 <= limit <= MAX_PAGE or offset < 0:
            raise InvalidInput(f"limit must be 1..{MAX_PAGE}, offset >= 0", field="limit")
        with Session(self.engine) as session:
            cards = _list_cards(
                session=session,
                namespace=principal.namespace,
                statuses=statuses,
                kind=kind,
                text=text,
                min_confidence=min_confidence,
                limit=limit,
                offset=offset,
            )
        return [to_public(c) for c in cards]

    def recent(self, *, principal: Principal, limit: int = 10) -> list[CardPublic]:
        """The most recently changed active cards."""
        return self.list_cards(principal=principal, statuses=["active"], limit=limit)

    def history(self, *, principal: Principal, card_id: uuid.UUID) -> list[HistoryEntry]:
        """Every version of a card, oldest first: what changed, who, why."""
        principal.require("read")
        with Session(self.engine) as session:
            card = session.get(Card, card_id)
            if card is None or card.namespace != principal.namespace:
                raise NotFound(f"no card {card_id} in namespace {principal.namespace!r}")
            versions = session.execute(
                select(CardVersion)
                .where(col(CardVersion.card_id) == card_id)
                .order_by(col(CardVersion.version), col(CardVersion.created_at))
            ).scalars()
            return [
                HistoryEntry(
                    version=v.version,
                    reason=v.reason,
                    actor=v.actor,
                    created_at=v.created_at,
                    snapshot=v.snapshot,
                )
                for v in versions
            ]
