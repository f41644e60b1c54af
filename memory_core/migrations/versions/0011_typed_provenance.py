"""typed provenance: every card says where its content came from (provenance.origin)

Cards written before this revision carry only a producer name. The origin is derived from it
(memory_core.screen.provenance.origin_of: rule extractor -> agent_action, LLM -> llm, rule
facts -> user, operator / a key -> operator) and stored, so ranking, review and the prompt
block read one typed field. Downgrade removes the field again.

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-01 05:55:00
"""

from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa
from alembic import op

from memory_core.models.columns import JSONType
from memory_core.screen.provenance import origin_of

revision: str = "0011"
down_revision: str | None = "0010"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_CARD = sa.table(
    "card",
    sa.column("card_id", sa.Uuid()),
    sa.column("provenance", JSONType),
)
_BATCH = 1000


def _rewrite(change: Any) -> None:
    conn = op.get_bind()
    rows = conn.execute(sa.select(_CARD.c.card_id, _CARD.c.provenance)).all()
    updates = []
    for cid, prov in rows:
        new = change(dict(prov or {}))
        if new != (prov or {}):
            updates.append({"cid": cid, "prov": new})
    stmt = (
        sa.update(_CARD)
        .where(_CARD.c.card_id == sa.bindparam("cid"))
        .values(provenance=sa.bindparam("prov", type_=JSONType))
    )
    for i in range(0, len(updates), _BATCH):
        conn.execute(stmt, updates[i : i + _BATCH])


def upgrade() -> None:
    _rewrite(lambda p: {**p, "origin": origin_of(p).value} if "origin" not in p else p)


def downgrade() -> None:
    _rewrite(lambda p: {k: v for k, v in p.items() if k != "origin"})
