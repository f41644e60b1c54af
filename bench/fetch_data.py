"""Fetch the public data the quality, trust and lesson benchmarks read, into one folder:

    python bench/fetch_data.py data   # data/tau-bench-airline/, data/locomo/

tau-bench's airline runs (sierra-research/tau-bench, MIT licence) and the LoCoMo conversations
(snap-research/LoCoMo, CC BY-NC 4.0: for evaluation only, never shipped with the product), each
pinned to a commit. A file already there is kept; nothing is half-written (a temp file, then a
rename).
"""

from __future__ import annotations

import argparse
import json
import sys
import urllib.request
from pathlib import Path
from typing import Any

SOURCES = {
    "tau-bench-airline/trajectories.json": "https://raw.githubusercontent.com/sierra-research/"
    "tau-bench/7362a1708d720a4d697d042f21fd8637ea144c3b/historical_trajectories/gpt-4o-airline.json",
    "locomo/locomo-dev.json": "https://raw.githubusercontent.com/snap-research/LoCoMo/"
    "e130f7ad198c5520c181b2f7488c7d66ee62feff/data/locomo10.json",
}
# a field every record of each file has, to refuse a page that is not the data
RECORD_FIELD = {"tau-bench-airline/trajectories.json": "traj", "locomo/locomo-dev.json": "qa"}


def check(name: str, payload: Any) -> None:
    """Raise ValueError unless payload is a non-empty list of the file's records."""
    field = RECORD_FIELD[name]
    if not isinstance(payload, list) or not payload:
        raise ValueError(f"{name}: expected a JSON list of records")
    if not all(isinstance(r, dict) and field in r for r in payload):
        raise ValueError(f"{name}: a record without {field!r}")


def fetch(name: str, url: str, out: Path, timeout: float = 120.0) -> Path:
    """Download one file into out/name, checked, unless it is there already."""
    path = out / name
    if path.exists():
        return path
    with urllib.request.urlopen(url, timeout=timeout) as answer:
        body = answer.read()
    check(name, json.loads(body))
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".part")
    tmp.write_bytes(body)
    tmp.replace(path)
    return path


def main(argv: list[str] | None = None) -> int:
    """Fetch every source into the folder given; exit 1 naming any that failed."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", type=Path, help="the data folder (created)")
    args = ap.parse_args(argv)
    failed = 0
    for name, url in SOURCES.items():
        try:
            print(f"{fetch(name, url, args.out)}")
        except (OSError, ValueError) as exc:
            print(f"{name}: not fetched from {url}: {exc}", file=sys.stderr)
            failed += 1
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
