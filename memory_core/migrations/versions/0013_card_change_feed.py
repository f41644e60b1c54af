"""card change feed: a row per changed card, written by triggers, so a served snapshot applies
what changed instead of reloading its namespace

Every insert, delete, and update of a column the served snapshot reads adds (seq, namespace,
card_id) in the same transaction, whichever process or tool made the change. A use (use_count,
last_used_at, decay_tier alone) adds none: the serving process follows its own uses in memory.
SQLite drops a table's triggers when a batch migration recreates it: a later migration that
rewrites `card` on SQLite must call `create_triggers` again.

Revision ID: 0013
Revises: 0012
Create Date: 2026-12-02 06:30:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
import sqlmodel
from alembic import op

revision: str = "0013"
down_revision: str | None = "0012"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# what a change of the served set can touch: every column but the use fields
WATCHED = (
    "namespace, kind, scenario, preconditions, action_sequence, expected_outcome, "
    "actual_outcome, failure_modes, confidence, key, query, value, valid_until, status, "
    "signature, provenance, evidence_count, updated_at, success_count, failure_count, "
    "consecutive_failures, version, supersedes, superseded_by, restored_at, pinned, "
    "served_outcomes, served_successes, withheld_outcomes, withheld_successes, effect_faded_at"
)
_LOG = "INSERT INTO card_change (namespace, card_id) VALUES ({0}.namespace, {0}.card_id)"


def create_triggers(watched: str = WATCHED) -> None:
    """The triggers that fill card_change (both dialects), on updates of `watched` columns."""
    if op.get_bind().dialect.name == "sqlite":
        for name, event, row in (
            ("card_change_insert", "INSERT", "NEW"),
            ("card_change_update", f"UPDATE OF {watched}", "NEW"),
            ("card_change_delete", "DELETE", "OLD"),
        ):
            op.execute(f"CREATE TRIGGER {name} AFTER {event} ON card BEGIN {_LOG.format(row)}; END")
        return
    op.execute(
        "CREATE FUNCTION card_change_log() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
        f"IF TG_OP = 'DELETE' THEN {_LOG.format('OLD')}; RETURN OLD; END IF; "
        f"{_LOG.format('NEW')}; RETURN NEW; END $$"
    )
    op.execute(
        "CREATE TRIGGER card_change_write AFTER INSERT OR DELETE ON card "
        "FOR EACH ROW EXECUTE FUNCTION card_change_log()"
    )
    op.execute(
        f"CREATE TRIGGER card_change_update AFTER UPDATE OF {watched} ON card "
        "FOR EACH ROW EXECUTE FUNCTION card_change_log()"
    )


def drop_triggers() -> None:
    """Undo `create_triggers`."""
    if op.get_bind().dialect.name == "sqlite":
        for name in ("card_change_insert", "card_change_update", "card_change_delete"):
            op.execute(f"DROP TRIGGER IF EXISTS {name}")
        return
    op.execute("DROP TRIGGER IF EXISTS card_change_write ON card")
    op.execute("DROP TRIGGER IF EXISTS card_change_update ON card")
    op.execute("DROP FUNCTION IF EXISTS card_change_log()")


def upgrade() -> None:
    op.create_table(
        "card_change",
        sa.Column(
            "seq",
            sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
            primary_key=True,
            autoincrement=True,
        ),
        sa.Column("namespace", sqlmodel.sql.sqltypes.AutoString(length=128), nullable=False),
        sa.Column("card_id", sa.Uuid(), nullable=False),
        sqlite_autoincrement=True,
    )
    op.create_index("ix_card_change_namespace_seq", "card_change", ["namespace", "seq"])
    create_triggers()


def downgrade() -> None:
    drop_triggers()
    op.drop_index("ix_card_change_namespace_seq", table_name="card_change")
    op.drop_table("card_change")
