"""Export and import of a namespace: SQLite to PostgreSQL and back gives the same dump,
importing twice changes nothing, a bad file is refused by line with nothing written."""

from __future__ import annotations

import io
import shutil
import uuid
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest
from sqlalchemy import Engine

from memory_core import db
from memory_core.errors import InvalidInput
from memory_core.namespaces.counts import namespace_counts
from memory_core.namespaces.export import export_lines, export_namespace
from memory_core.namespaces.importer import import_namespace
from memory_core.settings import Settings
from tests.conftest import _empty
from tests.helpers.namespace_history import history

NS = "team-io"


def _dump(engine: Engine, namespace: str = NS, *, runs: bool = True) -> list[bytes]:
    return list(export_lines(engine=engine, namespace=namespace, with_trajectories=runs))


@pytest.fixture
def stores(tmp_path: Path, sqlite_template: Path, pg_url: str) -> Iterator[list[Engine]]:
    """Two fresh SQLite stores and one fresh PostgreSQL store."""
    engines = []
    for name in ("a", "b"):
        shutil.copytree(sqlite_template, tmp_path / name)
        engines.append(db.make_engine(Settings(data_dir=tmp_path / name)))
    pg = db.make_engine(Settings(data_dir=tmp_path / "pg", database_url=pg_url))
    _empty(pg)
    engines.append(pg)
    yield engines
    for e in engines:
        e.dispose()


@pytest.mark.parametrize("runs", [True, False], ids=["with-runs", "summaries"])
def test_sqlite_to_postgresql_and_back_gives_the_same_dump(stores, runs) -> None:
    lite, back, pg = stores
    history(lite, NS)
    history(lite, "team-other")
    first = _dump(lite, runs=runs)
    assert orjson.loads(first[0])["format"] == "hindsight-namespace"
    kinds = {orjson.loads(line)["type"] for line in first[1:]}
    assert kinds == {"trajectory", "card", "card_version", "card_evidence"}

    got = import_namespace(engine=pg, lines=first, namespace=None)
    assert got.added == dict(got.read) and got.added["card"] == 5
    assert _dump(pg, runs=runs) == first
    import_namespace(engine=back, lines=_dump(pg, runs=runs))
    assert _dump(back, runs=runs) == first
    assert namespace_counts(pg) == namespace_counts(back)  # the other namespace stayed home
    if not runs:  # the runs as evidence cites them: no steps, no error
        run = orjson.loads(first[1])["row"]
        assert run["steps"] == [] and run["error"] is None and run["extra"] == {"summary": True}


def test_importing_twice_changes_nothing(engine) -> None:
    history(engine, NS)
    first = _dump(engine)
    again = import_namespace(engine=engine, lines=first)
    assert set(again.added.values()) == {0} and again.read["card"] == 5
    assert _dump(engine) == first


def test_into_another_name_a_copy_beside_the_original(engine) -> None:
    history(engine, NS)
    first = _dump(engine)
    out = import_namespace(engine=engine, lines=first, namespace="team-copy")
    assert out.added["card"] == 5 and out.added["card_evidence"] == 10
    assert _dump(engine) == first  # the original is as it was
    copy = _dump(engine, "team-copy")
    assert len(copy) == len(first)
    ids = {orjson.loads(line)["row"].get("card_id") for line in first[1:]} - {None}
    assert ids.isdisjoint(orjson.loads(line)["row"].get("card_id") for line in copy[1:])
    facts = [orjson.loads(x)["row"] for x in copy if b'"kind":"fact"' in x]
    new = next(f for f in facts if f["supersedes"])
    assert new["supersedes"] == next(f for f in facts if f["superseded_by"])["card_id"]
    assert new["valid_until"] == "2031-05-04T03:02:01.123456Z"
    again = import_namespace(engine=engine, lines=first, namespace="team-copy")
    assert set(again.added.values()) == {0} and _dump(engine, "team-copy") == copy


