"""Which rows belong to a namespace, table by table, in an order the foreign keys allow.

Every table holding a namespace's text, or a reference to its cards or trajectories, is named
here (tests/memory_core/test_namespace_delete.py fails on a table that is not): children before
their parents, and the change feed after the cards, whose delete trigger writes to it."""

from __future__ import annotations

_CARDS = "SELECT card_id FROM card WHERE namespace = :ns"
_RUNS = "SELECT id FROM trajectory WHERE namespace = :ns"

# (table, the WHERE clause selecting the namespace's rows); each runs in its own transaction,
# so a deletion killed half-way leaves whole tables done and the next run takes the rest
STEPS: tuple[tuple[str, str], ...] = (
    ("card_use", f"namespace = :ns OR card_id IN ({_CARDS})"),
    ("query_log", "namespace = :ns"),
    ("card_embedding", f"card_id IN ({_CARDS})"),
    ("card_evidence", f"card_id IN ({_CARDS}) OR trajectory_id IN ({_RUNS})"),
    ("card_version", f"card_id IN ({_CARDS})"),
    ("card_archive", f"namespace = :ns OR card_id IN ({_CARDS})"),
    ("card_backtest", f"namespace = :ns OR card_id IN ({_CARDS})"),
    ("llm_answer", f"namespace = :ns OR trajectory_id IN ({_RUNS})"),
    ("card", "namespace = :ns"),
    ("trajectory", "namespace = :ns"),
    ("card_change", "namespace = :ns"),
    ("validation_run", "namespace = :ns"),
    ("trace_span", "namespace = :ns"),
    ("api_key", "namespace = :ns"),
    ("namespace_retention", "namespace = :ns"),
)

# tables that hold no namespace's text: the migrations' version and the deletions' record
# (which keeps the namespace as a hash)
UNRELATED = frozenset({"alembic_version", "namespace_deletion"})
