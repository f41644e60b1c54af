"""The expectation suite over card drafts, written as code, run with Great Expectations 1.x."""

from __future__ import annotations

import logging
import os
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # a frame is handed in: serving never imports pandas
    import pandas as pd

MAX_SCENARIO = 500  # one sentence; the column itself holds 1000
MAX_OUTCOME = 2000
MAX_ACTIONS = 12


@dataclass(frozen=True)
class Rule:
    """One expectation: its name in reports, and how to build it."""

    name: str
    kind: str
    column: str
    kwargs: dict[str, Any]


RULES = [
    Rule("scenario present", "ExpectColumnValuesToNotBeNull", "scenario", {}),
    Rule(
        "scenario length",
        "ExpectColumnValuesToBeBetween",
        "scenario_chars",
        {"min_value": 1, "max_value": MAX_SCENARIO},
    ),
    Rule(
        "expected outcome length",
        "ExpectColumnValuesToBeBetween",
        "expected_outcome_chars",
        {"min_value": 0, "max_value": MAX_OUTCOME},
    ),
    Rule(
        "actual outcome length",
        "ExpectColumnValuesToBeBetween",
        "actual_outcome_chars",
        {"min_value": 0, "max_value": MAX_OUTCOME},
    ),
    Rule("confidence present", "ExpectColumnValuesToNotBeNull", "confidence", {}),
    Rule(
        "confidence within 0..1",
        "ExpectColumnValuesToBeBetween",
        "confidence",
        {"min_value": 0.0, "max_value": 1.0},
    ),
    Rule("unique card ids", "ExpectColumnValuesToBeUnique", "card_id", {}),
    Rule(
        "non-empty action sequence",
        "ExpectColumnValuesToBeBetween",
        "actions",
        {"min_value": 1, "max_value": MAX_ACTIONS},
    ),
    Rule(
        "every step names a tool",
        "ExpectColumnValuesToBeInSet",
        "actions_name_a_tool",
        {"value_set": [True]},
    ),
    Rule(
        "preconditions compile",
        "ExpectColumnValuesToBeInSet",
        "preconditions_compile",
        {"value_set": [True]},
    ),
    Rule(
        "preconditions pick states (not every state, unless applies_everywhere)",
        "ExpectColumnValuesToBeInSet",
        "preconditions_pick_states",
        {"value_set": [True]},
    ),
    Rule(
        "tools in the registry",
        "ExpectColumnValuesToBeInSet",
        "tools_in_registry",
        {"value_set": [True]},
    ),
    Rule(
        "no secrets in text",
        "ExpectColumnValuesToBeInSet",
        "free_of_secrets",
        {"value_set": [True]},
    ),
]


@dataclass
class SuiteResult:
    """Which cards broke which rules, and where the Data Docs page is."""

    success: bool
    evaluated: int
    failures: dict[str, list[str]] = field(default_factory=dict)  # card_id -> rule names
    rule_failures: dict[str, int] = field(default_factory=dict)  # rule name -> cards
    docs_index: Path | None = None


def run_suite(
    frame: pd.DataFrame,
    *,
    docs_dir: Path | None = None,
    run_name: str = "validation",
    on_loaded: Callable[[], None] | None = None,
) -> SuiteResult:
    """Validate the table; per-card failures, and Data Docs HTML when docs_dir is given.
    on_loaded is called once Great Expectations is imported, before the suite runs."""
    os.environ.setdefault("GX_ANALYTICS_ENABLED", "false")
    logging.getLogger("great_expectations").setLevel(logging.WARNING)
    import great_expectations as gx  # slow to import: only when validating
    from great_expectations.checkpoint.actions import UpdateDataDocsAction
    from great_expectations.data_context.types.base import ProgressBarsConfig

    # this module sets its own logger to INFO ("Created temporary directory ... for
    # ephemeral docs site" on every run): under a flow's log handler that reached stderr
    logging.getLogger("great_expectations.data_context.types.base").setLevel(logging.WARNING)

    if on_loaded is not None:
        on_loaded()
    if frame.empty:
        return SuiteResult(success=True, evaluated=0)
    ctx = gx.get_context(mode="ephemeral")
    ctx.variables.progress_bars = ProgressBarsConfig(globally=False)
    batch = (
        ctx.data_sources.add_pandas("hindsight")
        .add_dataframe_asset("card_drafts")
        .add_batch_definition_whole_dataframe("batch")
    )
    suite = ctx.suites.add(gx.ExpectationSuite(name="card_drafts"))
    for rule in RULES:
        exp = getattr(gx.expectations, rule.kind)(
            column=rule.column, **rule.kwargs, meta={"rule": rule.name}
        )
        suite.add_expectation(exp)
    definition = ctx.validation_definitions.add(
        gx.ValidationDefinition(name="card_drafts", data=batch, suite=suite)
    )
    actions: list[Any] = []
    if docs_dir is not None:
        docs_dir = (
            docs_dir.resolve()
        )  # GX wants an absolute path; HINDSIGHT_DATA_DIR may be relative
        docs_dir.mkdir(parents=True, exist_ok=True)
        ctx.add_data_docs_site(
            site_name="hindsight",
            site_config={
                "class_name": "SiteBuilder",
                "site_index_builder": {"class_name": "DefaultSiteIndexBuilder"},
                "store_backend": {
                    "class_name": "TupleFilesystemStoreBackend",
                    "base_directory": str(docs_dir.resolve()),
                },
            },
        )
        actions.append(UpdateDataDocsAction(name="docs", site_names=["hindsight"]))
    checkpoint = ctx.checkpoints.add(
        gx.Checkpoint(
            name="card_drafts",
            validation_definitions=[definition],
            actions=actions,
            result_format={
                "result_format": "COMPLETE",
                "unexpected_index_column_names": ["card_id"],
                "return_unexpected_index_query": False,
            },
        )
    )
    result = checkpoint.run(batch_parameters={"dataframe": frame}, run_id=None)
    failures: dict[str, list[str]] = defaultdict(list)
    rule_failures: dict[str, int] = {}
    for suite_result in result.run_results.values():
        for r in suite_result.results:
            config = r.expectation_config
            name = str((config.meta or {}).get("rule", config.type)) if config else "unknown"
            bad = [str(row["card_id"]) for row in r.result.get("unexpected_index_list") or []]
            if not r.success:
                rule_failures[name] = len(bad)
            for cid in bad:
                failures[cid].append(name)
    return SuiteResult(
        success=bool(result.success),
        evaluated=len(frame),
        failures=dict(failures),
        rule_failures=rule_failures,
        docs_index=(docs_dir / "index.html") if docs_dir else None,
    )
