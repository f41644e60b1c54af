"""cheaper card rewrites: history and archive rows without per-row key checks, room for HOT

The decay stage's first run over a million cards rewrites three quarters of them and adds
a history row for each. Measured on PostgreSQL (bench/decay.py): the foreign-key check on
every history and archive row (a KEY SHARE lock on the card row) cost 8.5 s of 33; a full
card page left no room to update a row in place (10.4 -> 6.9 s with fillfactor 80); and
every updated row added an entry to the index of superseded_by, which is almost always
NULL. Cards are never deleted (they are archived), and every writer adds history in the
transaction that writes the card, so the keys guarded nothing a test could break.

The fillfactor applies to pages written from now on; existing pages fill up as before
until the table is rewritten (VACUUM FULL), which this migration does not do (it locks).

Revision ID: 0009
Revises: 0008
Create Date: 2026-11-30 19:55:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0009"
down_revision: str | None = "0008"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# PostgreSQL's default name for these keys; SQLite reflects them unnamed, so batch mode
# names them the same way to drop them
_FK = "%(table_name)s_%(column_0_name)s_fkey"
_NOT_NULL = sa.text("superseded_by IS NOT NULL")


def upgrade() -> None:
    for table in ("card_version", "card_archive"):
        with op.batch_alter_table(table, naming_convention={"fk": _FK}) as batch_op:
            batch_op.drop_constraint(f"{table}_card_id_fkey", type_="foreignkey")
    with op.batch_alter_table("card_archive") as batch_op:
        batch_op.drop_index("ix_card_archive_run_id")  # nothing reads by run
    with op.batch_alter_table("card") as batch_op:
        batch_op.drop_index("ix_card_superseded_by")
        batch_op.create_index(
            "ix_card_superseded_by",
            ["superseded_by"],
            sqlite_where=_NOT_NULL,
            postgresql_where=_NOT_NULL,
        )
    if op.get_bind().dialect.name == "postgresql":
        op.execute("ALTER TABLE card SET (fillfactor = 80)")


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute("ALTER TABLE card RESET (fillfactor)")
    with op.batch_alter_table("card") as batch_op:
        batch_op.drop_index("ix_card_superseded_by")
        batch_op.create_index("ix_card_superseded_by", ["superseded_by"])
    with op.batch_alter_table("card_archive") as batch_op:
        batch_op.create_index("ix_card_archive_run_id", ["run_id"])
    for table in ("card_version", "card_archive"):
        with op.batch_alter_table(table) as batch_op:
            batch_op.create_foreign_key(f"{table}_card_id_fkey", "card", ["card_id"], ["card_id"])
