"""The vector index on real engines: embedded Qdrant (qdrant-edge-py), qdrant-client local mode,
and the rebuild / drift check against SQLite and PostgreSQL."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
import uuid
from pathlib import Path

import numpy as np
import pytest
from qdrant_client import QdrantClient
from sqlalchemy import update
from sqlalchemy.engine import Engine
from sqlmodel import col

from memory_core.db import session_scope
from memory_core.errors import IndexUnavailable, InvalidInput
from memory_core.index import IndexPoint, VectorIndex, open_index
from memory_core.index.edge import EdgeIndex
from memory_core.index.server import ServerIndex
from memory_core.index.sync import check_index, rebuild_index
from memory_core.models.card import Card
from memory_core.models.embedding import CardEmbedding
from memory_core.settings import Settings
from tests.helpers.cli import hindsight
from tests.helpers.data import REPO

# qdrant-client local mode ignores payload indexes (a server uses them); the filter still works
pytestmark = pytest.mark.filterwarnings("ignore:Payload indexes have no effect")
DIM = 8
MODEL = "test-model"


def unit(*xs: float) -> list[float]:
    v = np.zeros(DIM, dtype=np.float32)
    v[: len(xs)] = xs
    return (v / np.linalg.norm(v)).tolist()


def point(vec: list[float], *, ns: str = "a", kind: str = "experience", cid=None) -> IndexPoint:
    return IndexPoint(card_id=cid or uuid.uuid4(), vector=vec, namespace=ns, kind=kind, model=MODEL)


@pytest.fixture(params=["edge", "client-local"])
def index(request: pytest.FixtureRequest, tmp_path: Path):
    """Each implementation on a real engine (no Qdrant server here: the client's local mode)."""
    if request.param == "edge":
        idx: VectorIndex = EdgeIndex(path=tmp_path / "index", dim=DIM)
    else:
        idx = ServerIndex(client=QdrantClient(":memory:"), collection="cards", dim=DIM)
    yield idx
    idx.close()


def test_upsert_overwrites_by_card_id(index: VectorIndex) -> None:
    p = point(unit(1, 0))
    index.upsert([p])
    index.upsert([IndexPoint(p.card_id, unit(0, 1), "a", "experience", MODEL)])
    assert index.ids() == {p.card_id}
    [(cid, score)] = index.search(vector=unit(0, 1), namespace="a")
    assert cid == p.card_id and score == pytest.approx(1.0, abs=1e-5)


def test_search_filters_namespace_and_kind_best_first(index: VectorIndex) -> None:
    near, mid, far = point(unit(1, 0.1)), point(unit(1, 1)), point(unit(0, 1))
    fact = point(unit(1, 0), kind="fact")
    other_ns = point(unit(1, 0), ns="b")
    index.upsert([far, near, mid, fact, other_ns])
    hits = index.search(vector=unit(1, 0), namespace="a", kind="experience")
    assert [c for c, _ in hits] == [near.card_id, mid.card_id, far.card_id]
    assert hits[0][1] > hits[1][1] > hits[2][1]
    assert hits[1][1] == pytest.approx(np.sqrt(0.5), abs=1e-5)  # cosine
    all_a = index.search(vector=unit(1, 0), namespace="a", limit=2)
    assert [c for c, _ in all_a] == [fact.card_id, near.card_id]
    assert [c for c, _ in index.search(vector=unit(1, 0), namespace="b")] == [other_ns.card_id]
    assert index.search(vector=unit(1, 0), namespace="nobody") == []
    assert index.ids(namespace="b") == {other_ns.card_id}


def test_delete(index: VectorIndex) -> None:
    a, b = point(unit(1)), point(unit(1, 1))
    index.upsert([a, b])
    index.delete([a.card_id, uuid.uuid4()])  # an unknown id is ignored
    assert index.ids() == {b.card_id}
    assert [c for c, _ in index.search(vector=unit(1), namespace="a")] == [b.card_id]


def test_wrong_vector_size_refused(index: VectorIndex) -> None:
    with pytest.raises(InvalidInput, match="3 dimensions"):
        index.upsert([point([1.0, 0.0, 0.0])])
    with pytest.raises(InvalidInput):
        index.search(vector=[1.0], namespace="a")


def test_edge_persists_across_reopen_and_refuses_another_dim(tmp_path: Path) -> None:
    path = tmp_path / "index"
    idx = EdgeIndex(path=path, dim=DIM)
    pts = [point(unit(1, i / 10)) for i in range(5)]
    idx.upsert(pts)
    before = idx.search(vector=unit(1), namespace="a")
    idx.close()
    with pytest.raises(IndexUnavailable, match="holds 8-d"):
        EdgeIndex(path=path, dim=DIM * 2)
    again = EdgeIndex(path=path, dim=DIM)
    assert again.ids() == {p.card_id for p in pts}
    assert again.search(vector=unit(1), namespace="a") == before
    again.close()
    # dropping is explicit: recreate=True, never on its own
    fresh = EdgeIndex(path=path, dim=DIM * 2, recreate=True)
    assert fresh.ids() == set()
    fresh.close()


def test_edge_is_one_process_at_a_time(tmp_path: Path) -> None:
    path = tmp_path / "index"
    idx = EdgeIndex(path=path, dim=DIM)
    code = (
        "import sys; from pathlib import Path; from memory_core.index.edge import EdgeIndex\n"
        "from memory_core.errors import IndexUnavailable\n"
        f"try:\n EdgeIndex(path=Path({str(path)!r}), dim={DIM})\n"
        "except IndexUnavailable as e:\n print(e); sys.exit(3)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True)
    assert proc.returncode == 3, proc.stderr
    assert "open in another process" in proc.stdout
    with pytest.raises(IndexUnavailable):  # a second opener in this process too
        EdgeIndex(path=path, dim=DIM)
    idx.close()
    EdgeIndex(path=path, dim=DIM).close()  # released on close


def test_client_refuses_another_dim() -> None:
    client = QdrantClient(":memory:")
    ServerIndex(client=client, collection="cards", dim=DIM)
    with pytest.raises(IndexUnavailable, match="holds 8-d"):
        ServerIndex(client=client, collection="cards", dim=4)


def test_factory_picks_embedded_without_url(tmp_path: Path) -> None:
    idx = open_index(Settings(data_dir=tmp_path / "data"), dim=DIM)
    assert isinstance(idx, EdgeIndex) and idx.path == tmp_path / "data" / "index"
    idx.close()


# --- rebuild and drift, against the database (SQLite and PostgreSQL) ---


def add_card(engine: Engine, vec: list[float] | None, *, ns: str = "a", kind: str = "experience"):
    card_id = uuid.uuid4()
    with session_scope(engine) as session:
        session.add(
            Card(
                card_id=card_id,
                namespace=ns,
                kind=kind,
                scenario=f"card {card_id}",
                status="active",
                signature=hashlib.sha256(card_id.bytes).hexdigest()[:40],
            )
        )
    if vec is not None:
        with session_scope(engine) as session:
            session.add(
                CardEmbedding(
                    card_id=card_id,
                    model=MODEL,
                    text_hash="x",
                    dim=DIM,
                    vector=np.asarray(vec, dtype=np.float32).tobytes(),
                )
            )
    return card_id


def set_status(engine: Engine, card_id: uuid.UUID, status: str) -> None:
    with session_scope(engine) as session:
        session.execute(update(Card).where(col(Card.card_id) == card_id).values(status=status))


def test_rebuild_check_archive_and_wipe(engine: Engine, tmp_path: Path) -> None:
    ids = [
        add_card(engine, unit(1, i / 4), kind="fact" if i == 3 else "experience") for i in range(6)
    ]
    other = add_card(engine, unit(0, 1), ns="b")
    no_vector = add_card(engine, None)  # not embedded yet: not in the served set
    idx = EdgeIndex(path=tmp_path / "index", dim=DIM)
    assert check_index(engine=engine, index=idx, model=MODEL).missing_count == 7

    report = rebuild_index(engine=engine, index=idx, model=MODEL)
    assert (report.upserted, report.deleted) == (7, 0)
    drift = check_index(engine=engine, index=idx, model=MODEL)
    assert drift.clean and drift.expected == drift.indexed == 7
    assert no_vector not in idx.ids()
    assert idx.ids(namespace="b") == {other}
    before = idx.search(vector=unit(1, 0.3), namespace="a", limit=10)
    assert len(before) == 6

    set_status(engine, ids[0], "archived")
    drift = check_index(engine=engine, index=idx, model=MODEL)
    assert (drift.stale, drift.missing) == ([ids[0]], [])
    # a namespace-scoped check sees only its own namespace
    assert check_index(engine=engine, index=idx, model=MODEL, namespace="b").clean
    report = rebuild_index(engine=engine, index=idx, model=MODEL)
    assert (report.upserted, report.deleted) == (6, 1)
    assert check_index(engine=engine, index=idx, model=MODEL).clean

    # wipe the index: the rebuild gives the same search results as before
    set_status(engine, ids[0], "active")
    idx.close()
    idx = EdgeIndex(path=tmp_path / "index", dim=DIM, recreate=True)
    assert check_index(engine=engine, index=idx, model=MODEL).missing_count == 7
    rebuild_index(engine=engine, index=idx, model=MODEL)
    after = idx.search(vector=unit(1, 0.3), namespace="a", limit=10)
    assert [c for c, _ in after] == [c for c, _ in before]
    assert [s for _, s in after] == pytest.approx([s for _, s in before], abs=1e-6)
    idx.close()


def test_rebuild_refuses_vectors_of_another_dim(engine: Engine, tmp_path: Path) -> None:
    add_card(engine, unit(1))
    idx = EdgeIndex(path=tmp_path / "index", dim=DIM * 2)
    with pytest.raises(InvalidInput, match="8 dimensions"):
        rebuild_index(engine=engine, index=idx, model=MODEL)
    idx.close()


def test_cli_rebuild_and_check(engine: Engine, env_for: dict[str, str]) -> None:
    kept = add_card(engine, unit(1))
    gone = add_card(engine, unit(0, 1))
    env = env_for | {"HINDSIGHT_EMBEDDING__PROVIDER": "none"}

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return hindsight(env, "index", *args, "--format", "json", check=False)

    proc = run("check")
    assert proc.returncode == 1 and json.loads(proc.stdout)["missing_count"] == 2
    proc = run("rebuild")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) | {"index": ""} == {
        "model": MODEL,
        "namespace": None,
        "upserted": 2,
        "deleted": 0,
        "index": "",
        "dim": DIM,
    }
    assert run("check").returncode == 0
    set_status(engine, gone, "archived")
    out = json.loads(run("check").stdout)
    assert out["stale"] == [str(gone)] and out["missing"] == [] and kept
    assert json.loads(run("rebuild").stdout)["deleted"] == 1
    table = hindsight(env, "index", "check", check=False)
    assert table.returncode == 0 and "no drift" in table.stdout
