"""The ceiling for bench/scale.py: an empty FastAPI endpoint on the API's route, answering a
fixed body of the API's response size ($BENCH_BODY_BYTES), on the same uvicorn stack."""

from __future__ import annotations

import os

from fastapi import FastAPI, Request
from fastapi.responses import Response

BODY = b'{"cards":[' + b"x" * max(0, int(os.environ.get("BENCH_BODY_BYTES", "3000")) - 12) + b"]}"
app = FastAPI()


@app.post("/v1/cards/query")
async def query(request: Request) -> Response:
    """Read the body, answer the fixed bytes."""
    await request.body()
    return Response(BODY, media_type="application/json")


@app.get("/healthz")
async def healthz() -> dict[str, str]:
    """Up."""
    return {"status": "ok"}
