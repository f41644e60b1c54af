"""One namespace's records of every kind, each holding a marker string, for deletion tests."""

from __future__ import annotations

import hashlib
import uuid
from dataclasses import dataclass

import numpy as np
from sqlalchemy import Engine

from memory_core.db import session_scope
from memory_core.index.base import IndexPoint
from memory_core.index.edge import EdgeIndex
from memory_core.models import (
    CardArchive,
    CardBacktest,
    CardEmbedding,
    CardEvidence,
    CardUse,
    CardVersion,
    LLMAnswer,
    QueryLog,
    TraceSpan,
    Trajectory,
    ValidationRun,
)
from memory_core.recall.vectors import vector_cache_path
from memory_core.retention.policy import set_policy
from memory_core.serve.keys import create_key
from memory_core.serve.snapshot_file import file_name, write
from memory_core.settings import Settings
from memory_core.validate.stage import validate_drafts
from tests.helpers.serve import add_card

DIM = 4


@dataclass
class Planted:
    """What was stored for one namespace."""

    namespace: str
    cards: list[uuid.UUID]
    trajectories: list[uuid.UUID]
    rejected: uuid.UUID  # the draft validation rejected: its report names it by id


def plant(
    engine: Engine, settings: Settings, *, namespace: str, marker: str, n: int = 2
) -> Planted:
    """n cards, n facts, n trajectories (one dead letter) and every row that hangs on them, an
    LLM answer about cards, a rejected draft and its validation report, an index point per
    card, a key, a retention policy, a snapshot file and a cache of item vectors: each carries
    `marker` in its text (the vectors' keys)."""
    cards, runs = [], []
    for i in range(n):
        exp = add_card(engine, namespace=namespace, scenario=f"{marker} scenario {i}")
        fact = add_card(engine, namespace=namespace, scenario=f"{marker} fact {i}", kind="fact")
        cards += [exp.card_id, fact.card_id]
        run = Trajectory(
            namespace=namespace,
            key=f"{marker}-run-{i}",
            content_hash=hashlib.sha256(f"{namespace}{i}".encode()).hexdigest(),
            source_format="steps",
            task_type=f"{marker} task",
            steps=[{"tool": "search", "output": f"{marker} output"}],
            status="dead_letter" if i == 0 else "done",
            error=f"{marker} failed" if i == 0 else None,
        )
        runs.append(run.id)
        with session_scope(engine) as s:
            s.add(run)
            s.flush()
            for c in (exp.card_id, fact.card_id):
                s.add(
                    CardVersion(
                        card_id=c, version=2, snapshot={"s": marker}, reason=marker, actor="t"
                    )
                )
                s.add(
                    CardEvidence(card_id=c, trajectory_id=run.id, step=0, condition={"m": marker})
                )
                query = uuid.uuid4()
                s.add(
                    CardUse(
                        card_id=c,
                        namespace=namespace,
                        context={"m": marker},
                        arm="served",
                        query_id=query,
                    )
                )
                s.add(
                    QueryLog(
                        query_id=query,
                        namespace=namespace,
                        state={"m": marker},
                        served=[[str(c), 0.5]],
                    )
                )
                s.add(
                    CardArchive(
                        card_id=c,
                        namespace=namespace,
                        run_id=uuid.uuid4(),
                        reason="unused",
                        detail=marker,
                        confidence=0.5,
                    )
                )
                s.add(
                    CardEmbedding(
                        card_id=c, model="m", text_hash=marker[:64], dim=DIM, vector=marker.encode()
                    )
                )
            s.add(CardBacktest(card_id=exp.card_id, namespace=namespace, reason=marker))
            s.add(
                LLMAnswer(
                    cache_key=hashlib.sha256(f"{namespace}{i}".encode()).hexdigest(),
                    trajectory_id=run.id,
                    prompt_id="p",
                    model="m",
                    answer={"m": marker},
                )
            )
            s.add(ValidationRun(namespace=namespace, extra={"m": marker}))
            s.add(  # a span the OTLP receiver holds for its trace's root
                TraceSpan(
                    namespace=namespace,
                    trace_id=hashlib.sha256(f"{namespace}{i}".encode()).hexdigest()[:32],
                    span_id=f"{i + 1:016x}",
                    span={"name": f"{marker} span"},
                )
            )
    with session_scope(engine) as s:  # an answer about cards: it names no trajectory
        s.add(
            LLMAnswer(
                cache_key=hashlib.sha256(f"{namespace} pair".encode()).hexdigest(),
                namespace=namespace,
                prompt_id="pair",
                model="m",
                answer={"m": marker},
            )
        )
    # a draft whose tool the registry refuses: the validation report lists its id
    draft = add_card(
        engine, namespace=namespace, scenario=f"{marker} draft", tool=marker, status="draft"
    )
    validate_drafts(
        engine=engine,
        reports_dir=settings.reports_dir,
        namespace=namespace,
        registry=frozenset({"search"}),
    )
    vectors = vector_cache_path(data_dir=settings.data_dir, namespace=namespace)
    vectors.parent.mkdir(parents=True, exist_ok=True)
    np.savez(vectors, **{marker: np.ones(DIM, dtype=np.float32)})  # type: ignore[arg-type]
    create_key(engine=engine, namespace=namespace, scopes=["admin"], name=marker)
    set_policy(engine=engine, namespace=namespace, actor=marker, trajectories_days=365)
    index = EdgeIndex(path=settings.data_dir / "index", dim=DIM)
    try:
        index.upsert(
            [
                IndexPoint(
                    card_id=c,
                    vector=[1.0, float(j), 0.5, 0.25],
                    namespace=namespace,
                    kind="experience",
                    model="m",
                )
                for j, c in enumerate(cards)
            ]
        )
    finally:
        index.close()
    write(
        settings.data_dir / "snapshots" / file_name(namespace),
        {"namespace": namespace},
        [marker.encode()],
    )
    return Planted(namespace, cards, runs, draft.card_id)
