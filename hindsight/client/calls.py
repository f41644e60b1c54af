"""Every API operation as a request description, shared by the sync and the async client.

ROUTES names each operation after the route's OpenAPI operation id; a test holds it equal to
the app's schema, so a new route without a client operation fails the suite."""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from pydantic import TypeAdapter

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


@dataclass(frozen=True)
class Route:
    """An operation's method and path; idempotent: safe to send again after a lost answer."""

    method: str
    path: str
    idempotent: bool


# idempotent: reads, and writes the server keys (a trajectory by id or content hash, a pin's
# state, a review decision that refuses a second time). A feedback or a new card is not: a
# 502/504 after it may have been applied, so only refusals made before it ran are retried.
ROUTES: dict[str, Route] = {
    "healthz": Route("GET", "/healthz", True),
    "readyz": Route("GET", "/readyz", True),
    "query_cards": Route("POST", "/v1/cards/query", False),  # records a use
    "check_action": Route("POST", "/v1/cards/check", False),  # records a use
    "list_cards": Route("GET", "/v1/cards", True),
    "store_card": Route("POST", "/v1/cards", False),
    "recent_cards": Route("GET", "/v1/cards/recent", True),
    "get_card": Route("GET", "/v1/cards/{card_id}", True),
    "card_history": Route("GET", "/v1/cards/{card_id}/history", True),
    "feedback": Route("POST", "/v1/cards/{card_id}/feedback", False),
    "report_outcome": Route("POST", "/v1/uses/{query_id}/outcome", True),
    "pin_card": Route("POST", "/v1/cards/{card_id}/pin", True),
    "effects": Route("GET", "/v1/effects", True),
    "search_facts": Route("POST", "/v1/facts/search", True),
    "write_fact": Route("POST", "/v1/facts", False),
    "forget_fact": Route("DELETE", "/v1/facts/{fact_id}", True),
    "review_queue": Route("GET", "/v1/review", True),
    "approve": Route("POST", "/v1/review/{card_id}/approve", True),
    "reject": Route("POST", "/v1/review/{card_id}/reject", True),
    "ingest": Route("POST", "/v1/trajectories", True),
    "export_traces": Route("POST", "/v1/traces", True),  # keyed by trace (and span)
    "namespace_show": Route("GET", "/v1/namespace", True),
    "namespace_delete": Route("DELETE", "/v1/namespace", True),
    "namespace_export": Route("GET", "/v1/namespace/export", True),
    "namespace_import": Route("POST", "/v1/namespace/import", True),  # keyed by ids and keys
    "namespace_retention": Route("GET", "/v1/namespace/retention", True),
    "namespace_retention_set": Route("PUT", "/v1/namespace/retention", True),
}


@dataclass(frozen=True)
class Call(Generic[T]):
    """One request to make and how to read its answer."""

    name: str
    answer: TypeAdapter[T]
    path_params: Mapping[str, str] = field(default_factory=dict)
    params: Sequence[tuple[str, str]] = ()
    json: Any = None
    content: bytes | None = None
    headers: Mapping[str, str] = field(default_factory=dict)
    raw: bool = False  # the answer is the body's bytes as sent (an export file), not JSON

    @property
    def route(self) -> Route:
        """The operation's route."""
        return ROUTES[self.name]

    @property
    def path(self) -> str:
        """The path with its parameters filled in."""
        return self.route.path.format(**self.path_params)


_CARD = TypeAdapter(CardPublic)
_CARDS = TypeAdapter(list[CardPublic])
_DICT: TypeAdapter[dict[str, Any]] = TypeAdapter(dict[str, Any])


def _body(model: Any) -> Any:
    """A request model as JSON-ready data (defaults left out: the server applies its own)."""
    return model.model_dump(mode="json", exclude_unset=True)


def healthz() -> Call[dict[str, Any]]:
    """The process is up."""
    return Call("healthz", _DICT)


def readyz() -> Call[dict[str, Any]]:
    """The database answers and uses are being written."""
    return Call("readyz", _DICT)


def query_cards(request: QueryRequest) -> Call[QueryResult]:
    """Cards whose preconditions hold on a task state, best first."""
    return Call("query_cards", TypeAdapter(QueryResult), json=_body(request))


def check_action(request: CheckActionRequest) -> Call[CheckActionResult]:
    """Before a tool call: the warnings of the cards keyed on it."""
    return Call("check_action", TypeAdapter(CheckActionResult), json=_body(request))


def list_cards(
    *,
    status: Sequence[str] = (),
    kind: str | None = None,
    q: str | None = None,
    min_confidence: float | None = None,
    limit: int = 50,
    offset: int = 0,
) -> Call[list[CardPublic]]:
    """Cards of the key's namespace, most recently updated first."""
    params = [("status", s) for s in status]
    params += [(k, str(v)) for k, v in (("kind", kind), ("q", q)) if v is not None]
    if min_confidence is not None:
        params.append(("min_confidence", str(min_confidence)))
    params += [("limit", str(limit)), ("offset", str(offset))]
    return Call("list_cards", _CARDS, params=params)


