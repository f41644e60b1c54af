"""Locating the shared real data, and replicating it with distinct ids."""

from __future__ import annotations

import copy
import json
import os
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]


def shared_data_dir() -> Path:
    """HINDSIGHT_SHARED_DATA, the repository's data/ (bench/fetch_data.py), or ../shared/data."""
    candidates = [
        os.environ.get("HINDSIGHT_SHARED_DATA"),
        REPO / "data",
        REPO.parent / "shared" / "data",
        Path("/work/shared/data"),
    ]
    for c in candidates:
        if c and (Path(c) / "tau-bench-airline" / "trajectories.json").is_file():
            return Path(c)
    raise FileNotFoundError(
        "no data: python bench/fetch_data.py data, or set HINDSIGHT_SHARED_DATA"
    )


def tau_path() -> Path:
    """The tau-bench airline runs."""
    return shared_data_dir() / "tau-bench-airline" / "trajectories.json"


def tau_runs() -> list[dict[str, Any]]:
    """The tau-bench airline runs as parsed JSON."""
    return json.loads(tau_path().read_text())


def replicate(runs: list[dict[str, Any]], total: int) -> list[dict[str, Any]]:
    """`total` runs cycling over `runs`, each copy with its own id (so none deduplicates)."""
    out = []
    for i in range(total):
        rec = copy.deepcopy(runs[i % len(runs)])
        rec["id"] = f"copy{i // len(runs)}-{rec.get('task_id', '')}-{rec.get('trial', i)}-{i}"
        out.append(rec)
    return out


def locomo_paths() -> list[Path]:
    """The LoCoMo conversation files (../shared/data/locomo/*.json)."""
    return sorted((shared_data_dir() / "locomo").glob("*.json"))
