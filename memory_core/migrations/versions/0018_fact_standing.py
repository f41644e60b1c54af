"""card subject, speaker and standing columns: whom a fact is about, who said it, and whether
only their word stands behind it

A fact read from a conversation is a claim of its speaker until a tool result or another
speaker corroborates it; search serves claims only on request. Facts stored before were read
from people's statements (origin user or llm) without a check: they become claims, with the
speaker their source names; the others were written through a key or the CLI.

Revision ID: 0018
Revises: 0017
Create Date: 2026-12-07 05:00:00
"""

import importlib.util
import json
from collections.abc import Sequence
from pathlib import Path

import sqlalchemy as sa
from alembic import op

revision: str = "0018"
down_revision: str | None = "0017"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_SAID = {"user", "llm"}  # memory_core.screen.provenance origins of what a person said
_SAID_BY = {"facts-rules", "facts-llm"}  # producers before the origin was typed


def upgrade() -> None:
    """Add the three columns, then fill them for the facts already stored."""
    # nullable, no default: a catalogue change on both databases, however many cards there are
    op.add_column("card", sa.Column("subject", sa.String(length=256), nullable=True))
    op.add_column("card", sa.Column("speaker", sa.String(length=256), nullable=True))
    op.add_column("card", sa.Column("standing", sa.String(length=16), nullable=True))
    conn = op.get_bind()
    rows = conn.execute(sa.text("SELECT card_id, provenance FROM card WHERE kind = 'fact'")).all()
    for card_id, provenance in rows:
        prov = json.loads(provenance) if isinstance(provenance, str) else (provenance or {})
        said = prov.get("origin") in _SAID or prov.get("producer") in _SAID_BY
        speaker = (prov.get("source") or {}).get("speaker") if said else None
        conn.execute(
            sa.text("UPDATE card SET standing = :s, speaker = :p WHERE card_id = :id"),
            {
                "s": "claim" if said else "operator",
                "p": str(speaker)[:256] if speaker else None,
                "id": card_id,
            },
        )


def downgrade() -> None:
    """Drop the columns (provenance still names each fact's source)."""
    path = Path(__file__).with_name("0013_card_change_feed.py")
    spec = importlib.util.spec_from_file_location("card_change_feed_0013", path)
    assert spec is not None and spec.loader is not None
    feed = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(feed)
    feed.drop_triggers()
    with op.batch_alter_table("card", schema=None) as batch_op:
        batch_op.drop_column("standing")
        batch_op.drop_column("speaker")
        batch_op.drop_column("subject")
    # a SQLite batch rewrite of `card` drops its triggers: made again after it, as 0015 left them
    feed.create_triggers(f"{feed.WATCHED}, run_count")
