"""The settings of the flows: memory_core's Settings plus how Prefect runs them (the nightly
schedule, the task runner, log lines). These fields live here, next to the flows that read
them, not in memory_core; the variables are the same HINDSIGHT_ ones as before."""

from __future__ import annotations

from typing import Literal

from memory_core.settings import Settings


class FlowSettings(Settings):
    """Settings, and how Prefect runs the flows (HINDSIGHT_NIGHTLY_CRON, HINDSIGHT_TASK_RUNNER)."""

    nightly_cron: str = "0 2 * * *"
    """the nightly deployment's cron (`hindsight deploy`, `hindsight up`)"""
    nightly_timezone: str = "UTC"
    """the time zone of the nightly cron"""
    task_runner: Literal["threads", "dask"] = "threads"
    """dask: the flows' tasks on Dask through prefect-dask, on dask_address or a local cluster"""
    dask_address: str | None = None
    """a Dask scheduler (tcp://host:8786); unset: a temporary local cluster per flow run"""
    log_format: Literal["text", "json"] = "text"
    """json: one JSON line per log event of a flow run, with run and batch ids"""
