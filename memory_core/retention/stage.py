"""The nightly's retention stage over every namespace that holds runs, uses or a policy, each
under its lease, and what it removed, namespace by namespace."""

from __future__ import annotations

from collections.abc import Callable

from pydantic import BaseModel
from sqlalchemy import Engine, text

from memory_core.leases import each_leased


class RetentionReport(BaseModel):
    """What retention removed, by namespace and kind; the namespaces another run held."""

    removed: dict[str, dict[str, int]] = {}
    elsewhere: list[str] = []

    def totals(self) -> dict[str, int]:
        """Removed by kind, over the namespaces."""
        out: dict[str, int] = {}
        for counts in self.removed.values():
            for kind, n in counts.items():
                out[kind] = out.get(kind, 0) + n
        return dict(sorted(out.items()))

    def text(self) -> str:
        """One line a namespace that lost anything: "ns: 3 trajectories, 2 uses" ("" if none)."""
        return "; ".join(
            f"{ns}: {removed_text(counts)}" for ns, counts in sorted(self.removed.items()) if counts
        )


def removed_text(counts: dict[str, int]) -> str:
    """ "3 trajectories, 2 uses" ("nothing" when empty)."""
    return ", ".join(f"{n} {kind.replace('_', ' ')}" for kind, n in counts.items()) or "nothing"


def retention_namespaces(engine: Engine) -> list[str]:
    """Namespaces holding runs, waiting spans, uses or logged queries, or a policy of their own."""
    tables = ("trajectory", "trace_span", "card_use", "query_log", "namespace_retention")
    union = " UNION ".join(f"SELECT DISTINCT namespace FROM {t}" for t in tables)
    with engine.connect() as conn:
        return sorted(n for n in conn.execute(text(union)).scalars() if n is not None)


def retention_all(
    *,
    engine: Engine,
    namespace: str | None,
    part: Callable[[str], dict[str, int]],
) -> RetentionReport:
    """Apply retention to one namespace or every one, each under its lease: the flow's tasks
    and the in-process bodies alike."""
    report = RetentionReport()
    names = [namespace] if namespace else retention_namespaces(engine)

    def one(ns: str) -> None:
        report.removed[ns] = part(ns)

    _, report.elsewhere = each_leased(engine=engine, stage="retention", namespaces=names, run=one)
    return report
