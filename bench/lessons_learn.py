"""Learning for bench/lessons.py: the product's nightly stages on some runs, blind to answers.

With `nights` > 1 the runs arrive as a namespace grows: the tasks are dealt to the nights in
turn (every trial of a task the same night), and each night ingests its runs and runs the
stages, the serving gate last, so the gate's backtest on a night's runs judges the cards of
the nights before.
"""

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


def task_of(record: dict[str, Any], key: str) -> str:
    """A run's task (`task_id` at the top level or in `metadata`; else the run is its own)."""
    task = record.get("task_id", (record.get("metadata") or {}).get("task_id"))
    return str(task) if task is not None else key


def nightly_batches(
    records: list[tuple[str, dict[str, Any]]], nights: int
) -> list[list[tuple[str, dict[str, Any]]]]:
    """The runs of each night: the sorted tasks dealt to the nights in turn."""
    tasks = sorted({task_of(r, n) for n, r in records})
    night = {t: i % nights for i, t in enumerate(tasks)}
    out: list[list[tuple[str, dict[str, Any]]]] = [[] for _ in range(min(nights, len(tasks)))]
    for n, r in records:
        out[night[task_of(r, n)]].append((n, r))
    return out


def _learn(
    records: list[tuple[str, dict[str, Any]]],
    data_dir: Path,
    *,
    llm_url: str | None = None,
    cost: dict[str, int] | None = None,
    nights: int = 1,
) -> Any:
    """With llm_url (a scripted server): the rules, then the LLM path (per-run prompts and
    the contrast prompt), as HINDSIGHT_LLM__MODE=after_rules does; `cost` adds up its calls."""
    from memory_core import db
    from memory_core.ingest.store import ingest
    from memory_core.retrospect.factory import build_extractor
    from memory_core.retrospect.rule_extractor import RuleExtractor
    from memory_core.settings import Settings

    settings = Settings(data_dir=data_dir, embedding={"provider": "none"})
    if llm_url:
        settings = Settings(
            data_dir=data_dir,
            embedding={"provider": "none"},
            llm={"base_url": llm_url, "model": "scripted-1"},
        )
    db.upgrade(settings)
    engine = db.make_engine(settings)
    extractor = build_extractor(settings, engine) if llm_url else RuleExtractor()
    for batch in nightly_batches(records, nights):
        blind = [(n, {k: v for k, v in r.items() if k != "info"}) for n, r in batch]
        ingest(engine=engine, records=blind, namespace="bench", task_type="default")
        _night(engine, settings, extractor, cost)
    return engine


def _night(engine: Any, settings: Any, extractor: Any, cost: dict[str, int] | None) -> None:
    """The nightly's stages over what is stored: retrospect, validate, consolidate, the gate."""
    from memory_core.backtest.stage import run_gate
    from memory_core.consolidate.stage import consolidate
    from memory_core.retrospect.claims import worker_id
    from memory_core.retrospect.stage import retrospect_once
    from memory_core.validate.stage import validate_drafts

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
