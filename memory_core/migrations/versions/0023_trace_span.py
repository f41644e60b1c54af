"""trace_span table: spans the OTLP receiver holds until their trace's root span arrives (or
the wait runs out), then ingests as one trajectory.

Revision ID: 0023
Revises: 0022
Create Date: 2026-12-07 14:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
import sqlmodel
from alembic import op
from sqlalchemy.dialects import postgresql

import memory_core.models.columns

revision: str = "0023"
down_revision: str | None = "0022"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    """Create the table, its key (namespace, trace, span) and its lookup indexes."""
    json = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")
    text = sqlmodel.sql.sqltypes.AutoString
    op.create_table(
        "trace_span",
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.Column("namespace", text(length=128), nullable=False),
        sa.Column("trace_id", text(length=64), nullable=False),
        sa.Column("span_id", text(length=32), nullable=False),
        sa.Column("span", json, nullable=False),
        sa.Column("received_at", memory_core.models.columns.UTCDateTime(), nullable=False),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("namespace", "trace_id", "span_id"),
    )
    op.create_index(op.f("ix_trace_span_namespace"), "trace_span", ["namespace"], unique=False)
    op.create_index(op.f("ix_trace_span_trace_id"), "trace_span", ["trace_id"], unique=False)


def downgrade() -> None:
    """Drop the table."""
    op.drop_index(op.f("ix_trace_span_trace_id"), table_name="trace_span")
    op.drop_index(op.f("ix_trace_span_namespace"), table_name="trace_span")
    op.drop_table("trace_span")
