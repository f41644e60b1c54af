"""initial schema

Revision ID: 0001
Revises:
Create Date: 2026-11-30 12:14:05.168111
"""

from collections.abc import Sequence

import sqlalchemy as sa
import sqlmodel
from alembic import op
from sqlalchemy.dialects import postgresql

import memory_core.models.columns

revision: str = "0001"
down_revision: str | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "card",
        sa.Column("namespace", sqlmodel.sql.sqltypes.AutoString(length=128), nullable=False),
        sa.Column("kind", sqlmodel.sql.sqltypes.AutoString(length=16), nullable=False),
        sa.Column("scenario", sqlmodel.sql.sqltypes.AutoString(length=1000), nullable=False),
        sa.Column(
            "preconditions",
            sa.JSON().with_variant(postgresql.JSONB(), "postgresql"),
            nullable=False,
        ),
        sa.Column(
            "action_sequence",
            sa.JSON().with_variant(postgresql.JSONB(), "postgresql"),
            nullable=False,
        ),
        sa.Column("expected_outcome", sqlmodel.sql.sqltypes.AutoString(), nullable=False),
        sa.Column("actual_outcome", sqlmodel.sql.sqltypes.AutoString(), nullable=False),
        sa.Column(
            "failure_modes",
            sa.JSON().with_variant(postgresql.JSONB(), "postgresql"),
            nullable=False,
        ),
        sa.Column("confidence", sa.Float(), nullable=False),
        sa.Column("key", sqlmodel.sql.sqltypes.AutoString(length=256), nullable=True),
        sa.Column("query", sqlmodel.sql.sqltypes.AutoString(), nullable=True),
        sa.Column("value", sqlmodel.sql.sqltypes.AutoString(), nullable=True),
        sa.Column(
            "valid_until", memory_core.models.columns.UTCDateTime(timezone=True), nullable=True
        ),
        sa.Column("card_id", sa.Uuid(), nullable=False),
        sa.Column("status", sqlmodel.sql.sqltypes.AutoString(length=16), nullable=False),
        sa.Column("signature", sqlmodel.sql.sqltypes.AutoString(length=64), nullable=False),
        sa.Column(
            "provenance", sa.JSON().with_variant(postgresql.JSONB(), "postgresql"), nullable=False
        ),
        sa.Column("evidence_count", sa.Integer(), nullable=False),
        sa.Column(
            "created_at", memory_core.models.columns.UTCDateTime(timezone=True), nullable=False
        ),
        sa.Column(
            "updated_at", memory_core.models.columns.UTCDateTime(timezone=True), nullable=False
        ),
        sa.Column(
            "last_used_at", memory_core.models.columns.UTCDateTime(timezone=True), nullable=True
        ),
        sa.Column("use_count", sa.Integer(), nullable=False),
        sa.Column("success_count", sa.Integer(), nullable=False),
        sa.Column("failure_count", sa.Integer(), nullable=False),
        sa.Column("consecutive_failures", sa.Integer(), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("supersedes", sa.Uuid(), nullable=True),
        sa.PrimaryKeyConstraint("card_id"),
    )
    with op.batch_alter_table("card", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_card_namespace"), ["namespace"], unique=False)
        batch_op.create_index("ix_card_namespace_status", ["namespace", "status"], unique=False)
        batch_op.create_index(
            "uq_card_live_signature",
            ["namespace", "signature"],
            unique=True,
            sqlite_where=sa.text("status IN ('draft', 'review', 'active', 'quarantined')"),
            postgresql_where=sa.text("status IN ('draft', 'review', 'active', 'quarantined')"),
        )

    op.create_table(
        "trajectory",
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.Column("namespace", sqlmodel.sql.sqltypes.AutoString(length=128), nullable=False),
        sa.Column("key", sqlmodel.sql.sqltypes.AutoString(length=256), nullable=False),
        sa.Column("content_hash", sqlmodel.sql.sqltypes.AutoString(length=64), nullable=False),
        sa.Column("source_format", sqlmodel.sql.sqltypes.AutoString(length=16), nullable=False),
        sa.Column("task_type", sqlmodel.sql.sqltypes.AutoString(length=128), nullable=False),
        sa.Column("agent_id", sqlmodel.sql.sqltypes.AutoString(length=128), nullable=True),
        sa.Column("outcome", sqlmodel.sql.sqltypes.AutoString(length=16), nullable=False),
        sa.Column("reward", sa.Float(), nullable=True),
        sa.Column(
            "steps", sa.JSON().with_variant(postgresql.JSONB(), "postgresql"), nullable=False
        ),
        sa.Column(
            "extra", sa.JSON().with_variant(postgresql.JSONB(), "postgresql"), nullable=False
        ),
        sa.Column("status", sqlmodel.sql.sqltypes.AutoString(length=16), nullable=False),
        sa.Column("lease_owner", sqlmodel.sql.sqltypes.AutoString(length=64), nullable=True),
        sa.Column(
            "lease_until", memory_core.models.columns.UTCDateTime(timezone=True), nullable=True
        ),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("error", sqlmodel.sql.sqltypes.AutoString(), nullable=True),
        sa.Column("cards_written", sa.Integer(), nullable=False),
        sa.Column(
            "created_at", memory_core.models.columns.UTCDateTime(timezone=True), nullable=False
        ),
        sa.Column(
            "processed_at", memory_core.models.columns.UTCDateTime(timezone=True), nullable=True
        ),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("namespace", "key", name="uq_trajectory_namespace_key"),
    )
    with op.batch_alter_table("trajectory", schema=None) as batch_op:
        batch_op.create_index("ix_trajectory_claim", ["status", "lease_until"], unique=False)
        batch_op.create_index(batch_op.f("ix_trajectory_namespace"), ["namespace"], unique=False)

    op.create_table(
        "card_evidence",
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.Column("card_id", sa.Uuid(), nullable=False),
        sa.Column("trajectory_id", sa.Uuid(), nullable=False),
        sa.Column("step", sa.Integer(), nullable=False),
        sa.Column(
            "condition", sa.JSON().with_variant(postgresql.JSONB(), "postgresql"), nullable=False
        ),
        sa.Column(
            "action", sa.JSON().with_variant(postgresql.JSONB(), "postgresql"), nullable=False
        ),
        sa.Column(
            "result", sa.JSON().with_variant(postgresql.JSONB(), "postgresql"), nullable=False
        ),
        sa.Column(
            "created_at", memory_core.models.columns.UTCDateTime(timezone=True), nullable=False
        ),
        sa.ForeignKeyConstraint(
            ["card_id"],
            ["card.card_id"],
        ),
        sa.ForeignKeyConstraint(
            ["trajectory_id"],
            ["trajectory.id"],
        ),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("card_id", "trajectory_id", "step", name="uq_card_evidence"),
    )
    with op.batch_alter_table("card_evidence", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_card_evidence_card_id"), ["card_id"], unique=False)
        batch_op.create_index(
            batch_op.f("ix_card_evidence_trajectory_id"), ["trajectory_id"], unique=False
        )

    op.create_table(
        "card_use",
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.Column("card_id", sa.Uuid(), nullable=False),
        sa.Column("namespace", sqlmodel.sql.sqltypes.AutoString(length=128), nullable=False),
        sa.Column("used_at", memory_core.models.columns.UTCDateTime(timezone=True), nullable=False),
        sa.Column("outcome", sqlmodel.sql.sqltypes.AutoString(length=16), nullable=True),
        sa.Column(
            "context", sa.JSON().with_variant(postgresql.JSONB(), "postgresql"), nullable=False
        ),
        sa.ForeignKeyConstraint(
            ["card_id"],
            ["card.card_id"],
        ),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("card_use", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_card_use_card_id"), ["card_id"], unique=False)
        batch_op.create_index(batch_op.f("ix_card_use_namespace"), ["namespace"], unique=False)

    op.create_table(
        "card_version",
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.Column("card_id", sa.Uuid(), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column(
            "snapshot", sa.JSON().with_variant(postgresql.JSONB(), "postgresql"), nullable=False
        ),
        sa.Column("reason", sqlmodel.sql.sqltypes.AutoString(), nullable=False),
        sa.Column("actor", sqlmodel.sql.sqltypes.AutoString(length=128), nullable=False),
        sa.Column(
            "created_at", memory_core.models.columns.UTCDateTime(timezone=True), nullable=False
        ),
        sa.ForeignKeyConstraint(
            ["card_id"],
            ["card.card_id"],
        ),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("card_id", "version", name="uq_card_version"),
    )
    with op.batch_alter_table("card_version", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_card_version_card_id"), ["card_id"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("card_version", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_card_version_card_id"))

    op.drop_table("card_version")
    with op.batch_alter_table("card_use", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_card_use_namespace"))
        batch_op.drop_index(batch_op.f("ix_card_use_card_id"))

    op.drop_table("card_use")
    with op.batch_alter_table("card_evidence", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_card_evidence_trajectory_id"))
        batch_op.drop_index(batch_op.f("ix_card_evidence_card_id"))

    op.drop_table("card_evidence")
    with op.batch_alter_table("trajectory", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_trajectory_namespace"))
        batch_op.drop_index("ix_trajectory_claim")

    op.drop_table("trajectory")
    with op.batch_alter_table("card", schema=None) as batch_op:
        batch_op.drop_index(
            "uq_card_live_signature",
            sqlite_where=sa.text("status IN ('draft', 'review', 'active', 'quarantined')"),
            postgresql_where=sa.text("status IN ('draft', 'review', 'active', 'quarantined')"),
        )
        batch_op.drop_index("ix_card_namespace_status")
        batch_op.drop_index(batch_op.f("ix_card_namespace"))

    op.drop_table("card")
