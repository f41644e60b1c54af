"""The blocking client: one method per API operation, the API's models in and out."""

from __future__ import annotations

import time
import uuid
from collections.abc import Mapping, Sequence
from types import TracebackType
from typing import Any, TypeVar

import httpx

from hindsight.client import calls
from hindsight.client.base import client_options, read_answer, request_args
from hindsight.client.errors import TransportError
from hindsight.client.retry import RetryPolicy
from memory_core.decay.feedback import Feedback
from memory_core.effects.outcomes import QueryOutcome
from memory_core.effects.report import EffectsReport
from memory_core.facts.search import FactHit
from memory_core.facts.store import FactIn
from memory_core.ingest.otlp.receive import TraceAnswer
from memory_core.models.card import CardPublic
from memory_core.namespaces.answers import (
    DeletionOut,
    ImportOut,
    NamespaceOut,
    RetentionIn,
    RetentionOut,
)
from memory_core.serve.schemas import (
    CardIn,
    CheckActionRequest,
    CheckActionResult,
    FactSearchRequest,
    FeedbackRequest,
    HistoryEntry,
    IngestResult,
    OutcomeRequest,
    PinRequest,
    QueryRequest,
    QueryResult,
    RejectRequest,
)

T = TypeVar("T")
CardRef = uuid.UUID | str


class Client:
    """A Hindsight API client over httpx: `Client(url, api_key)`, used as a context manager."""

    def __init__(
        self,
        base_url: str,
        api_key: str | None = None,
        *,
        timeout: float | httpx.Timeout | None = None,
        retry: RetryPolicy | None = None,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self.retry = retry or RetryPolicy()
        self._http = httpx.Client(**client_options(base_url, api_key, timeout), transport=transport)

    def __enter__(self) -> Client:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def close(self) -> None:
        """Close the connections."""
        self._http.close()

    def call(self, call: calls.Call[T]) -> T:
        """Send one call, retrying transient failures as the policy says; its typed answer."""
        idempotent = call.route.idempotent
        retry = 0
        while True:
            try:
                response = self._http.request(**request_args(call))
            except httpx.TransportError as exc:
                pause = self.retry.after_error(exc, retry=retry, idempotent=idempotent)
                if pause is None:
                    raise TransportError(f"{call.route.method} {call.path}: {exc!r}") from exc
            else:
                pause = self.retry.after_answer(response, retry=retry, idempotent=idempotent)
                if pause is None:
                    return read_answer(call, response)
            time.sleep(pause)
            retry += 1

    def healthz(self) -> dict[str, Any]:
        """The process is up."""
        return self.call(calls.healthz())

    def readyz(self) -> dict[str, Any]:
        """The database answers (ServerError `database_unavailable` when it does not)."""
        return self.call(calls.readyz())

    def query_cards(self, request: QueryRequest) -> QueryResult:
        """Cards whose preconditions hold on the task state, best first."""
        return self.call(calls.query_cards(request))

    def check_action(self, request: CheckActionRequest) -> CheckActionResult:
        """Before a tool call: the warnings of the cards keyed on it."""
        return self.call(calls.check_action(request))

    def list_cards(
        self,
        *,
        status: Sequence[str] = (),
        kind: str | None = None,
        q: str | None = None,
        min_confidence: float | None = None,
        limit: int = 50,
        offset: int = 0,
    ) -> list[CardPublic]:
        """Cards of the key's namespace, most recently updated first."""
        return self.call(
            calls.list_cards(
                status=status,
                kind=kind,
                q=q,
                min_confidence=min_confidence,
                limit=limit,
                offset=offset,
            )
        )

    def store_card(self, card: CardIn) -> CardPublic:
        """Store a card (write scope)."""
        return self.call(calls.store_card(card))

    def recent_cards(self, *, limit: int = 10) -> list[CardPublic]:
        """The most recently changed active cards."""
        return self.call(calls.recent_cards(limit=limit))

    def get_card(self, card_id: CardRef) -> CardPublic:
        """One card with its evidence."""
        return self.call(calls.get_card(card_id))

    def card_history(self, card_id: CardRef) -> list[HistoryEntry]:
        """Every version of a card."""
        return self.call(calls.card_history(card_id))

    def feedback(self, card_id: CardRef, request: FeedbackRequest) -> Feedback:
        """The outcome of a task that used a card (+0.05 success, -0.1 failure)."""
        return self.call(calls.feedback(card_id, request))

    def report_outcome(self, query_id: CardRef, request: OutcomeRequest) -> QueryOutcome:
        """The outcome of the run that made a query (its `query_id`)."""
        return self.call(calls.report_outcome(query_id, request))

    def pin_card(self, card_id: CardRef, request: PinRequest) -> CardPublic:
        """Pin or unpin a card (admin)."""
        return self.call(calls.pin_card(card_id, request))

    def effects(self, *, limit: int = 200) -> EffectsReport:
        """Cards by measured effect, worst first."""
        return self.call(calls.effects(limit=limit))

    def search_facts(self, request: FactSearchRequest) -> list[FactHit]:
        """Facts by keyword relevance."""
        return self.call(calls.search_facts(request))

    def write_fact(self, fact: FactIn) -> CardPublic:
        """Remember a fact (write scope)."""
        return self.call(calls.write_fact(fact))

    def forget_fact(self, fact_id: CardRef) -> CardPublic:
        """Forget a fact (write scope)."""
        return self.call(calls.forget_fact(fact_id))

    def review_queue(self, *, limit: int = 100) -> list[CardPublic]:
        """Cards waiting for a person (admin)."""
        return self.call(calls.review_queue(limit=limit))

    def approve(self, card_id: CardRef) -> CardPublic:
        """Approve a card in review (admin)."""
        return self.call(calls.approve(card_id))

    def reject(self, card_id: CardRef, request: RejectRequest) -> CardPublic:
        """Reject a card in review, with the reason (admin)."""
        return self.call(calls.reject(card_id, request))

    def ingest(self, records: Mapping[str, Any] | Sequence[Mapping[str, Any]]) -> IngestResult:
        """Hand in trajectories for the nightly run (write scope); stored once by key."""
        return self.call(calls.ingest(records))

    def export_traces(self, request: Mapping[str, Any]) -> TraceAnswer:
        """Hand in OpenTelemetry spans (OTLP/JSON); traces go in once their root span is."""
        return self.call(calls.export_traces(request))

    def namespace_show(self) -> NamespaceOut:
        """The key's namespace counts (admin)."""
        return self.call(calls.namespace_show())

    def namespace_delete(self) -> DeletionOut:
        """Delete the key's namespace and all it holds, the key included (admin)."""
        return self.call(calls.namespace_delete())

    def namespace_export(self, *, with_trajectories: bool = False) -> bytes:
        """The key's namespace as a JSON Lines export file (admin); the raw runs too if asked."""
        return self.call(calls.namespace_export(with_trajectories=with_trajectories))

    def namespace_import(self, export: bytes) -> ImportOut:
        """Store an export file in the key's namespace, all or nothing (admin); idempotent."""
        return self.call(calls.namespace_import(export))

    def namespace_retention(self) -> RetentionOut:
        """The key's namespace's retention policy and the nightly's last removal (admin)."""
        return self.call(calls.namespace_retention())

    def namespace_retention_set(self, request: RetentionIn) -> RetentionOut:
        """Set the key's namespace's own retention days, applied by the next night (admin)."""
        return self.call(calls.namespace_retention_set(request))
