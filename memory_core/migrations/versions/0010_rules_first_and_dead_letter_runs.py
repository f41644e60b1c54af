"""rules first: a run's rule lesson is written at claim time; dead letters remember their run

`rules_at` says when the rule drafts of a trajectory were written: an LLM outage dead-letters
only the LLM part of the run, and a re-drive does not write its rule lesson twice.
`dead_letter_run` is the flow run that parked it, so retrying that flow run in the Prefect UI
re-drives exactly those.

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-01 05:30:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from memory_core.models.columns import UTCDateTime

revision: str = "0010"
down_revision: str | None = "0009"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("trajectory") as batch_op:
        batch_op.add_column(sa.Column("rules_at", UTCDateTime(), nullable=True))
        batch_op.add_column(sa.Column("dead_letter_run", sa.String(length=64), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("trajectory") as batch_op:
        batch_op.drop_column("dead_letter_run")
        batch_op.drop_column("rules_at")
