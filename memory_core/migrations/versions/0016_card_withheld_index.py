"""card (namespace, withheld_outcomes) index: the harms test (memory_core.effects.fdr) reads
the namespace's cards with enough outcomes in both arms on every card page and card list.
Without it both databases scanned the namespace: at 100,000 cards the console's card page
went from 2.5 to 96 ms (SQLite) and 9 to 217 ms (PostgreSQL), two reads per page. Few cards
reach the withheld minimum, so the range is short. `withheld_outcomes` changes only on an
outcome of a withheld use (the holdout's few percent): served outcomes keep their HOT updates.

Revision ID: 0016
Revises: 0015
Create Date: 2026-12-02 16:20:00
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0016"
down_revision: str | None = "0015"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    """Add the index (a plain CREATE INDEX: no table rewrite, the change triggers stay)."""
    op.create_index("ix_card_namespace_withheld", "card", ["namespace", "withheld_outcomes"])


def downgrade() -> None:
    """Drop it."""
    op.drop_index("ix_card_namespace_withheld", table_name="card")
