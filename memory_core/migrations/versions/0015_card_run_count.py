"""card run_count: the distinct runs among a card's evidence, what support counts

A run that repeats a failure adds an evidence row per repeat (the rows explain the card), so
evidence_count let one looping or hostile run inflate its card's support, its tie-breaks and
its survival in a merge. run_count counts each supporting run once (contrast and
contradicting runs not at all, as confidence counts them); it is backfilled from the evidence
rows and watched by the change feed's update trigger (0013), so a served snapshot follows it.

Revision ID: 0015
Revises: 0014
Create Date: 2026-12-02 10:40:00
"""

import importlib.util
import json
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType

import sqlalchemy as sa
from alembic import op

revision: str = "0015"
down_revision: str | None = "0014"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# a run's bearing as memory_core.cards.confidence reads it then: contrast rows count neither
# way, a run with any contradicting row contradicts (frozen here, as a migration must be)
_NEITHER, _AGAINST = "contrast", "contradicts"


def _backfill() -> None:
    """run_count = the distinct runs supporting each card, read from its evidence rows."""
    conn = op.get_bind()
    runs: dict[object, dict[object, bool]] = {}
    for cid, tid, result in conn.execute(
        sa.text("SELECT card_id, trajectory_id, result FROM card_evidence")
    ):
        r = json.loads(result) if isinstance(result, str) else (result or {})
        role = r.get("role", "supports") if isinstance(r, dict) else "supports"
        if role == _NEITHER:
            continue
        per_card = runs.setdefault(cid, {})
        per_card[tid] = per_card.get(tid, True) and role != _AGAINST
    rows = [{"n": sum(v.values()), "cid": cid} for cid, v in runs.items() if any(v.values())]
    if rows:
        conn.execute(sa.text("UPDATE card SET run_count = :n WHERE card_id = :cid"), rows)


def _feed() -> ModuleType:
    """Migration 0013 (its file name is no module name): the change feed's triggers."""
    path = Path(__file__).with_name("0013_card_change_feed.py")
    spec = importlib.util.spec_from_file_location("card_change_feed_0013", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def upgrade() -> None:
    """Add and backfill the column (a plain ADD COLUMN, no table rewrite), then watch it."""
    feed = _feed()
    op.add_column(
        "card", sa.Column("run_count", sa.Integer(), server_default=sa.text("0"), nullable=False)
    )
    # before the trigger watches the column: no feed row per card (a served snapshot is built
    # afresh by the code that reads the column)
    _backfill()
    feed.drop_triggers()
    feed.create_triggers(f"{feed.WATCHED}, run_count")


def downgrade() -> None:
    """Drop the column; the triggers watch what 0013 watched."""
    feed = _feed()
    feed.drop_triggers()
    with op.batch_alter_table("card", schema=None) as batch_op:
        batch_op.drop_column("run_count")
    # a SQLite batch rewrite of `card` drops its triggers: made again after it
    feed.create_triggers()
