"""The night's changes report: a markdown artifact listing each card the night created,
merged (into what), superseded, archived, restored or sent to review, with why, each linked
to its page in the console (`hindsight changes --since` prints the same rows)."""

from __future__ import annotations

from collections import Counter
from datetime import datetime

from prefect.artifacts import create_markdown_artifact

from memory_core.changes import Change, changes_since
from memory_core.settings import Settings
from tasks.runtime import engine_for

CHANGES_KEY = "nightly-changes"


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")[:160]


def changes_text(changes: list[Change], console: str, shown: int = 500) -> str:
    """The changes as a markdown table, cards linked to the console (`console`: its base)."""
    if not changes:
        return "**No card changed tonight.**"
    counts = ", ".join(f"{n} {what}" for what, n in Counter(c.what for c in changes).most_common())
    lines = [
        f"**{len(changes)} changes tonight**: {counts}.",
        "",
        "| card | what | into | by | why | scenario |",
        "|---|---|---|---|---|---|",
    ]
    for c in changes[:shown]:
        into = f"[{str(c.into)[:8]}]({console}/ui/cards/{c.into})" if c.into else ""
        lines.append(
            f"| [{str(c.card_id)[:8]}]({console}/ui/cards/{c.card_id}) | {c.what} | {into} "
            f"| {_cell(c.actor)} | {_cell(c.reason)} | {_cell(c.scenario)} |"
        )
    if len(changes) > shown:
        lines.append(f"\n... and {len(changes) - shown} more: `hindsight changes --since ...`")
    return "\n".join(lines)


def publish_changes(settings: Settings, since: datetime) -> int:
    """The markdown artifact of every change since the night began; how many changes."""
    found = changes_since(engine=engine_for(settings), since=since)
    console = f"http://{settings.serve.host}:{settings.serve.port}"
    create_markdown_artifact(
        changes_text(found, console)
        + f"\n\nThe same list: `hindsight changes --since {since.isoformat()}`, or the "
        f"console's [Changes page]({console}/ui/changes?since={since.isoformat()}).",
        key=CHANGES_KEY,
        description="What changed in the cards tonight, and why",
    )
    return len(found)
