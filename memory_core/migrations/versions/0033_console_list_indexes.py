"""Indexes for the console's pages at 100,000 cards: the card list's default order, a card's
siblings, the overview's uses per day and the Changes page.

* card (namespace, kind, updated_at, status): the list (experience cards, active and in review,
  newest change first) walks it in order and stops at its page, where it sorted every card of
  the kind (SQLite 98 ms, PostgreSQL 148 ms at 100,000 cards); the status in the entry lets a
  rarer status filter skip rows without reading them. The overview's failure modes (the
  active experience cards changed last) walk it too. `updated_at` changes with a card's
  version, not with its uses or outcomes, so served outcomes keep their HOT updates.
* card (namespace, the first step's tool or ''), an expression index: a card page's siblings
  (the live cards whose first tool is this card's) read that tool's few cards, where each read
  scanned the kind's cards for a step of the tool until it had a hundred (PostgreSQL 108 ms,
  SQLite 50 ms at 100,000 cards and 400 tools); the list sorted by tool walks it in order.
  Written only when a card's actions change.
* card_use (namespace, used_at) in place of (namespace): the uses per day of the last two
  weeks read the entries alone instead of every use row of the namespace.
* card_version (created_at): the Changes page reads the versions written since a time; with
  no index SQLite walked every card of the namespace for its versions (174 ms at 100,000
  cards, none of them changed). Versions are only ever added.

Revision ID: 0033
Revises: 0023
Create Date: 2026-12-07 17:40:00
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0033"
down_revision: str | None = "0023"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# frozen here: what this revision created must not change when the models' spelling does
# (memory_core.models.card.FIRST_TOOL_SQL must equal it, or a later revision rebuilds the index)
FIRST_TOOL_SQL = {
    "postgresql": "(coalesce(action_sequence #>> '{0,tool}', ''))",
    "sqlite": "coalesce(json_extract(action_sequence, '$[0].tool'), '')",
}


def upgrade() -> None:
    """Add the list's, the first tool's and the versions' time indexes; widen the use log's
    namespace index by the time of use."""
    op.create_index(
        "ix_card_namespace_kind_updated", "card", ["namespace", "kind", "updated_at", "status"]
    )
    create_first_tool_index()
    op.create_index("ix_card_use_namespace_used", "card_use", ["namespace", "used_at"])
    op.drop_index("ix_card_use_namespace", table_name="card_use")
    op.create_index("ix_card_version_created", "card_version", ["created_at"])


def create_first_tool_index() -> None:
    """The first tool's expression index, spelt as the queries spell it (a new store's schema
    adds it too: memory_core.schema_new)."""
    expr = FIRST_TOOL_SQL[op.get_bind().dialect.name]
    op.execute(f"CREATE INDEX ix_card_first_tool ON card (namespace, {expr})")


def downgrade() -> None:
    """Back to the namespace index alone, without the list's."""
    op.drop_index("ix_card_version_created", table_name="card_version")
    op.create_index("ix_card_use_namespace", "card_use", ["namespace"])
    op.drop_index("ix_card_use_namespace_used", table_name="card_use")
    op.drop_index("ix_card_first_tool", table_name="card")
    op.drop_index("ix_card_namespace_kind_updated", table_name="card")
