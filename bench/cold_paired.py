"""Cold loads from the database by two checkouts of Hindsight, alternately, each in a new
process (`bench/cold_file.py --one`): wall, CPU, RSS after the load and its peak, medians.
On a noisy machine only runs made side by side compare.

    python bench/cold_paired.py BASE_REPO NEW_REPO DATA_DIR RUNS OUT_JSON [MODE]

DATA_DIR holds a database seeded by bench/scale_data.seed (namespace "bench"); MODE is
database (the default) or file. HINDSIGHT_DATABASE_URL picks another database.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

KEYS = ("wall_s", "cpu_s", "rss_mb_after_load", "rss_mb_peak", "first_query_ms")


def _one(repo: Path, data: Path, mode: str) -> dict:
    out = subprocess.run(
        [sys.executable, str(repo / "bench/cold_file.py"), "--one", str(data), mode],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "PYTHONPATH": str(repo)},
    )
    return dict(json.loads(out.stdout.strip().splitlines()[-1]), load_avg=os.getloadavg()[0])


def main() -> None:
    """Alternate the two checkouts RUNS times; medians and raw runs to OUT_JSON."""
    base, new, data = Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3])
    runs, out_path = int(sys.argv[4]), Path(sys.argv[5])
    mode = sys.argv[6] if len(sys.argv) > 6 else "database"
    raw: dict[str, list[dict]] = {"base": [], "new": []}
    for _ in range(runs):
        for name, repo in (("base", base), ("new", new)):
            raw[name].append(_one(repo, data, mode))
            print(name, json.dumps(raw[name][-1]), flush=True)
    medians = {
        name: {k: statistics.median(r[k] for r in rs) for k in KEYS} for name, rs in raw.items()
    }
    result = {
        "what": f"cold load of namespace 'bench' from the {mode}, two checkouts alternately, "
        "a new process each run (bench/cold_file.py --one)",
        "database": "postgresql" if os.environ.get("HINDSIGHT_DATABASE_URL") else "sqlite",
        "cards": raw["new"][0]["cards"],
        "base": str(base),
        "new": str(new),
        "medians": medians,
        "raw": raw,
    }
    print(json.dumps(medians))
    out_path.write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
