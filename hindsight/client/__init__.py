"""A typed client for the Hindsight API, sync (`Client`) and async (`AsyncClient`), on httpx.

    from hindsight.client import Client, QueryRequest
    with Client("http://127.0.0.1:8765", api_key) as hs:
        hits = hs.query_cards(QueryRequest(task_state={"task_type": "deploy", "tool": "push"}))

Requests and answers are the API's own pydantic models; refusals raise the exception of their
`code` (errors.py); connect errors, 429 and 503 are retried (502/504 and read timeouts only for
idempotent operations), honouring Retry-After.
"""

from hindsight.client.aio import AsyncClient
from hindsight.client.calls import ROUTES, Call, Route
from hindsight.client.errors import (
    ChangedMeanwhile,
    Conflict,
    Forbidden,
    HindsightAPIError,
    InvalidRequest,
    NotFound,
    RateLimited,
    ServerError,
    TransportError,
    Unauthorized,
)
from hindsight.client.retry import RetryPolicy
from hindsight.client.sync import Client
from memory_core.facts.store import FactIn
from memory_core.serve.schemas import (
    CardIn,
    CheckActionRequest,
    FactSearchRequest,
    FeedbackRequest,
    OutcomeRequest,
    PinRequest,
    QueryRequest,
    RejectRequest,
)

__all__ = [
    "ROUTES",
    "AsyncClient",
    "Call",
    "CardIn",
    "ChangedMeanwhile",
    "CheckActionRequest",
    "Client",
    "Conflict",
    "FactIn",
    "FactSearchRequest",
    "FeedbackRequest",
    "Forbidden",
    "HindsightAPIError",
    "InvalidRequest",
    "NotFound",
    "OutcomeRequest",
    "PinRequest",
    "QueryRequest",
    "RateLimited",
    "RejectRequest",
    "RetryPolicy",
    "Route",
    "ServerError",
    "TransportError",
    "Unauthorized",
]