def store_card(card: CardIn) -> Call[CardPublic]:
    """Store a card (write scope)."""
    return Call("store_card", _CARD, json=_body(card))


def recent_cards(*, limit: int = 10) -> Call[list[CardPublic]]:
    """The most recently changed active cards."""
    return Call("recent_cards", _CARDS, params=[("limit", str(limit))])


def get_card(card_id: uuid.UUID | str) -> Call[CardPublic]:
    """One card with its evidence."""
    return Call("get_card", _CARD, path_params={"card_id": str(card_id)})


def card_history(card_id: uuid.UUID | str) -> Call[list[HistoryEntry]]:
    """Every version of a card."""
    adapter = TypeAdapter(list[HistoryEntry])
    return Call("card_history", adapter, path_params={"card_id": str(card_id)})


def feedback(card_id: uuid.UUID | str, request: FeedbackRequest) -> Call[Feedback]:
    """The outcome of a task that used a card."""
    ids = {"card_id": str(card_id)}
    return Call("feedback", TypeAdapter(Feedback), path_params=ids, json=_body(request))


def report_outcome(query_id: uuid.UUID | str, request: OutcomeRequest) -> Call[QueryOutcome]:
    """The outcome of the run that made a query, for every card it served or withheld."""
    ids = {"query_id": str(query_id)}
    return Call("report_outcome", TypeAdapter(QueryOutcome), path_params=ids, json=_body(request))


def pin_card(card_id: uuid.UUID | str, request: PinRequest) -> Call[CardPublic]:
    """Pin or unpin a card (admin)."""
    return Call("pin_card", _CARD, path_params={"card_id": str(card_id)}, json=_body(request))


def effects(*, limit: int = 200) -> Call[EffectsReport]:
    """Cards by measured effect, worst first."""
    return Call("effects", TypeAdapter(EffectsReport), params=[("limit", str(limit))])


def search_facts(request: FactSearchRequest) -> Call[list[FactHit]]:
    """Facts by keyword relevance."""
    return Call("search_facts", TypeAdapter(list[FactHit]), json=_body(request))


def write_fact(fact: FactIn) -> Call[CardPublic]:
    """Remember a fact (write scope)."""
    return Call("write_fact", _CARD, json=_body(fact))


def forget_fact(fact_id: uuid.UUID | str) -> Call[CardPublic]:
    """Forget a fact (write scope); it stays in history."""
    return Call("forget_fact", _CARD, path_params={"fact_id": str(fact_id)})


def review_queue(*, limit: int = 100) -> Call[list[CardPublic]]:
    """Cards waiting for a person (admin)."""
    return Call("review_queue", _CARDS, params=[("limit", str(limit))])


def approve(card_id: uuid.UUID | str) -> Call[CardPublic]:
    """Approve a card in review (admin)."""
    return Call("approve", _CARD, path_params={"card_id": str(card_id)})


def reject(card_id: uuid.UUID | str, request: RejectRequest) -> Call[CardPublic]:
    """Reject a card in review, with the reason (admin)."""
    return Call("reject", _CARD, path_params={"card_id": str(card_id)}, json=_body(request))


def ingest(records: Mapping[str, Any] | Sequence[Mapping[str, Any]]) -> Call[IngestResult]:
    """Hand in trajectories (chat messages or step lists) for the nightly run."""
    body = dict(records) if isinstance(records, Mapping) else [dict(r) for r in records]
    return Call("ingest", TypeAdapter(IngestResult), json=body)


def export_traces(request: Mapping[str, Any]) -> Call[TraceAnswer]:
    """Hand in OpenTelemetry spans (an OTLP/JSON ExportTraceServiceRequest)."""
    return Call("export_traces", TypeAdapter(TraceAnswer), json=dict(request))


def namespace_show() -> Call[NamespaceOut]:
    """The key's namespace counts (admin)."""
    return Call("namespace_show", TypeAdapter(NamespaceOut))


def namespace_delete() -> Call[DeletionOut]:
    """Delete the key's namespace and all it holds (admin)."""
    return Call("namespace_delete", TypeAdapter(DeletionOut))


def namespace_export(*, with_trajectories: bool = False) -> Call[bytes]:
    """The key's namespace as a JSON Lines export file (admin)."""
    params = [("with_trajectories", "true")] if with_trajectories else []
    return Call("namespace_export", TypeAdapter(bytes), params=params, raw=True)


def namespace_import(export: bytes) -> Call[ImportOut]:
    """Store an export file in the key's namespace, all or nothing; again changes nothing."""
    return Call(
        "namespace_import",
        TypeAdapter(ImportOut),
        content=export,
        headers={"content-type": "application/x-ndjson"},
    )


def namespace_retention() -> Call[RetentionOut]:
    """The key's namespace's retention policy and last removal (admin)."""
    return Call("namespace_retention", TypeAdapter(RetentionOut))


def namespace_retention_set(request: RetentionIn) -> Call[RetentionOut]:
    """Set the key's namespace's own retention days (admin)."""
    return Call("namespace_retention_set", TypeAdapter(RetentionOut), json=_body(request))
