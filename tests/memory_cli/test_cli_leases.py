"""`hindsight consolidate` / `decay` run without Prefect take the same per-namespace leases as
the flows: a namespace another run holds is left to it and named, never worked twice at once."""

from __future__ import annotations

import json

import pytest

from memory_core.leases import Leases
from tests.helpers.cli import hindsight
from tests.helpers.decay import card_row, insert_cards


@pytest.mark.parametrize("stage", ["consolidate", "decay"])
def test_a_stage_command_leaves_a_namespace_another_run_holds(env_for, engine, stage) -> None:
    insert_cards(
        engine,
        [
            card_row(namespace=ns, scenario="pay fails", preconditions=['tool == "pay"'])
            for ns in ("held", "free")
            for _ in range(2)  # two alike cards: consolidation has a merge to make in each
        ],
    )
    env = {**env_for, "HINDSIGHT_EMBEDDING__PROVIDER": "none"}
    with Leases(engine=engine, stage=stage) as other:
        assert other.take("held")
        busy = json.loads(hindsight(env, stage, "-f", "json").stdout)
    assert busy["elsewhere"] == ["held"] and list(busy["ran"]) == ["free"]
    # the lease released, the next run does the namespace it skipped
    after = json.loads(hindsight(env, stage, "-f", "json").stdout)
    assert after["elsewhere"] == [] and sorted(after["ran"]) == ["free", "held"]
    if stage == "consolidate":
        assert (busy["absorbed"], after["absorbed"]) == (1, 1)
    # a dry run writes nothing and takes no lease
    with Leases(engine=engine, stage=stage) as other:
        assert other.take("held")
        plan = json.loads(hindsight(env, stage, "--dry-run", "-f", "json").stdout)
    assert plan.get("elsewhere", []) == []
