"""The decay flow: the decay stage alone (the nightly flow runs it last)."""

from __future__ import annotations

from prefect import flow

from flows.naming import run_name, thread_runner
from flows.params import DecayFlowParams
from memory_core.decay import DecayParams, DecayReport
from memory_core.settings import Settings
from tasks.decay import decay_task


def decay_params(params: DecayFlowParams, settings: Settings) -> DecayParams:
    """The run's rules: the ones given, else the settings'; plus dry run and clock."""
    rules = params.rules or settings.decay
    return DecayParams(**rules.model_dump(), dry_run=params.dry_run, now=params.now)


@flow(
    name="decay",
    flow_run_name=run_name("decay"),
    log_prints=True,
    task_runner=thread_runner(),
)
def decay(params: DecayFlowParams = DecayFlowParams()) -> DecayReport:
    """Fade unused cards, archive cold ones and those over the cap (or, dry, list the plan)."""
    settings = Settings()
    return decay_task(decay_params(params, settings), params.namespace, settings)
