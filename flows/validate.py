"""The validate flow: the data-quality gate alone (the nightly flow runs it after retrospect)."""

from __future__ import annotations

from prefect import flow
from pydantic import BaseModel

from flows.naming import run_name, thread_runner
from memory_core.settings import Settings
from memory_core.validate.summary import ValidationSummary
from tasks.validate import validate_task


class ValidateParams(BaseModel):
    """Which drafts to validate."""

    namespace: str | None = None


@flow(
    name="validate",
    flow_run_name=run_name("validate"),
    log_prints=True,
    task_runner=thread_runner(),
)
def validate(params: ValidateParams = ValidateParams()) -> ValidationSummary:
    """Run the expectation suite over every draft."""
    return validate_task(params.namespace, Settings())
