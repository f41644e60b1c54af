"""The gate's rule: breadth, a backtest that is mostly right, and no unconfirmed fix.

A lesson the extractors learned is served when

1. runs of at least `min_groups` task groups support it, or an operator wrote or approved it
   (the trials of one task repeating a failure are one observation, not several), or (`lift`)
   later runs of task groups it did not learn from confirm it: at least `min_fired` warnings
   fired there and the lower bound of the share that were right reaches `precision` and beats
   the base rate, how often its error happened at those calls of the tool anyway (for a
   caution about the run: how often those runs failed). A card that warns at every call of
   its tool is right exactly as often as the base rate: only a key that picks the calls that
   fail is confirmed this way. A tool's reminder (a card naming the tool alone and an error it
   returned) is not an alarm about the call but one of the tool's known errors: it is served
   once `reminder_min_groups` groups saw the error, and its share of right warnings, which is
   the tool's error rate, does not judge it; and
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
    # the same on later runs of task groups that did not teach the card, with the base rate
    # there: the share of the tool's calls where its error happened (a caution: runs failed)
    other_fired: int = 0
    other_right: int = 0
    other_base: float | None = None

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
    confirmed: bool = False  # by later runs of other task groups (the lift rule)


def lower_bound(tally: Tally, rules: GateSettings) -> float | None:
    """The lower Wilson bound of the share of right warnings (None: none fired)."""
    return _low(tally.right, tally.fired, rules)


def _low(right: int, fired: int, rules: GateSettings) -> float | None:
    if fired <= 0:
        return None
    return round(wilson(successes=right, n=fired, z=rules.z)[0], 4)


def confirmed_elsewhere(tally: Tally, rules: GateSettings) -> tuple[bool, str]:
    """Whether later runs of other task groups confirm the card, and their figures."""
    low = _low(tally.other_right, tally.other_fired, rules)
    base = tally.other_base or 0.0
    figures = (
        f"on other tasks right {tally.other_right} of {tally.other_fired}, base rate {base:.0%}"
    )
    if low is None or tally.other_fired < rules.min_fired:
        return False, figures
    figures += f", lower bound {low:.2f}"
    return low >= rules.precision and low > base, figures


def decide(
    *,
    groups: int,
    written_by_operator: bool,
    approved: bool,
    replayable: bool,
    unconfirmed_fix: bool,
    tally: Tally,
    rules: GateSettings,
    reminder: bool = False,
) -> Decision:
    """The gate's decision for one card (`reminder`: it names the tool alone and an error)."""
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
    if measured and low is not None and low < bar and not reminder:
        return Decision(
            False,
            True,
            low,
            f"warnings not mostly right: {figures} (lower bound {low:.2f} < {bar:.2g})",
        )
    needed = rules.reminder_min_groups if reminder else rules.min_groups
    broad = groups >= needed
    plural = "group" if groups == 1 else "groups"
    why = f"{groups} task {plural}"
    if reminder:
        why = f"one of the tool's known errors, seen in {why}"
    elif not broad and rules.lift:
        confirmed, elsewhere = confirmed_elsewhere(tally, rules)
        figures += f"; {elsewhere}"
        if confirmed:
            return Decision(True, True, low, f"{why}, confirmed on later runs {elsewhere}", True)
    if not broad and not approved:
        return Decision(
            False,
            measured,
            low,
            f"supported by {groups} task {plural} (needs {needed}); {figures}",
        )
    why = "approved by an operator" if approved and not broad else why
    if measured and reminder:  # right as often as the tool returns this error: no bar
        return Decision(True, True, low, f"{why}; {figures}")
    if measured:
        return Decision(True, True, low, f"{why}; {figures} (lower bound {low:.2f} >= {bar:.2g})")
    more = f"not yet measured, {figures}" if replayable else figures
    return Decision(True, False, low, f"{why}; {more}")