def test_a_card_beside_a_live_one_with_its_signature_is_reported(engine) -> None:
    """The unique live signature makes the insert skip a card whose namespace holds another
    live card with its signature: the import says which, instead of nothing."""
    from memory_core.db import session_scope
    from memory_core.models import Card
    from tests.helpers.serve import add_card

    history(engine, NS)
    lone = add_card(engine, namespace=NS, scenario="a lesson with no evidence")
    held = add_card(engine, namespace="team-copy", scenario="the copy's own lesson")
    with session_scope(engine) as s:
        row = s.get(Card, held.card_id)
        row.signature = lone.signature
        s.add(row)
    lines = _dump(engine)
    out = import_namespace(engine=engine, lines=lines, namespace="team-copy")
    skipped = uuid.uuid5(uuid.NAMESPACE_URL, f"hindsight:team-copy:{lone.card_id}")
    assert out.same_signature == [skipped]
    assert out.added["card"] == out.read["card"] - 1 == 5
    again = import_namespace(engine=engine, lines=lines, namespace="team-copy")
    assert again.added["card"] == 0 and again.same_signature == [skipped]  # the rest: there
    assert import_namespace(engine=engine, lines=lines).same_signature == []  # its own home


def _broken(lines: list[bytes], n: int, line: bytes) -> list[bytes]:
    return [*lines[: n - 1], line, *lines[n:]]


def test_a_bad_line_is_named_and_nothing_is_written(engine) -> None:
    history(engine, NS)
    lines = _dump(engine)
    card = next(i for i, x in enumerate(lines, 1) if b'"type":"card"' in x)
    row = orjson.loads(lines[card - 1])
    bad_confidence = orjson.dumps({**row, "row": {**row["row"], "confidence": "high"}})
    cases = {
        b"{not json\n": "not JSON",
        bad_confidence: "card.confidence: expected a number",
        orjson.dumps({"type": "hologram", "row": {}}): "unknown record type 'hologram'",
        orjson.dumps({**row, "row": {**row["row"], "mood": 1}}): "columns this schema does not",
    }
    for line, says in cases.items():
        with pytest.raises(InvalidInput, match=f"line {card + 5}: .*{says}"):
            import_namespace(
                engine=engine, lines=_broken(lines, card + 5, line), namespace="team-new"
            )
        assert namespace_counts(engine, "team-new") == []  # earlier lines were not kept


def test_the_header_names_the_format_and_version(engine) -> None:
    history(engine, NS)
    lines = _dump(engine)
    head = orjson.loads(lines[0])
    assert head["schema"] and head["version"] == 1 and head["namespace"] == NS
    for first, says in (
        (orjson.dumps({**head, "version": 9}), "the file is in format version 9 .*newer than"),
        (orjson.dumps({**head, "version": 0}), "format version 0 is not valid"),
        (b'{"cards": []}', "not a namespace export"),
    ):
        with pytest.raises(InvalidInput, match=f"line 1: {says}"):
            import_namespace(engine=engine, lines=[first, *lines[1:]], namespace="x")
    with pytest.raises(InvalidInput, match="line 1"):
        import_namespace(engine=engine, lines=[], namespace="x")


def test_a_file_of_an_older_schema_gets_the_defaults(engine) -> None:
    """Columns added after the file was written (here the facts' standing and the cards' run
    count) take their defaults."""
    history(engine, NS)
    lines = []
    for line in _dump(engine):
        record = orjson.loads(line)
        if record.get("type") == "card":
            for gone in ("standing", "run_count", "pinned"):
                record["row"].pop(gone)
        lines.append(orjson.dumps(record))
    out = import_namespace(engine=engine, lines=lines, namespace="team-old")
    assert out.added["card"] == 5
    cards = [orjson.loads(x)["row"] for x in _dump(engine, "team-old") if b'"card_id"' in x]
    assert {(c["run_count"], c["pinned"]) for c in cards if "scenario" in c} == {(0, False)}


def test_export_counts_what_it_wrote(engine) -> None:
    history(engine, NS)
    buf = io.BytesIO()
    counts = export_namespace(engine=engine, namespace=NS, write=buf.write)
    assert counts == {"trajectory": 2, "card": 5, "card_version": 7, "card_evidence": 10}
    assert buf.getvalue().count(b"\n") == 1 + sum(counts.values())
