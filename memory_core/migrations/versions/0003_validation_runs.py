"""validation runs

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-30 13:34:34.276234
"""

from collections.abc import Sequence

import sqlalchemy as sa
import sqlmodel
from alembic import op
from sqlalchemy.dialects import postgresql

import memory_core.models.columns

revision: str = "0003"
down_revision: str | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "validation_run",
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.Column("namespace", sqlmodel.sql.sqltypes.AutoString(length=128), nullable=True),
        sa.Column(
            "created_at", memory_core.models.columns.UTCDateTime(timezone=True), nullable=False
        ),
        sa.Column("evaluated", sa.Integer(), nullable=False),
        sa.Column("activated", sa.Integer(), nullable=False),
        sa.Column("review", sa.Integer(), nullable=False),
        sa.Column("rejected", sa.Integer(), nullable=False),
        sa.Column(
            "rule_failures",
            sa.JSON().with_variant(postgresql.JSONB(), "postgresql"),
            nullable=False,
        ),
        sa.Column(
            "failed_cards", sa.JSON().with_variant(postgresql.JSONB(), "postgresql"), nullable=False
        ),
        sa.Column("docs_path", sqlmodel.sql.sqltypes.AutoString(), nullable=True),
        sa.Column(
            "extra", sa.JSON().with_variant(postgresql.JSONB(), "postgresql"), nullable=False
        ),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("validation_run", schema=None) as batch_op:
        batch_op.create_index(
            batch_op.f("ix_validation_run_created_at"), ["created_at"], unique=False
        )


def downgrade() -> None:
    with op.batch_alter_table("validation_run", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_validation_run_created_at"))

    op.drop_table("validation_run")
