"""A namespace's history for retention tests: old and recent runs (chat format, through
ingest), a card whose evidence cites an old and a recent run, LLM answers, a backtest, a
waiting span, uses and logged queries, each old record carrying a marker string."""

from __future__ import annotations

import hashlib
import subprocess
import uuid
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

from sqlalchemy import Engine, update

from memory_core.db import session_scope
from memory_core.ingest.store import ingest
from memory_core.models import (
    CardBacktest,
    CardEvidence,
    CardUse,
    LLMAnswer,
    QueryLog,
    TraceSpan,
    Trajectory,
)
from memory_core.models.columns import utcnow
from memory_core.settings import Settings
from tests.helpers.serve import add_card

OLD = timedelta(days=100)
SIGNATURE = "lookup: order not found"


@dataclass
class History:
    """The ids of what was planted for one namespace."""

    namespace: str
    card: uuid.UUID
    cited: uuid.UUID  # old, cited by the card's evidence: kept as a summary
    plain: uuid.UUID  # old, cited by nothing, a dead letter: removed
    recent: uuid.UUID  # new, cited too: untouched


def _messages(text: str) -> list[dict]:
    call = {"id": "c1", "type": "function"}
    return [
        {"role": "user", "content": f"find order {text}"},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {**call, "function": {"name": "lookup", "arguments": f'{{"order_id": "{text}"}}'}}
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": f"Error: {text} order not found"},
    ]


def _evidence(card: uuid.UUID, run: uuid.UUID, text: str) -> CardEvidence:
    return CardEvidence(
        card_id=card,
        trajectory_id=run,
        step=0,
        condition={"tool": "lookup", "last_error": f"{text} earlier", "retry_count": 0},
        action={"tool": "lookup", "args": {"order_id": text}},
        result={
            "error": f"{text} order not found",
            "error_signature": SIGNATURE,
            "outcome": "failure",
            "role": "supports",
            "confirms": True,
            "succeeded_with": {"tool": "lookup", "args": {"order_id": text}, "changed": text},
        },
    )


def plant_history(engine: Engine, *, namespace: str, marker: str, recent: str) -> History:
    """Three runs (two of them `OLD`), a card citing one old and the recent run, and the rows
    that hang on them: old ones carry `marker`, recent ones `recent`."""
    texts = {f"{namespace}-old-cited": marker, f"{namespace}-old-plain": marker}
    texts[f"{namespace}-new"] = recent
    report = ingest(
        engine=engine,
        records=[(k, {"id": k, "messages": _messages(t)}) for k, t in texts.items()],
        namespace=namespace,
        task_type="orders",
    )
    assert report.stored == 3, report
    then = utcnow() - OLD
    with session_scope(engine) as s:
        runs = {t.key: t.id for t in s.query(Trajectory).filter_by(namespace=namespace)}
        cited, plain, new = (runs[k] for k in texts)
        s.execute(
            update(Trajectory).where(Trajectory.id.in_([cited, plain])).values(created_at=then)
        )  # type: ignore[attr-defined]
        s.execute(
            update(Trajectory)
            .where(Trajectory.id == plain)  # type: ignore[arg-type]
            .values(status="dead_letter", error=f"{marker} failed", extra={"why": marker})
        )
    card = add_card(
        engine, namespace=namespace, scenario="lookup of an unknown order", tool="lookup"
    )
    with session_scope(engine) as s:
        s.add(_evidence(card.card_id, cited, marker))
        s.add(_evidence(card.card_id, new, recent))
        for run, text in ((cited, marker), (plain, marker), (new, recent)):
            key = hashlib.sha256(f"{namespace}{run}".encode()).hexdigest()
            s.add(
                LLMAnswer(
                    cache_key=key,
                    trajectory_id=run,
                    namespace=namespace,
                    prompt_id="p",
                    model="m",
                    answer={"t": text},
                )
            )
        for prompt, text in (("contrast.v1", marker), ("judge.v1", recent)):
            key = hashlib.sha256(f"{namespace}{prompt}".encode()).hexdigest()
            s.add(
                LLMAnswer(
                    cache_key=key,
                    namespace=namespace,
                    prompt_id=prompt,
                    model="m",
                    answer={"t": text},
                )
            )
        s.add(
            CardBacktest(
                card_id=card.card_id,
                namespace=namespace,
                fired=2,
                runs=[
                    {
                        "trajectory_id": str(plain),
                        "run": f"{namespace}-old-plain",
                        "call": 0,
                        "tool": "lookup",
                        "right": True,
                        "error": f"{marker} order not found",
                    },
                    {
                        "trajectory_id": str(new),
                        "run": f"{namespace}-new",
                        "call": 0,
                        "tool": "lookup",
                        "right": True,
                        "error": f"{recent} order not found",
                    },
                ],
            )
        )
        for at, text in ((then, marker), (utcnow(), recent)):
            query = uuid.uuid4()
            s.add(
                TraceSpan(
                    namespace=namespace,
                    trace_id=query.hex,
                    span_id=query.hex[:16],
                    span={"name": text},
                    received_at=at,
                )
            )
            s.add(
                CardUse(
                    card_id=card.card_id,
                    namespace=namespace,
                    context={"t": text},
                    arm="served",
                    query_id=query,
                    used_at=at,
                )
            )
            s.add(
                QueryLog(
                    query_id=query,
                    namespace=namespace,
                    state={"t": text},
                    served=[[str(card.card_id), 0.5]],
                    asked_at=at,
                )
            )
    return History(namespace, card.card_id, cited, plain, new)


def occurrences(settings: Settings, needle: str) -> int:
    """The needle's occurrences in every file under the data directory and, on PostgreSQL, in a
    dump of the database's rows."""
    found = 0
    for path in Path(settings.data_dir).rglob("*"):
        if path.is_file():
            found += path.read_bytes().count(needle.encode())
    if settings.database_url:
        url = settings.database_url.replace("postgresql+psycopg://", "postgresql://")
        dump = subprocess.run(
            ["pg_dump", "--data-only", url], check=True, capture_output=True
        ).stdout
        found += dump.count(needle.encode())
    return found
