"""The API's routes, one router per resource; `create_app` includes them in this order."""

from __future__ import annotations

from fastapi import APIRouter

from memory_api.responses import document_answers
from memory_api.routes import (
    cards,
    effects,
    facts,
    health,
    namespaces,
    review,
    traces,
    trajectories,
    uses,
)

# health first, then /v1/cards/recent before /v1/cards/{card_id} (cards.py keeps that order)
ROUTERS: tuple[APIRouter, ...] = (
    health.router,
    cards.router,
    uses.router,
    effects.router,
    facts.router,
    review.router,
    trajectories.router,
    traces.router,
    namespaces.router,
)
for _router in ROUTERS:
    document_answers(_router)  # every error answer in the OpenAPI schema
