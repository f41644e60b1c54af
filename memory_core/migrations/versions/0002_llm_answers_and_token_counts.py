"""llm answers and token counts

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-30 12:43:29.220917
"""

from collections.abc import Sequence

import sqlalchemy as sa
import sqlmodel
from alembic import op
from sqlalchemy.dialects import postgresql

import memory_core.models.columns

revision: str = "0002"
down_revision: str | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "llm_answer",
        sa.Column("cache_key", sqlmodel.sql.sqltypes.AutoString(length=64), nullable=False),
        sa.Column("trajectory_id", sa.Uuid(), nullable=False),
        sa.Column("prompt_id", sqlmodel.sql.sqltypes.AutoString(length=64), nullable=False),
        sa.Column("model", sqlmodel.sql.sqltypes.AutoString(length=128), nullable=False),
        sa.Column(
            "answer", sa.JSON().with_variant(postgresql.JSONB(), "postgresql"), nullable=False
        ),
        sa.Column("prompt_tokens", sa.Integer(), nullable=False),
        sa.Column("completion_tokens", sa.Integer(), nullable=False),
        sa.Column("calls", sa.Integer(), nullable=False),
        sa.Column(
            "created_at", memory_core.models.columns.UTCDateTime(timezone=True), nullable=False
        ),
        sa.ForeignKeyConstraint(
            ["trajectory_id"],
            ["trajectory.id"],
        ),
        sa.PrimaryKeyConstraint("cache_key"),
    )
    with op.batch_alter_table("llm_answer", schema=None) as batch_op:
        batch_op.create_index(
            batch_op.f("ix_llm_answer_trajectory_id"), ["trajectory_id"], unique=False
        )

    with op.batch_alter_table("trajectory", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column("tokens_sent", sa.Integer(), nullable=False, server_default="0")
        )
        batch_op.add_column(
            sa.Column("tokens_saved", sa.Integer(), nullable=False, server_default="0")
        )


def downgrade() -> None:
    with op.batch_alter_table("trajectory", schema=None) as batch_op:
        batch_op.drop_column("tokens_saved")
        batch_op.drop_column("tokens_sent")

    with op.batch_alter_table("llm_answer", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_llm_answer_trajectory_id"))

    op.drop_table("llm_answer")
