"""What one validation run decided: the stage returns it, the task, the flow and the CLI pass
it on as it is (no re-listed copy)."""

from __future__ import annotations

import hashlib
import uuid
from collections import Counter
from pathlib import Path

from pydantic import BaseModel, Field


class ValidationSummary(BaseModel):
    """What one validation run decided."""

    # the run's row in validation_run (`hindsight validate report`); not in the summary shown
    run_id: uuid.UUID | None = Field(default=None, exclude=True)
    evaluated: int = 0
    activated: int = 0
    review: int = 0
    rejected: int = 0
    rule_failures: dict[str, int] = {}
    docs_index: str | None = None
    deferred: int = 0  # failing LLM drafts kept as drafts: regeneration waits for the LLM
    # regenerations refused by the trust screen or their grounding, kept as rejections on the
    # card's run (the card stays rejected and counts in `rejected` too)
    drafts_rejected: int = 0


def report_folder(reports_dir: Path, namespace: str | None) -> Path:
    """Where a namespace's validation reports (Data Docs) go: one folder per namespace, named
    by a hash since namespaces are user input, so a namespace's deletion takes its folder."""
    if namespace is None:  # drafts of no namespace at all: there were none to validate
        return reports_dir / "validation"
    return reports_dir / "validation" / hashlib.sha256(namespace.encode()).hexdigest()[:40]


def merged(parts: list[ValidationSummary]) -> ValidationSummary:
    """One summary of several namespaces' runs (the last run's id and report)."""
    rules: Counter[str] = Counter()
    for p in parts:
        rules.update(p.rule_failures)
    last = parts[-1]
    return ValidationSummary(
        run_id=last.run_id,
        evaluated=sum(p.evaluated for p in parts),
        activated=sum(p.activated for p in parts),
        review=sum(p.review for p in parts),
        rejected=sum(p.rejected for p in parts),
        rule_failures=dict(rules),
        docs_index=next((p.docs_index for p in reversed(parts) if p.docs_index), None),
        deferred=sum(p.deferred for p in parts),
        drafts_rejected=sum(p.drafts_rejected for p in parts),
    )
