"""api_key.last_used_at: when a server last checked the key, so an operator sees idle keys

Revision ID: 0027
Revises: 0024
Create Date: 2026-12-07 14:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from memory_core.models.columns import UTCDateTime

revision: str = "0027"
down_revision: str | None = "0024"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    """Add the nullable column (keys used before it show "never" until their next use)."""
    with op.batch_alter_table("api_key") as batch_op:
        batch_op.add_column(sa.Column("last_used_at", UTCDateTime(), nullable=True))


def downgrade() -> None:
    """Drop the column."""
    with op.batch_alter_table("api_key") as batch_op:
        batch_op.drop_column("last_used_at")
