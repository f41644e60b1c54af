"""query_log table: one row per served query (namespace, time, key, the state, the cards
served and withheld with their scores, retrieval latency), written by the use writer and
pruned with the use rows.

Revision ID: 0021
Revises: 0027
Create Date: 2026-12-07 14:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
import sqlmodel
from alembic import op
from sqlalchemy.dialects import postgresql

import memory_core.models.columns

revision: str = "0021"
down_revision: str | None = "0027"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    """Create the table and its two paging indexes."""
    json = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")
    text = sqlmodel.sql.sqltypes.AutoString
    op.create_table(
        "query_log",
        sa.Column("query_id", sa.Uuid(), nullable=False),
        sa.Column("namespace", text(length=128), nullable=False),
        sa.Column("asked_at", memory_core.models.columns.UTCDateTime(), nullable=False),
        sa.Column("key_id", sa.Uuid(), nullable=True),
        sa.Column("via", text(length=16), nullable=False),
        sa.Column("state", json, nullable=False),
        sa.Column("served", json, nullable=False),
        sa.Column("withheld", json, nullable=False),
        sa.Column("latency_ms", sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint("query_id"),
    )
    op.create_index("ix_query_log_namespace_asked", "query_log", ["namespace", "asked_at"])
    op.create_index(
        "ix_query_log_namespace_key_asked", "query_log", ["namespace", "key_id", "asked_at"]
    )


def downgrade() -> None:
    """Drop the table."""
    op.drop_index("ix_query_log_namespace_key_asked", table_name="query_log")
    op.drop_index("ix_query_log_namespace_asked", table_name="query_log")
    op.drop_table("query_log")
