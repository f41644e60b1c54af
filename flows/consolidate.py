"""The consolidate flow: one task per namespace (the nightly flow runs it after validate)."""

from __future__ import annotations

from prefect import flow

from flows.naming import run_name, thread_runner
from flows.params import ConsolidateParams
from memory_core.consolidate.stage import live_namespaces
from memory_core.consolidate.summary import ConsolidateSummary
from memory_core.leases import each_leased
from memory_core.settings import Settings
from tasks.consolidate import consolidate_task
from tasks.runtime import engine_for


def run_consolidate(params: ConsolidateParams, settings: Settings) -> ConsolidateSummary:
    """Consolidate each namespace with active cards whose lease this worker gets: several
    workers running this at once split the namespaces (memory_core.leases)."""
    engine = engine_for(settings)
    names = [params.namespace] if params.namespace else live_namespaces(engine=engine)
    total = ConsolidateSummary(dry_run=params.dry_run)

    def one(ns: str) -> None:
        # one namespace failing (a conflict that outlived the retries) leaves the others to run
        state = consolidate_task(ns, params.dry_run, settings, return_state=True)
        if state.is_completed():
            part = state.result()
            part.ran = {ns: part.merges + part.facts_superseded}
            total.add(part)
        else:
            total.failures.append(f"consolidate {ns}: {state.message}")

    if params.dry_run:  # a plan writes nothing: no lease needed
        for ns in names:
            one(ns)
        return total
    _, total.elsewhere = each_leased(engine=engine, stage="consolidate", namespaces=names, run=one)
    return total


@flow(
    name="consolidate",
    flow_run_name=run_name("consolidate"),
    log_prints=True,
    task_runner=thread_runner(),
)
def consolidate(params: ConsolidateParams = ConsolidateParams()) -> ConsolidateSummary:
    """Merge near-duplicate cards and retire contradicted facts, with history."""
    return run_consolidate(params, Settings())
