"""Deleting a namespace leaves none of its text in the database, the index or the data
directory, and leaves every other namespace as it was."""

from __future__ import annotations

import hashlib

from sqlalchemy import inspect, text

from memory_core.index.edge import EdgeIndex
from memory_core.models import NamespaceDeletion
from memory_core.namespaces.counts import namespace_counts
from memory_core.namespaces.delete import delete_namespace
from memory_core.namespaces.plan import STEPS, UNRELATED
from memory_core.recall.vectors import vector_cache_path
from memory_core.validate.summary import report_folder
from tests.helpers.namespace_data import DIM, plant
from tests.helpers.retention_data import occurrences

MARKER = "zq7-planted-marker"
GONE = f"team-{MARKER}"  # the name itself is planted: the index and the feed hold only names
KEPT_MARKER = "kept-marker-41c"
KEPT = "team-kept"


def _rows_of(engine, namespace: str) -> list[tuple]:
    """Every card and trajectory of a namespace, as the database holds them."""
    with engine.connect() as conn:
        cards = conn.execute(
            text("SELECT * FROM card WHERE namespace = :ns ORDER BY card_id"), {"ns": namespace}
        ).all()
        runs = conn.execute(
            text("SELECT * FROM trajectory WHERE namespace = :ns ORDER BY id"), {"ns": namespace}
        ).all()
    return [tuple(r) for r in cards + runs]


def _nearest(settings, namespace: str) -> list:
    index = EdgeIndex(path=settings.data_dir / "index", dim=DIM)
    try:
        return index.search(vector=[1.0, 0.5, 0.5, 0.25], namespace=namespace, limit=10)
    finally:
        index.close()


def test_every_table_is_deleted_from_or_holds_no_namespace(engine) -> None:
    planned = {t for t, _ in STEPS}
    tables = set(inspect(engine).get_table_names())
    assert tables - planned - UNRELATED == set(), "a table the namespace deletion ignores"
    assert planned <= tables


def test_a_deleted_namespace_leaves_nothing_and_the_others_are_untouched(settings, engine):
    planted = plant(engine, settings, namespace=GONE, marker=MARKER)
    plant(engine, settings, namespace=KEPT, marker=KEPT_MARKER)
    before = (namespace_counts(engine, KEPT), _rows_of(engine, KEPT), _nearest(settings, KEPT))
    assert occurrences(settings, MARKER) > 0
    # the reports hold card ids and derived numbers, not text: the rejected draft's id is the
    # marker there (as GX prints it, and as each database stores it)
    ids = (str(planted.rejected), planted.rejected.hex)
    report = report_folder(settings.reports_dir, GONE)
    pages = [p.read_bytes() for p in report.rglob("*.html")]
    assert any(i.encode() in page for i in ids for page in pages)
    assert sum(occurrences(settings, i) for i in ids) > 0

    out = delete_namespace(engine=engine, settings=settings, namespace=GONE, actor="test")

    assert out.rows["card"] == len(planted.cards) + 1  # and the rejected draft
    assert out.rows["trajectory"] == 2 and out.rows["llm_answer"] == 3
    assert out.vectors == len(planted.cards)
    assert out.files > 2  # the snapshot, the cached vectors and the validation report's pages
    assert not vector_cache_path(data_dir=settings.data_dir, namespace=GONE).exists()
    assert not report_folder(settings.reports_dir, GONE).exists()
    assert vector_cache_path(data_dir=settings.data_dir, namespace=KEPT).is_file()
    assert (report_folder(settings.reports_dir, KEPT) / "index.html").is_file()
    assert all(n > 0 for t, n in out.rows.items()), out.rows
    assert namespace_counts(engine, GONE) == []
    after = (namespace_counts(engine, KEPT), _rows_of(engine, KEPT), _nearest(settings, KEPT))
    assert after == before and before[2]
    assert occurrences(settings, MARKER) == 0
    assert sum(occurrences(settings, i) for i in ids) == 0
    assert occurrences(settings, KEPT_MARKER) > 0  # the search sees what is still there
    with engine.connect() as conn:
        records = conn.execute(NamespaceDeletion.__table__.select()).mappings().all()  # type: ignore[attr-defined]
    assert len(records) == 1
    assert records[0]["namespace_sha256"] == hashlib.sha256(GONE.encode()).hexdigest()
    assert records[0]["rows"] == out.rows and records[0]["actor"] == "test"

    again = delete_namespace(engine=engine, settings=settings, namespace=GONE, actor="test")
    assert again.total == 0 and again.vectors == 0 and again.files == 0
