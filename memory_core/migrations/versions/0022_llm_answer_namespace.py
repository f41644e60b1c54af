"""llm_answer.namespace: whose text a cached prompt held, so that deleting a namespace takes its
answers about cards and groups too (they name no trajectory); filled from the trajectory for
the answers that name one.

Revision ID: 0022
Revises: 0021
Create Date: 2026-12-07 14:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
import sqlmodel
from alembic import op

revision: str = "0022"
down_revision: str | None = "0021"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    """Add the column and its index, and fill it from each answer's trajectory."""
    with op.batch_alter_table("llm_answer", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column("namespace", sqlmodel.sql.sqltypes.AutoString(length=128), nullable=True)
        )
        batch_op.create_index(batch_op.f("ix_llm_answer_namespace"), ["namespace"], unique=False)
    # answers about cards or groups stay NULL: their prompts name no namespace to read back
    op.execute(
        "UPDATE llm_answer SET namespace = (SELECT t.namespace FROM trajectory t "
        "WHERE t.id = llm_answer.trajectory_id) WHERE trajectory_id IS NOT NULL"
    )


def downgrade() -> None:
    """Drop the index and the column."""
    with op.batch_alter_table("llm_answer", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_llm_answer_namespace"))
        batch_op.drop_column("namespace")
