"""namespace_deletion table: each deletion of a namespace, who ran it, when, and how many rows,
files and index points of each kind it removed; the namespace is kept as its sha256 only.

Revision ID: 0020
Revises: 0019
Create Date: 2026-12-07 06:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
import sqlmodel
from alembic import op
from sqlalchemy.dialects import postgresql

import memory_core.models.columns

revision: str = "0020"
down_revision: str | None = "0019"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    """Create the table and its index on the namespace's hash."""
    json = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")
    text = sqlmodel.sql.sqltypes.AutoString
    op.create_table(
        "namespace_deletion",
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.Column("namespace_sha256", text(length=64), nullable=False),
        sa.Column("actor", text(length=128), nullable=False),
        sa.Column("started_at", memory_core.models.columns.UTCDateTime(), nullable=False),
        sa.Column("finished_at", memory_core.models.columns.UTCDateTime(), nullable=False),
        sa.Column("rows", json, nullable=False),
        sa.Column("files", sa.Integer(), nullable=False),
        sa.Column("vectors", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index(
        op.f("ix_namespace_deletion_namespace_sha256"),
        "namespace_deletion",
        ["namespace_sha256"],
        unique=False,
    )


def downgrade() -> None:
    """Drop the table."""
    op.drop_index(op.f("ix_namespace_deletion_namespace_sha256"), table_name="namespace_deletion")
    op.drop_table("namespace_deletion")
