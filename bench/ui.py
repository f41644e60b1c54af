"""Console page times at 5,000 (and 100,000) cards, on SQLite and PostgreSQL.

Each page is requested over loopback from a real uvicorn server with a signed-in session;
the time is the page's server time (its Server-Timing header: routing, the service calls,
rendering), with the client's wall time beside it. Medians and
p95 of `--repeat` requests per page. Writes bench/results/ui.json.

    PYTHONPATH=. python bench/ui.py --cards 5000 100000 --repeat 30

After seeding, PostgreSQL's tables are vacuumed and analysed (as autovacuum leaves them a
minute after a bulk load; unvacuumed, every list read 176k row versions for 100k cards). A page
that fails or times out is recorded with its error and the run goes on. `--skip try_state`
leaves a page out; `--proposed-indexes` adds the indexes the console's sorts and fact pages
need (not in the schema: a migration would add them) to measure what they would change.
`--tested 1000` gives that many cards outcomes in both arms, the rows the namespace's harms
test (memory_core.effects.fdr) reads and tests on every card page and list. `--queries 20000`
fills the query log with a day of served queries (3 cards served, 1 withheld each, every
fourth with an outcome) for the query log pages.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import psycopg
from sqlalchemy.engine import Engine

from bench.retrieval_data import query_states, seed
from bench.ui_data import outcomes, served_queries, vary
from memory_api.app import create_app
from memory_core import db
from memory_core.serve.keys import create_key
from memory_core.serve.service import MemoryService
from memory_core.settings import Settings
from tests.helpers.serve import LiveServer

OUT = Path(__file__).parent / "results" / "ui.json"
# what the list's sorts, the failure-mode picture and the fact pages would read by index
PROPOSED_INDEXES = (
    "CREATE INDEX ix_proposed_card_updated ON card (namespace, updated_at, card_id)",
    "CREATE INDEX ix_proposed_card_created ON card (namespace, created_at, card_id)",
    "CREATE INDEX ix_proposed_card_confidence ON card (namespace, confidence, card_id)",
    "CREATE INDEX ix_proposed_card_uses ON card (namespace, use_count, card_id)",
    "CREATE INDEX ix_proposed_card_kind ON card (namespace, kind, status)",
)
PG_ADMIN = "postgresql://postgres@127.0.0.1:5432/postgres"


def _analyse(engine: Engine, proposed: bool) -> None:
    """Planner statistics (and the proposed indexes) after the bulk load."""
    from sqlalchemy import text

    with engine.connect() as conn:
        if proposed:
            for ddl in PROPOSED_INDEXES:
                conn.execute(text(ddl))
            conn.commit()
        if engine.dialect.name == "postgresql":  # SQLite: as served, with no statistics
            conn.execution_options(isolation_level="AUTOCOMMIT").execute(text("VACUUM ANALYZE"))


def _timed(client: httpx.Client, method: str, url: str, repeat: int, **kw) -> dict:
    wall, server = [], []
    for i in range(repeat + 2):
        t0 = time.perf_counter()
        try:
            r = client.request(method, url, **kw)
        except httpx.TimeoutException:
            return {"error": f"no answer within {client.timeout.read} s"}
        dt = (time.perf_counter() - t0) * 1000
        if r.status_code != 200:
            return {"error": f"HTTP {r.status_code}: {r.text[:200]}"}
        if i >= 2:  # two warm-up requests
            wall.append(dt)
            server.append(float(r.headers["server-timing"].split("dur=")[1]))
    wall.sort()
    server.sort()
    return {
        "median_ms": round(statistics.median(server), 2),  # server time (Server-Timing)
        "p95_ms": round(server[int(len(server) * 0.95) - 1], 2),
        "wall_median_ms": round(statistics.median(wall), 2),
    }


def run_one(
    settings: Settings,
    n: int,
    repeat: int,
    skip: set[str],
    proposed: bool,
    tested: int,
    queries: int,
) -> dict:
    engine = db.make_engine(settings)
    t0 = time.perf_counter()
    seed(engine, n)
    vary(engine, n)
    outcomes(engine, tested)
    served_queries(engine, queries)
    _analyse(engine, proposed)
    seeded_s = time.perf_counter() - t0
    secret = create_key(engine=engine, namespace="bench", scopes=["admin"], name="bench")[1]
    svc = MemoryService(engine=engine, settings=settings)
    out: dict = {
        "cards": n,
        "seed_s": round(seeded_s, 1),
        "proposed_indexes": proposed,
        "tested_cards": tested,
        "harms_fdr": settings.decay.effects.fdr,
        "logged_queries": queries,
        "pages": {},
    }
    with LiveServer(create_app(svc)) as server, httpx.Client(base_url=server.url, timeout=60) as c:
        login = c.get("/ui/login").text.split('name="csrf" value="')[1].split('"')[0]
        assert c.post("/ui/login", data={"key": secret, "csrf": login}).status_code == 303
        page = c.get("/ui/try").text
        csrf = page.split('name="csrf" value="')[1].split('"')[0]
        # a deep keyset page: follow 'next' 20 times
        url = "/ui/cards?sort=confidence&limit=50"
        for _ in range(20):
            html = c.get(url).text
            url = (
                html.split('rel="next"')[0]
                .rsplit('href="', 1)[1]
                .split('"')[0]
                .replace("&amp;", "&")
            )
        some = c.get("/ui/cards?limit=1").text.split('href="/ui/cards/')[1].split('"')[0]
        # the card served most often in the log, and the last hour of it
        busy = c.get("/ui/queries").text.split('href="/ui/cards/')[1].split('"')[0]
        since = (datetime.now(UTC) - timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M")
        dead = c.get("/ui/dead-letters").text.split('href="/ui/trajectories/')[1].split("?")[0]
        state = json.dumps(query_states(1, n)[0])
        pages = {
            # the sign-in form reads nothing: the baseline of a loaded machine
            "empty": ("GET", "/ui/login", {}),
            "cards": ("GET", "/ui/cards", {}),
            "cards_text": ("GET", "/ui/cards?q=tool_7%20after", {}),
            "cards_tool": ("GET", "/ui/cards?tool=tool_7&status=active", {}),
            "cards_conf_range": ("GET", "/ui/cards?min_confidence=0.6&max_confidence=0.7", {}),
            "cards_page_21": ("GET", url, {}),
            "cards_sort_tool": ("GET", "/ui/cards?sort=tool&order=asc", {}),
            "cards_sort_support": ("GET", "/ui/cards?sort=support", {}),
            "cards_sort_effect": ("GET", "/ui/cards?sort=effect", {}),
            "cards_sort_last_use": ("GET", "/ui/cards?sort=last_used", {}),
            "cards_rejected": ("GET", "/ui/cards?status=rejected&status=archived", {}),
            "queries": ("GET", "/ui/queries", {}),
            "queries_card": ("GET", f"/ui/queries?card={busy}", {}),
            "queries_day": ("GET", f"/ui/queries?since={since}", {}),
            "card": ("GET", f"/ui/cards/{some}", {}),
            "try_state": (
                "POST",
                "/ui/try",
                {"data": {"csrf": csrf, "state": state, "budget": "400"}},
            ),
            "review": ("GET", "/ui/review", {}),
            "overview": ("GET", "/ui/overview", {}),
            "facts": ("GET", "/ui/facts?q=tool", {}),
            "dead_letters": ("GET", "/ui/dead-letters", {}),
            "dead_letters_page_2": ("GET", "/ui/dead-letters?page=2", {}),
            "keys": ("GET", "/ui/keys", {}),
            "trajectory": ("GET", f"/ui/trajectories/{dead}?step=10", {}),
        }
        for name, (method, u, kw) in pages.items():
            if name in skip:
                continue
            out["pages"][name] = _timed(c, method, u, repeat, **kw)
            p = out["pages"][name]
            if "error" in p:
                print(f"  {engine.dialect.name} {n:>7} {name:<18} {p['error']}", flush=True)
                continue
            print(
                f"  {engine.dialect.name} {n:>7} {name:<18} server median {p['median_ms']:7.2f} "
                f"ms  p95 {p['p95_ms']:7.2f} ms  wall median {p['wall_median_ms']:7.2f} ms",
                flush=True,
            )
    engine.dispose()
    return out


def _write(results: list[dict], out: Path) -> None:
    """The results so far (written after each run, so a stopped run keeps what it measured)."""
    worst = {
        f"{r['db']}_{r['cards']}": max(
            (p["median_ms"] for p in r["pages"].values() if "median_ms" in p), default=None
        )
        for r in results
    }
    load = Path("/proc/loadavg").read_text().split()[0] if Path("/proc/loadavg").exists() else "?"
    out.parent.mkdir(exist_ok=True)
    out.write_text(
        json.dumps(
            {"results": results, "slowest_page_median_ms": worst, "load_average_1m": load},
            indent=2,
        )
    )
    print("slowest page (median server ms):", worst, "load", load, flush=True)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--cards", type=int, nargs="+", default=[5000])
    ap.add_argument("--repeat", type=int, default=30)
    ap.add_argument("--db", nargs="+", default=["sqlite", "postgresql"])
    ap.add_argument("--skip", nargs="*", default=[], help="pages to leave out (try_state, ...)")
    ap.add_argument("--proposed-indexes", action="store_true", help="add PROPOSED_INDEXES")
    ap.add_argument("--out", type=Path, default=OUT)
    ap.add_argument(
        "--tested", type=int, default=0, help="cards with outcomes in both arms (harms test)"
    )
    ap.add_argument("--queries", type=int, default=20_000, help="query log rows (a day's)")
    a = ap.parse_args()
    opts = {
        "skip": set(a.skip),
        "proposed": a.proposed_indexes,
        "tested": a.tested,
        "queries": a.queries,
    }
    results = []
    for n in a.cards:
        for kind in a.db:
            with tempfile.TemporaryDirectory() as tmp:
                if kind == "sqlite":
                    s = Settings(data_dir=Path(tmp))
                    db.upgrade(s)
                    results.append({"db": kind, **run_one(s, n, a.repeat, **opts)})
                    _write(results, a.out)
                else:
                    name = f"hindsight_bench_ui_{uuid.uuid4().hex[:8]}"
                    with psycopg.connect(PG_ADMIN, autocommit=True) as conn:
                        conn.execute(f'CREATE DATABASE "{name}"')
                    try:
                        s = Settings(
                            data_dir=Path(tmp),
                            database_url=f"postgresql://postgres@127.0.0.1:5432/{name}",
                        )
                        db.upgrade(s)
                        results.append({"db": kind, **run_one(s, n, a.repeat, **opts)})
                        _write(results, a.out)
                    finally:
                        with psycopg.connect(PG_ADMIN, autocommit=True) as conn:
                            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


if __name__ == "__main__":
    main()
