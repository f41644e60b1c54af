"""The nightly run's summary, as Prefect artifacts an operator reads on the run's page."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from prefect.artifacts import create_markdown_artifact, create_table_artifact

if TYPE_CHECKING:
    from flows.nightly import NightlySummary

SUMMARY_KEY = "nightly-summary"  # artifact keys: lowercase letters, digits and dashes
DEAD_LETTER_KEY = "nightly-dead-letters"


def summary_rows(summary: NightlySummary) -> list[dict[str, Any]]:
    """One row per number an operator looks at after a nightly run."""
    r, f, v, c, d = (
        summary.retrospect,
        summary.facts,
        summary.validation,
        summary.consolidation,
        summary.decay,
    )
    rows = [
        ("trajectories ingested", sum(i.stored for i in summary.ingested)),
        ("trajectories retrospected", r.trajectories),
        ("dead letters", r.dead_letters),
        ("deferred (token budget)", r.deferred),
        ("cards created", r.cards_created),
        ("evidence added", r.evidence_added),
        ("facts new", f.new),
        ("facts superseded", f.superseded),
        ("drafts validated", v.evaluated),
        ("cards activated", v.activated),
        ("cards to review", v.review),
        ("cards rejected", v.rejected),
        ("merges", c.merges),
        ("cards merged away", c.absorbed),
        ("cards superseded", c.superseded + c.facts_superseded),
        ("cards decayed", d.decayed),
        ("cards archived", d.archived_unused + d.archived_cap),
        ("LLM calls", r.llm_calls + f.llm_calls),
        ("tokens sent", r.tokens_sent),
        ("tokens received", r.tokens_received),
    ]
    return [{"metric": name, "value": value} for name, value in rows]


def publish_summary(summary: NightlySummary) -> None:
    """A table artifact with every count (key nightly-summary, so the Artifacts page keeps its
    history), and a markdown one only when something was dead-lettered (the alert hook)."""
    rows = summary_rows(summary)
    create_table_artifact(
        rows,
        key=SUMMARY_KEY,
        description="Hindsight nightly run: trajectories in, cards out, per stage.",
    )
    dead = summary.retrospect.dead_letters
    if dead:
        create_markdown_artifact(
            f"**{dead} trajectories were dead-lettered.** Their failed `llm-extract` task "
            "runs on this flow run's page carry the errors. After fixing the cause, "
            "re-drive them: run the `redrive-dead-letters` deployment, or "
            "`hindsight dead-letters redrive`.",
            key=DEAD_LETTER_KEY,
            description="Dead letters in this nightly run",
        )
