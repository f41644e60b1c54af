"""card (namespace, kind, status) index: the console's facts page and overview count and list
one kind of card per namespace; without it PostgreSQL scanned the namespace for each count
of the facts page (bench/ui.py at 100,000 cards, one quiet run each: 143 -> 56 ms, overview
156 -> 118 ms). `kind` never changes
and `status` seldom does, so uses and feedback keep their HOT updates.

Revision ID: 0014
Revises: 0013
Create Date: 2026-12-02 07:20:00
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0014"
down_revision: str | None = "0013"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    """Add the index (a plain CREATE INDEX: no table rewrite, the change triggers stay)."""
    op.create_index("ix_card_namespace_kind_status", "card", ["namespace", "kind", "status"])


def downgrade() -> None:
    """Drop it."""
    op.drop_index("ix_card_namespace_kind_status", table_name="card")
