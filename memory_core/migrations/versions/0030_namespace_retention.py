"""namespace_retention table: each namespace's retention policy (days its raw runs and its uses
are kept; null: the settings' value) and what the nightly's retention last removed from it.

Revision ID: 0030
Revises: 0033
Create Date: 2026-12-07 17:30:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
import sqlmodel
from alembic import op
from sqlalchemy.dialects import postgresql

from memory_core.models.columns import UTCDateTime

revision: str = "0030"
down_revision: str | None = "0033"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    """Create the table (no row: every namespace follows the settings)."""
    json = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")
    text = sqlmodel.sql.sqltypes.AutoString
    op.create_table(
        "namespace_retention",
        sa.Column("namespace", text(length=128), nullable=False),
        sa.Column("trajectories_days", sa.Float(), nullable=True),
        sa.Column("uses_days", sa.Float(), nullable=True),
        sa.Column("set_by", text(length=128), nullable=True),
        sa.Column("set_at", UTCDateTime(), nullable=True),
        sa.Column("last_run_at", UTCDateTime(), nullable=True),
        sa.Column("last_removed", json, nullable=False),
        sa.PrimaryKeyConstraint("namespace"),
    )


def downgrade() -> None:
    """Drop the table."""
    op.drop_table("namespace_retention")
