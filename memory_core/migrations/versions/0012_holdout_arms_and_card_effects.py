"""holdout arms and card effects: which arm each use was in, outcomes per arm on the card

A query withholds a matching card with a small probability (the holdout); its use row says
which arm it was in and which query it belongs to, so an outcome reported for one use of the
query counts for every card the query served or withheld. The card keeps its outcomes per arm
(the use log is pruned after its retention window; the estimate must outlive it), a pin that
exempts it from the holdout, and when decay last faded it for a measured lack of effect.

Revision ID: 0012
Revises: 0011
Create Date: 2026-12-02 02:40:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
import sqlmodel
from alembic import op

import memory_core.models.columns

revision: str = "0012"
down_revision: str | None = "0011"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_COUNTS = ("served_outcomes", "served_successes", "withheld_outcomes", "withheld_successes")


def upgrade() -> None:
    with op.batch_alter_table("card_use", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column("arm", sqlmodel.sql.sqltypes.AutoString(length=8), nullable=True)
        )
        batch_op.add_column(sa.Column("query_id", sa.Uuid(), nullable=True))
        batch_op.create_index(batch_op.f("ix_card_use_query_id"), ["query_id"], unique=False)
    with op.batch_alter_table("card", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column("pinned", sa.Boolean(), server_default=sa.text("false"), nullable=False)
        )
        for name in _COUNTS:
            batch_op.add_column(
                sa.Column(name, sa.Integer(), server_default=sa.text("0"), nullable=False)
            )
        batch_op.add_column(
            sa.Column(
                "effect_faded_at",
                memory_core.models.columns.UTCDateTime(timezone=True),
                nullable=True,
            )
        )


def downgrade() -> None:
    with op.batch_alter_table("card", schema=None) as batch_op:
        batch_op.drop_column("effect_faded_at")
        for name in reversed(_COUNTS):
            batch_op.drop_column(name)
        batch_op.drop_column("pinned")
    with op.batch_alter_table("card_use", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_card_use_query_id"))
        batch_op.drop_column("query_id")
        batch_op.drop_column("arm")
