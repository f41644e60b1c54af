"""The gate's rule: breadth, a backtest that is mostly right, and no unconfirmed fix.

A lesson the extractors learned is served when

1. runs of at least `min_groups` task groups support it, or an operator wrote or approved it
   (the trials of one task repeating a failure are one observation, not several), and
2. its warnings were mostly right on later runs: once at least `min_fired` warnings fired
   there, the lower bound of the Wilson interval (at `z`) of the share that were right reaches
   `precision`; for a caution that names the run's failure (not an error), one warning a run,
   and the bound must also reach the share of the checked runs that failed anyway (a caution
   that fires on every run is right as often as runs fail: it tells nothing). Fewer warnings
   are "not yet measured": breadth (or an operator) decides alone, since a namespace that
   imports its history at once has no later runs yet, and
3. it carries no unconfirmed fix: a recovery it teaches that no run which took it went on to
   succeed is a guess, never served as an instruction (an operator's approval overrides).

A lesson an operator wrote is theirs: it is always served. One an operator approved is held to
the backtest of the runs stored after the approval only: the figures they saw never undo it.
"""

from __future__ import annotations

from dataclasses import dataclass

from memory_core.effects.estimate import wilson
from memory_core.settings_groups import GateSettings


@dataclass(frozen=True)
class Tally:
    """One card's backtest counts."""

    checked: int  # later runs replayed
    fired: int
    right: int
    # a caution about the run's outcome: the share of the checked runs that failed anyway
    base: float | None = None

    @property
    def wrong(self) -> int:
        """Warnings at calls where the failure did not happen."""
        return self.fired - self.right


@dataclass(frozen=True)
class Decision:
    """Served or not, and why, with the bound that decided it."""

    serve: bool
    measured: bool
    low: float | None
    reason: str


def lower_bound(tally: Tally, rules: GateSettings) -> float | None:
    """The lower Wilson bound of the share of right warnings (None: none fired)."""
    if tally.fired <= 0:
        return None
    return round(wilson(successes=tally.right, n=tally.fired, z=rules.z)[0], 4)


def decide(
    *,
    groups: int,
    written_by_operator: bool,
    approved: bool,
    replayable: bool,
    unconfirmed_fix: bool,
    tally: Tally,
    rules: GateSettings,
) -> Decision:
    """The gate's decision for one card."""
    low = lower_bound(tally, rules)
    measured = replayable and tally.fired >= rules.min_fired
    # a caution that only says "this run may fail" must beat how often runs fail anyway
    bar = max(rules.precision, tally.base) if tally.base is not None else rules.precision
    if written_by_operator:
        return Decision(True, measured, low, "written by an operator")
    figures = (
        f"right {tally.right} of {tally.fired} warnings on {tally.checked} later runs"
        if replayable
        else f"no pre-call key to replay ({tally.checked} later runs)"
    )
    if unconfirmed_fix and not approved:
        why = f"its fix is unconfirmed: no run that took it succeeded; {figures}"
        return Decision(False, measured, low, why)
    if tally.base is not None:
        figures += f", {tally.base:.0%} of them failed"
    if measured and low is not None and low < bar:
        return Decision(
            False,
            True,
            low,
            f"warnings not mostly right: {figures} (lower bound {low:.2f} < {bar:.2g})",
        )
    broad = groups >= rules.min_groups
    if not broad and not approved:
        plural = "group" if groups == 1 else "groups"
        return Decision(
            False,
            measured,
            low,
            f"supported by {groups} task {plural} (needs {rules.min_groups}); {figures}",
        )
    why = "approved by an operator" if approved and not broad else f"{groups} task groups"
    if measured:
        return Decision(True, True, low, f"{why}; {figures} (lower bound {low:.2f} >= {bar:.2g})")
    more = f"not yet measured, {figures}" if replayable else figures
    return Decision(True, False, low, f"{why}; {more}")
