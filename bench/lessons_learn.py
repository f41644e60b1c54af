"""Learning for bench/lessons.py: the product's nightly stages on some runs, blind to answers."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import timedelta
from pathlib import Path
from typing import Any


@contextmanager
def scripted_server() -> Iterator[tuple[str, Callable[[], int]]]:
    """(url, requests so far) of the tests' scripted OpenAI-compatible server, in process."""
    from tests.helpers import fake_model
    from tests.helpers.scripted_llm import ScriptedLLM

    with ScriptedLLM(fake_model.respond) as server:
        yield server.url, lambda: len(server.requests)


def _learn(
    records: list[tuple[str, dict[str, Any]]],
    data_dir: Path,
    *,
    llm_url: str | None = None,
    cost: dict[str, int] | None = None,
) -> Any:
    """With llm_url (a scripted server): the rules, then the LLM path (per-run prompts and
    the contrast prompt), as HINDSIGHT_LLM__MODE=after_rules does; `cost` adds up its calls."""
    from memory_core import db
    from memory_core.backtest.stage import run_gate
    from memory_core.consolidate.stage import consolidate
    from memory_core.ingest.store import ingest
    from memory_core.retrospect.claims import worker_id
    from memory_core.retrospect.factory import build_extractor
    from memory_core.retrospect.rule_extractor import RuleExtractor
    from memory_core.retrospect.stage import retrospect_once
    from memory_core.settings import Settings
    from memory_core.validate.stage import validate_drafts

    settings = Settings(data_dir=data_dir, embedding={"provider": "none"})
    if llm_url:
        settings = Settings(
            data_dir=data_dir,
            embedding={"provider": "none"},
            llm={"base_url": llm_url, "model": "scripted-1"},
        )
    db.upgrade(settings)
    engine = db.make_engine(settings)
    blind = [(n, {k: v for k, v in r.items() if k != "info"}) for n, r in records]
    ingest(engine=engine, records=blind, namespace="bench", task_type="default")
    extractor = build_extractor(settings, engine) if llm_url else RuleExtractor()
    while True:
        done = retrospect_once(
            engine=engine,
            extractor=extractor,
            worker=worker_id(),
            batch_size=200,
            lease=timedelta(seconds=300),
        )
        if not done.claimed:
            break
        if cost is not None:
            for name in ("llm_calls", "tokens_sent", "tokens_received", "dead_letters"):
                cost[name] = cost.get(name, 0) + getattr(done, name)
    validate_drafts(engine=engine, reports_dir=None, review_below=settings.review.below)
    consolidate(engine=engine, namespace="bench", rules=settings.consolidate)
    run_gate(engine=engine, rules=settings.gate, namespace="bench")  # as the nightly serves
    return engine


def _snippet(step: Any) -> str:
    result = step.error or step.observation or ""
    return f"{step.tool} {json.dumps(step.args or {}, sort_keys=True)} -> {result[:300]}"


def _state_text(state: dict[str, Any], args: dict[str, Any]) -> str:
    text = f"{state['tool']} {json.dumps(args, sort_keys=True)}"
    if state.get("last_tool"):
        text += f" after {state['last_tool']}"
        if state.get("last_error"):
            text += f" failed: {state['last_error']}"
    return text
