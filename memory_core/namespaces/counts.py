"""Every namespace the store knows, with its cards by status, facts, trajectories and keys."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

from sqlalchemy import Engine, text

from memory_core.models.trajectory import TrajectoryStatus


@dataclass
class NamespaceCounts:
    """What one namespace holds."""

    namespace: str
    cards: dict[str, int] = field(default_factory=dict)  # experience cards by status
    facts: dict[str, int] = field(default_factory=dict)  # facts by status
    trajectories: int = 0
    dead_letters: int = 0
    keys: int = 0  # keys not revoked

    @property
    def total(self) -> int:
        """Rows counted here, all kinds."""
        return sum(self.cards.values()) + sum(self.facts.values()) + self.trajectories + self.keys


def namespace_counts(engine: Engine, namespace: str | None = None) -> list[NamespaceCounts]:
    """The counts of each namespace (or of one), by name."""
    where = "WHERE namespace = :ns" if namespace is not None else ""
    params = {"ns": namespace}
    out: dict[str, NamespaceCounts] = defaultdict(lambda: NamespaceCounts(""))
    with engine.connect() as conn:
        for ns, kind, status, n in conn.execute(
            text(
                f"SELECT namespace, kind, status, COUNT(*) FROM card {where} "
                "GROUP BY namespace, kind, status"
            ),
            params,
        ):
            c = out[ns]
            (c.facts if kind == "fact" else c.cards)[status] = int(n)
        for ns, status, n in conn.execute(
            text(
                f"SELECT namespace, status, COUNT(*) FROM trajectory {where} "
                "GROUP BY namespace, status"
            ),
            params,
        ):
            out[ns].trajectories += int(n)
            if status == TrajectoryStatus.dead_letter.value:
                out[ns].dead_letters += int(n)
        key_where = f"{where} {'AND' if where else 'WHERE'} revoked_at IS NULL"
        for ns, n in conn.execute(
            text(f"SELECT namespace, COUNT(*) FROM api_key {key_where} GROUP BY namespace"),
            params,
        ):
            out[ns].keys = int(n)
    for ns, c in out.items():
        c.namespace = ns
    return [out[ns] for ns in sorted(out)]
