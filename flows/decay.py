"""The decay flow: the decay stage alone (the nightly flow runs it last)."""

from __future__ import annotations

from prefect import flow

from flows.naming import run_name, thread_runner
from flows.params import DecayFlowParams
from memory_core.decay import DecayParams, DecayReport
from memory_core.leases import card_namespaces as namespaces_with_cards
from memory_core.settings import Settings
from tasks.decay import decay_task
from tasks.plain_night import decay_all
from tasks.runtime import engine_for


def decay_params(params: DecayFlowParams, settings: Settings) -> DecayParams:
    """The run's rules: the ones given, else the settings'; plus dry run and clock."""
    rules = params.rules or settings.decay
    return DecayParams(**rules.model_dump(), dry_run=params.dry_run, now=params.now)


def card_namespaces(settings: Settings) -> list[str]:
    """Namespaces that hold cards (of any status)."""
    return namespaces_with_cards(engine=engine_for(settings))


def run_decay(params: DecayFlowParams, settings: Settings) -> DecayReport:
    """Decay each namespace whose lease this worker gets, a task each: several workers running
    this at once split the namespaces (memory_core.leases); a dry run plans all in one pass."""
    rules = decay_params(params, settings)
    return decay_all(rules, params.namespace, settings, lambda ns: decay_task(rules, ns, settings))


@flow(
    name="decay",
    flow_run_name=run_name("decay"),
    log_prints=True,
    task_runner=thread_runner(),
)
def decay(params: DecayFlowParams = DecayFlowParams()) -> DecayReport:
    """Fade unused cards, archive cold ones and those over the cap (or, dry, list the plan)."""
    return run_decay(params, Settings())
