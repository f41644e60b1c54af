"""The night's changes report: a markdown artifact listing each card the night created,
merged (into what), superseded, archived, restored or sent to review, with why and its
evidence count, each linked to its page in the console when its address is configured, and
what retention removed from each namespace (`hindsight changes --since` prints the same
rows)."""

from __future__ import annotations

import uuid
from collections import Counter
from datetime import datetime

from prefect.artifacts import create_markdown_artifact

from flows.redacted import for_ui
from memory_core.changes import Change, changes_since
from memory_core.models.retention import NamespaceRetention
from memory_core.retention.policy import runs_since
from memory_core.retention.stage import removed_text
from memory_core.settings import Settings
from tasks.runtime import engine_for

CHANGES_KEY = "nightly-changes"


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")[:160]


def _card(card_id: uuid.UUID, console: str | None) -> str:
    short = str(card_id)[:8]
    return f"[{short}]({console}/ui/cards/{card_id})" if console else f"`{short}`"


def changes_text(changes: list[Change], console: str | None, shown: int = 500) -> str:
    """The changes as a markdown table; with `console` (its base address) each card links to
    its page there."""
    if not changes:
        return "**No card changed tonight.**"
    counts = ", ".join(f"{n} {what}" for what, n in Counter(c.what for c in changes).most_common())
    lines = [
        f"**{len(changes)} changes tonight**: {counts}.",
        "",
        "| card | what | into | evidence | by | why | scenario |",
        "|---|---|---|---|---|---|---|",
    ]
    for c in changes[:shown]:
        into = _card(c.into, console) if c.into else ""
        lines.append(
            f"| {_card(c.card_id, console)} | {c.what} | {into} | {c.evidence} "
            f"| {_cell(c.actor)} | {_cell(c.reason)} | {_cell(c.scenario)} |"
        )
    if len(changes) > shown:
        lines.append(f"\n... and {len(changes) - shown} more: `hindsight changes --since ...`")
    return "\n".join(lines)


def retention_text(runs: list[NamespaceRetention]) -> str:
    """What retention removed from each namespace tonight, as a markdown table ("" if it ran
    nowhere)."""
    if not runs:
        return ""
    lines = ["", "**Retention** removed, by namespace:", "", "| namespace | removed |", "|---|---|"]
    lines += [f"| {_cell(r.namespace)} | {removed_text(r.last_removed)} |" for r in runs]
    return "\n".join(lines)


def publish_changes(settings: Settings, since: datetime) -> int:
    """The markdown artifact of every change since the night began; how many changes."""
    engine = engine_for(settings)
    found = changes_since(engine=engine, since=since)
    console = settings.serve.console_url.rstrip("/") if settings.serve.console_url else None
    page = (
        f"the console's [Changes page]({console}/ui/changes?since={since.isoformat()})"
        if console
        else "the console's Changes page (set HINDSIGHT_SERVE__CONSOLE_URL to link it here)"
    )
    create_markdown_artifact(
        for_ui(
            changes_text(found, console)
            + retention_text(runs_since(engine, since))
            + f"\n\nThe same list: `hindsight changes --since {since.isoformat()}`, or {page}."
        ),
        key=CHANGES_KEY,
        description="What changed in the cards tonight, and why",
    )
    return len(found)
