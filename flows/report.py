"""The nightly run's summary, as Prefect artifacts an operator reads on the run's page."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any

from prefect.artifacts import create_markdown_artifact, create_table_artifact

from flows.redacted import for_ui, rows_for_ui
from flows.summary import NightlySummary

SUMMARY_KEY = "nightly-summary"  # artifact keys: lowercase letters, digits and dashes
DEAD_LETTER_KEY = "nightly-dead-letters"
REJECTIONS_KEY = "nightly-rejections"


def summary_rows(summary: NightlySummary) -> list[dict[str, Any]]:
    """One row per number an operator looks at after a nightly run."""
    r, f, v, c, d, o = (
        summary.retrospect,
        summary.facts,
        summary.validation,
        summary.consolidation,
        summary.decay,
        summary.outcome,
    )
    t = summary.retention.totals()
    rows = [
        ("trajectories ingested", sum(i.stored for i in summary.ingested)),
        ("trajectories retrospected", r.trajectories),
        ("dead letters", len(o.dead_letters)),
        ("rejections (answers and drafts wrong by content, not parked)", len(o.rejections)),
        ("stage failures", len(o.failures)),
        ("re-driven by this retry", o.redriven),
        ("recovered by this retry", o.recovered),
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
        ("merges / supersessions deferred (cards changed meanwhile)", c.deferred),
        ("deferred, by survivor card", named_cards(c.deferred_ids, c.deferred)),
        ("cards decayed", d.decayed),
        ("cards archived", d.archived_unused + d.archived_cap),
        ("cards skipped by decay (changed meanwhile)", d.skipped),
        ("skipped by decay, cards", named_cards(d.skipped_ids, d.skipped)),
        ("trajectories removed by retention", t.get("trajectories", 0)),
        ("trajectories kept as summaries (their text removed)", t.get("summarized", 0)),
        ("uses and queries removed by retention", t.get("uses", 0) + t.get("queries", 0)),
        ("removed by retention, by namespace", summary.retention.text()),
        ("LLM calls", r.llm_calls + f.llm_calls),
        ("LLM calls failed", r.llm_failed_calls + len(f.llm_failed)),
        ("LLM failures, by error", failure_text(r.llm_failures, f.llm_failed)),
        ("tokens sent", r.tokens_sent),
        ("tokens received", r.tokens_received),
    ]
    return [{"metric": name, "value": value} for name, value in rows]


def failure_text(by_error: dict[str, int], facts_failed: list[str], shown: int = 5) -> str:
    """The commonest reasons LLM calls failed, with how many calls each ("" when none)."""
    counts = dict(by_error)
    for line in facts_failed:  # "key: error": the facts stage's parked runs, one call each
        why = "facts: " + for_ui(line.split(": ", 1)[-1].splitlines()[0])[:80]
        counts[why] = counts.get(why, 0) + 1
    top = sorted(counts.items(), key=lambda kv: -kv[1])
    text = "; ".join(f"{n} x {why}" for why, n in top[:shown])
    return text + (f"; and {len(top) - shown} more reasons" if len(top) > shown else "")


def named_cards(ids: Sequence[uuid.UUID], total: int, shown: int = 10) -> str:
    """The first few cards by 8-character id prefix, then how many more (of total)."""
    names = ", ".join(str(i)[:8] for i in ids[:shown])
    more = total - min(len(ids), shown)
    if more > 0:
        return f"{names} and {more} more" if names else f"{more} cards"
    return names


def publish_summary(summary: NightlySummary) -> None:
    """A table artifact with every count (key nightly-summary, so the Artifacts page keeps its
    history), and a markdown one only when something was dead-lettered (the alert hook)."""
    rows = rows_for_ui(summary_rows(summary))  # failure reasons quote errors and keys
    create_table_artifact(
        rows,
        key=SUMMARY_KEY,
        description="Hindsight nightly run: trajectories in, cards out, per stage.",
    )
    o = summary.outcome
    if o.dead_letters or o.failures:
        create_markdown_artifact(
            for_ui(dead_letter_text(o.dead_letters, o.failures)),
            key=DEAD_LETTER_KEY,
            description="Dead letters and failures in this nightly run",
        )
    if o.rejections:
        create_markdown_artifact(
            for_ui(rejection_text(o.rejections)),
            key=REJECTIONS_KEY,
            description="Answers and drafts rejected for their content in this nightly run",
        )


def rejection_text(rejections: list[str], shown: int = 50) -> str:
    """The answers and drafts refused for their content, by run, and where their raw answers
    are."""
    lines = [
        f"**{len(rejections)} rejections**: LLM answers wrong by content (well-formed, but "
        "wrong), drafts that failed their grounding (rejected) or the trust screen "
        "(quarantined). A retry would get the same answer, so they are not dead letters and the "
        "night is not failed for them. Each is kept with its reason and raw answer: "
        "`hindsight dead-letters rejected`, or the console's Dead letters page."
    ]
    lines += [f"* `{x}`" for x in rejections[:shown]]
    if len(rejections) > shown:
        lines.append(f"* ... and {len(rejections) - shown} more")
    return "\n".join(lines)


def dead_letter_text(dead: list[str], failures: list[str], shown: int = 50) -> str:
    """What was parked or failed, by name, and what to do about it (markdown)."""
    lines = []
    if dead:
        lines.append(
            f"**{len(dead)} dead letters.** Their rule lessons are stored; the LLM part of "
            "each waits. The failed `llm-extract` task runs on this flow run's page carry "
            "the errors."
        )
        lines += [f"* `{x}`" for x in dead[:shown]]
        if len(dead) > shown:
            lines.append(f"* ... and {len(dead) - shown} more (`hindsight dead-letters list`)")
    if failures:
        lines.append(f"\n**{len(failures)} stage failures** (the stages after them still ran):")
        lines += [f"* `{x}`" for x in failures[:shown]]
    lines.append(
        "\nAfter fixing the cause (say, the LLM server is back), **retry this flow run** "
        "(the Retry button): it re-drives these dead letters, then runs every stage again. "
        "The `redrive-dead-letters` deployment and `hindsight dead-letters redrive` do the same."
    )
    return "\n".join(lines)
