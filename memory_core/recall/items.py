"""Memory items: every stored message step, with its date, speaker and neighbours."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import select
from sqlalchemy.engine import Engine
from sqlmodel import Session, col

from memory_core.models.trajectory import Trajectory
from memory_core.redact import redact

SESSION_GAP = timedelta(hours=6)  # turns further apart than this are not each other's context


@dataclass(frozen=True)
class MemoryItem:
    """One message as a searchable memory item."""

    trajectory_id: uuid.UUID
    trajectory_key: str
    step: int
    speaker: str
    text: str
    said_at: datetime | None = None
    turn_id: str | None = None

    def rendered(self) -> str:
        """What is searched: the date, the speaker and the words."""
        return f"{self.when()}{self.speaker}: {self.text}"

    def when(self) -> str:
        """The date and time of day as people write them: "[1:56 pm on 8 May, 2023] "."""
        t = self.said_at
        if t is None:
            return ""
        day = f"{t.day} {t:%B}, {t.year}"
        if (t.hour, t.minute) == (0, 0):
            return f"[{day}] "
        return f"[{t.hour % 12 or 12}:{t.minute:02d} {'am' if t.hour < 12 else 'pm'} on {day}] "


def load_items(*, engine: Engine, namespace: str) -> list[MemoryItem]:
    """Every message step of the namespace's trajectories, oldest trajectory first."""
    with Session(engine) as session:
        rows = session.execute(
            select(col(Trajectory.id), col(Trajectory.key), col(Trajectory.steps))
            .where(col(Trajectory.namespace) == namespace)
            .order_by(col(Trajectory.created_at), col(Trajectory.id))
        ).all()
    items: list[MemoryItem] = []
    for tid, key, steps in rows:
        for s in steps:
            if s.get("type") != "message" or not (s.get("text") or "").strip():
                continue
            ts = s.get("ts")
            items.append(
                MemoryItem(
                    trajectory_id=tid,
                    trajectory_key=key,
                    step=int(s.get("index", 0)),
                    speaker=str(s.get("speaker") or s.get("role") or ""),
                    text=redact(str(s["text"])),  # recall serves derived text only
                    said_at=datetime.fromisoformat(ts) if isinstance(ts, str) else None,
                    turn_id=s.get("turn_id"),
                )
            )
    return items


def are_neighbours(a: MemoryItem, b: MemoryItem) -> bool:
    """Whether two items are each other's context (same trajectory, close enough in time)."""
    if a.trajectory_id != b.trajectory_id:
        return False
    if a.said_at is None or b.said_at is None:
        return True
    return abs(a.said_at - b.said_at) < SESSION_GAP
