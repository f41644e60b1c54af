"""The nightly leaves the vector index holding exactly the served cards, also when the serving
gate (after consolidate) holds lessons back: `hindsight index check` finds no drift after it.
SQLite and PostgreSQL."""

from __future__ import annotations

from flows.nightly import nightly
from flows.params import NightlyParams
from memory_core.index.factory import open_index
from memory_core.index.sync import check_index, index_model
from tasks.plain_consolidate import embedder_for
from tests.helpers.data import REPO


def test_the_index_holds_the_served_cards_after_the_gate(flow_env, engine) -> None:
    summary = nightly(NightlyParams(input=[str(REPO / "examples")]))
    assert not summary.outcome.failures
    embedder = embedder_for(flow_env)
    assert embedder is not None
    model, dim = index_model(engine=engine, embedder=embedder)
    index = open_index(flow_env, dim=dim)
    try:
        drift = check_index(engine=engine, index=index, model=model)
    finally:
        index.close()
    assert drift.expected > 0
    assert (drift.missing, drift.stale) == ([], [])
