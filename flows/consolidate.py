"""The consolidate flow: one task per namespace (the nightly flow runs it after validate)."""

from __future__ import annotations

from prefect import flow

from flows.naming import run_name, thread_runner
from flows.params import ConsolidateParams
from memory_core.consolidate.summary import ConsolidateSummary
from memory_core.settings import Settings
from tasks.consolidate import consolidate_task
from tasks.plain_night import consolidate_all


def run_consolidate(params: ConsolidateParams, settings: Settings) -> ConsolidateSummary:
    """Consolidate each namespace with active cards whose lease this worker gets, a task each:
    several workers running this at once split the namespaces (memory_core.leases)."""

    def part(ns: str, _i: int, _count: int) -> ConsolidateSummary | str:
        # one namespace failing (a conflict that outlived the retries) leaves the others to run
        state = consolidate_task(ns, params.dry_run, settings, return_state=True)
        return state.result() if state.is_completed() else str(state.message)

    return consolidate_all(params.namespace, params.dry_run, settings, part)


@flow(
    name="consolidate",
    flow_run_name=run_name("consolidate"),
    log_prints=True,
    task_runner=thread_runner(),
)
def consolidate(params: ConsolidateParams = ConsolidateParams()) -> ConsolidateSummary:
    """Merge near-duplicate cards and retire contradicted facts, with history."""
    return run_consolidate(params, Settings())
