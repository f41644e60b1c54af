"""trajectory lease_heartbeat: when the worker holding a claimed run last said it was alive

A claim outlived its worker until lease_until (five minutes by default): a retrospect killed
mid-batch left its runs `processing`, and the next run found nothing to do. The holder now
refreshes this column while it works; a claim whose heartbeat is older than the stale setting
is given back at once, from any host. Claims taken before this column have none: their lease
alone decides, as before.

Revision ID: 0024
Revises: 0020
Create Date: 2026-12-07 14:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

import memory_core.models.columns

revision: str = "0024"
down_revision: str | None = "0020"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    """Add the nullable column (no rewrite of the rows)."""
    op.add_column(
        "trajectory",
        sa.Column(
            "lease_heartbeat",
            memory_core.models.columns.UTCDateTime(timezone=True),
            nullable=True,
        ),
    )


def downgrade() -> None:
    """Drop the column (claims fall back on their lease)."""
    with op.batch_alter_table("trajectory", schema=None) as batch_op:
        batch_op.drop_column("lease_heartbeat")
