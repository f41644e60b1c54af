"""The redrive-dead-letters flow: send dead letters back to the queue, then retrospect them
and extract the facts of those whose facts part was parked."""

from __future__ import annotations

from prefect import flow, task
from prefect.cache_policies import NO_CACHE
from pydantic import BaseModel, Field

from flows.naming import run_name, thread_runner
from flows.params import RetrospectParams
from flows.retrospect import run_retrospect
from memory_core.facts.stage import FactsReport
from memory_core.retrospect.dead_letters import redrive
from memory_core.retrospect.summary import RetrospectSummary
from memory_core.settings import Settings
from tasks.facts import facts_task
from tasks.runtime import engine_for


class RedriveParams(BaseModel):
    """Which dead letters to re-drive."""

    ids: list[str] | None = Field(default=None, description="ids or keys; None: all")
    namespace: str | None = None


class RedriveSummary(BaseModel):
    """How many came back, and what retrospecting them did."""

    redriven: int
    retrospect: RetrospectSummary
    facts: FactsReport = FactsReport()


@task(name="redrive", cache_policy=NO_CACHE)
def redrive_task(ids: list[str] | None, namespace: str | None, settings: Settings) -> int:
    """Dead letters back to pending."""
    return redrive(engine=engine_for(settings), ids=ids, namespace=namespace)


@flow(
    name="redrive-dead-letters",
    flow_run_name=run_name("redrive-dead-letters"),
    log_prints=True,
    task_runner=thread_runner(),
)
def redrive_dead_letters(params: RedriveParams = RedriveParams()) -> RedriveSummary:
    """Re-drive dead letters, retrospect over them and extract their facts at once."""
    settings = Settings()
    n = redrive_task(params.ids, params.namespace, settings)
    return RedriveSummary(
        redriven=n,
        retrospect=run_retrospect(RetrospectParams(namespace=params.namespace), settings),
        facts=facts_task(params.namespace, settings),
    )
