"""The plot of bench/scale.py: in-process latency per size beside the floor and brute force,
and HTTP throughput of the API against the empty endpoint."""

from __future__ import annotations

from pathlib import Path


def plot(result: dict, path: Path) -> None:
    """Two panels: p50/p99 per size (log scale), req/s API vs empty."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (a, b) = plt.subplots(1, 2, figsize=(11, 4))
    sizes = result["sizes"]
    xs = [f"{s['cards']:,}" for s in sizes]
    for key, label in (
        ("floor_p50_ms", "index lookup (floor) p50"),
        ("p50_ms", "query p50"),
        ("p99_ms", "query p99"),
        ("explain_p50_ms", "explain p50"),
        ("brute_p50_ms", "brute force p50"),
    ):
        a.plot(xs, [s[key] for s in sizes], marker="o", label=label)
    a.set_yscale("log")
    a.set_ylabel("ms")
    a.set_xlabel("active cards")
    a.set_title("in process (feedback every 20 ms meanwhile)")
    a.legend(fontsize=8)
    http = result.get("http")
    if http:
        b.bar(["API", "empty endpoint"], [http["api"]["req_per_s"], http["empty"]["req_per_s"]])
        b.set_ylabel("req/s (wrk -c16)")
        b.set_title(f"HTTP at {http['cards']:,} cards: ratio {http['ratio']}")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
