"""trajectory task_group column, indexed with the namespace: the contrast's sibling lookup

Retrospection finds a run's siblings (the other trials of its task) for every task group a
batch touches. The group key lived in the JSON `extra` column, so each lookup read every run
of the namespace and parsed its JSON: at 100,000 runs, seconds per group, per batch. A column
with an index makes it a range read. Backfilled from `extra` (SQL; a key too long for the
column, which the code now hashes, in Python).

Revision ID: 0017
Revises: 0016
Create Date: 2026-12-02 17:00:00
"""

import hashlib
import json
from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0017"
down_revision: str | None = "0016"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_KEY = "hindsight_task_group"  # memory_core.retrospect.siblings.GROUP_KEY then
_MAX = 255


def _fit(key: str) -> str:
    """As memory_core.retrospect.contrast.fit_group does (frozen here, as a migration must be)."""
    if len(key) <= _MAX:
        return key
    kind, _, value = key.partition(":")
    return f"{kind}:sha1:{hashlib.sha1(value.encode()).hexdigest()}"


def upgrade() -> None:
    """Add, backfill, then index (the index is built once, over the filled column)."""
    op.add_column("trajectory", sa.Column("task_group", sa.String(length=_MAX), nullable=True))
    conn = op.get_bind()
    if conn.dialect.name == "sqlite":
        read = f"json_extract(extra, '$.{_KEY}')"
    else:
        read = f"(extra ->> '{_KEY}')"
    conn.execute(
        sa.text(f"UPDATE trajectory SET task_group = {read} WHERE length({read}) <= {_MAX}")
    )
    long = conn.execute(
        sa.text(f"SELECT id, extra FROM trajectory WHERE length({read}) > {_MAX}")
    ).all()
    for rid, extra in long:
        data = json.loads(extra) if isinstance(extra, str) else extra
        conn.execute(
            sa.text("UPDATE trajectory SET task_group = :g WHERE id = :id"),
            {"g": _fit(str(data[_KEY])), "id": rid},
        )
    op.create_index("ix_trajectory_task_group", "trajectory", ["namespace", "task_group"])


def downgrade() -> None:
    """Drop the index and the column (`extra` still holds the key)."""
    op.drop_index("ix_trajectory_task_group", table_name="trajectory")
    with op.batch_alter_table("trajectory", schema=None) as batch_op:
        batch_op.drop_column("task_group")
