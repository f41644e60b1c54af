"""Flow-run names an operator can read in the Prefect UI."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

from prefect.runtime import flow_run


def run_name(flow_name: str) -> Callable[[], str]:
    """A namer giving '<flow> <namespace or all> <UTC time>'."""

    def _name() -> str:
        params = flow_run.parameters.get("params") or {}
        ns = (
            params.get("namespace")
            if isinstance(params, dict)
            else getattr(params, "namespace", None)
        )
        return f"{flow_name} {ns or 'all'} {datetime.now(UTC):%Y-%m-%d %H:%M}"

    return _name
