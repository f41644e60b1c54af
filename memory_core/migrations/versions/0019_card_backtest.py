"""card_backtest table: each experience card's backtest over the namespace's later runs and
the serving gate's decision (memory_core.backtest), one row per card, keyed by its id. No
foreign key to the card, as history and archive rows (cards are never deleted).

Revision ID: 0019
Revises: 0018
Create Date: 2026-12-07 05:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
import sqlmodel
from alembic import op
from sqlalchemy.dialects import postgresql

import memory_core.models.columns

revision: str = "0019"
down_revision: str | None = "0018"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    """Create the table and its namespace index."""
    json = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")
    text = sqlmodel.sql.sqltypes.AutoString
    op.create_table(
        "card_backtest",
        sa.Column("card_id", sa.Uuid(), nullable=False),
        sa.Column("namespace", text(length=128), nullable=False),
        sa.Column("groups", sa.Integer(), nullable=False),
        sa.Column("operator", sa.Boolean(), nullable=False),
        sa.Column("checked", sa.Integer(), nullable=False),
        sa.Column("fired", sa.Integer(), nullable=False),
        sa.Column("right", sa.Integer(), nullable=False),
        sa.Column("wrong", sa.Integer(), nullable=False),
        sa.Column("low", sa.Float(), nullable=True),
        sa.Column("measured", sa.Boolean(), nullable=False),
        sa.Column("replayable", sa.Boolean(), nullable=False),
        sa.Column("serve", sa.Boolean(), nullable=False),
        sa.Column("reason", text(), nullable=False),
        sa.Column("runs", json, nullable=False),
        sa.Column("held_version", sa.Integer(), nullable=True),
        sa.Column(
            "computed_at",
            memory_core.models.columns.UTCDateTime(timezone=True),
            nullable=False,
        ),
        sa.PrimaryKeyConstraint("card_id"),
    )
    op.create_index("ix_card_backtest_namespace", "card_backtest", ["namespace"])


def downgrade() -> None:
    """Drop it."""
    op.drop_index("ix_card_backtest_namespace", table_name="card_backtest")
    op.drop_table("card_backtest")
