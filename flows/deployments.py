"""The deployments of `prefect.yaml`, built in Python for `hindsight up` and `hindsight deploy`.

`prefect deploy --all` reads prefect.yaml (cron fixed at its default there); these read the
nightly schedule from the settings (HINDSIGHT_NIGHTLY_CRON) and name each flow by module path,
so a worker finds the installed package wherever it runs. tests/flows/test_deploy_files.py keeps
the two in step.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from typing import Any, cast
from uuid import UUID

from prefect import Flow, deploy
from prefect.client.orchestration import get_client
from prefect.client.schemas.actions import WorkPoolCreate
from prefect.deployments.runner import RunnerDeployment
from prefect.exceptions import ObjectAlreadyExists
from prefect.schedules import Cron
from prefect.types.entrypoint import EntrypointType

from flows.settings import FlowSettings

WORK_POOL = "hindsight-process"


@dataclass(frozen=True)
class DeploymentSpec:
    """One deployment: which flow, its default parameters, tags, and whether it is scheduled."""

    name: str
    flow: str  # "module:function"
    description: str
    tags: list[str]
    parameters: dict[str, Any] = field(default_factory=dict)
    nightly_schedule: bool = False
    concurrency_limit: int | None = None


SPECS: tuple[DeploymentSpec, ...] = (
    DeploymentSpec(
        "nightly",
        "flows.nightly:nightly",
        "Ingest new trajectories, retrospect over everything pending, extract facts, "
        "validate, consolidate, decay.",
        ["hindsight", "nightly"],
        {"params": {"input": [], "namespace": None, "task_type": None}},
        nightly_schedule=True,
        concurrency_limit=1,  # a late run never overlaps the next one
    ),
    DeploymentSpec(
        "retrospect",
        "flows.retrospect:retrospect",
        "Distil cards from pending trajectories (one stage alone).",
        ["hindsight", "stage"],
        {"params": {"namespace": None, "max_batches": None}},
    ),
    DeploymentSpec(
        "validate",
        "flows.validate:validate",
        "Run the data-quality gate over every draft (one stage alone).",
        ["hindsight", "stage"],
        {"params": {"namespace": None}},
    ),
    DeploymentSpec(
        "consolidate",
        "flows.consolidate:consolidate",
        "Merge near-duplicate cards and retire contradicted facts (one stage alone).",
        ["hindsight", "stage"],
        {"params": {"namespace": None, "dry_run": False}},
    ),
    DeploymentSpec(
        "decay",
        "flows.decay:decay",
        "Fade unused cards, archive cold ones and those over the cap (one stage alone).",
        ["hindsight", "stage"],
        {"params": {"namespace": None, "dry_run": False}},
    ),
    DeploymentSpec(
        "redrive-dead-letters",
        "flows.dead_letters:redrive_dead_letters",
        "Send dead-lettered trajectories back to the queue and retrospect them.",
        ["hindsight", "operations"],
        {"params": {"ids": None, "namespace": None}},
    ),
)


def flow_of(spec: DeploymentSpec) -> Flow[..., Any]:
    """The flow object a spec names."""
    module, func = spec.flow.split(":")
    found = getattr(importlib.import_module(module), func)
    if not isinstance(found, Flow):
        raise TypeError(f"{spec.flow} is not a Prefect flow")
    return found


def runner_deployments(flow_settings: FlowSettings) -> list[RunnerDeployment]:
    """Every deployment, the nightly one on the configured cron."""
    o = flow_settings
    out: list[RunnerDeployment] = []
    for spec in SPECS:
        schedules = (
            [Cron(o.nightly_cron, timezone=o.nightly_timezone, slug="nightly")]
            if spec.nightly_schedule
            else None
        )
        dep = cast(
            RunnerDeployment,
            flow_of(spec).to_deployment(
                name=spec.name,
                description=spec.description,
                tags=spec.tags,
                parameters=spec.parameters,
                schedules=schedules,
                concurrency_limit=spec.concurrency_limit,
                work_pool_name=WORK_POOL,
                entrypoint_type=EntrypointType.MODULE_PATH,
            ),
        )
        out.append(dep)
    return out


def ensure_work_pool(name: str = WORK_POOL) -> bool:
    """Create the process work pool unless it exists; True when it was created."""
    with get_client(sync_client=True) as client:
        try:
            client.create_work_pool(WorkPoolCreate(name=name, type="process"))
        except ObjectAlreadyExists:
            return False
    return True


def deploy_all(flow_settings: FlowSettings | None = None) -> list[UUID]:
    """The work pool and every deployment on the Prefect API in PREFECT_API_URL (idempotent)."""
    ensure_work_pool()
    ids = deploy(
        *runner_deployments(flow_settings or FlowSettings()),
        work_pool_name=WORK_POOL,
        build=False,
        push=False,
        print_next_steps_message=False,
        ignore_warnings=True,
    )
    return cast(list[UUID], ids)
