"""The estimate in SQL, for the decay stage: Newcombe's interval over every card in one
statement (memory_core.effects.estimate is the same arithmetic in Python; a test holds them
equal). Only cards with enough outcomes in both arms reach these expressions."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy import Float, String, and_, cast, func, literal
from sqlalchemy.sql.elements import ColumnElement

from memory_core.settings import EffectRules


@dataclass(frozen=True)
class EffectSQL:
    """Expressions of one card's estimate over its arm counts."""

    enough: ColumnElement[bool]  # both arms have their minimum of outcomes
    served_rate: ColumnElement[Any]
    withheld_rate: ColumnElement[Any]
    difference: ColumnElement[Any]
    low: ColumnElement[Any]
    high: ColumnElement[Any]

    def harms(self) -> ColumnElement[bool]:
        """The interval lies below zero."""
        return and_(self.enough, self.high < 0)

    def helps(self) -> ColumnElement[bool]:
        """The interval lies above zero."""
        return and_(self.enough, self.low > 0)

    def no_effect(self, margin: float) -> ColumnElement[bool]:
        """The interval lies within +-margin."""
        return and_(self.enough, self.low > -margin, self.high < margin)


def _sq(x: ColumnElement[Any]) -> ColumnElement[Any]:
    return x * x


def _f(x: Any) -> ColumnElement[Any]:
    """As a double: `x * 1.0` would be NUMERIC on PostgreSQL, several times slower."""
    return cast(x, Float)


def _wilson(k: Any, n: Any, z: float) -> tuple[ColumnElement[Any], ColumnElement[Any]]:
    nf = _f(func.nullif(n, 0))  # no division by zero, whatever order the planner picks
    p = _f(k) / nf
    z2 = z * z
    denom = 1 + z2 / nf
    centre = (p + z2 / (2 * nf)) / denom
    half = z / denom * func.sqrt(p * (1 - p) / nf + z2 / (4 * nf * nf))
    return centre - half, centre + half


def effect_sql(
    *, served: Any, served_ok: Any, withheld: Any, withheld_ok: Any, rules: EffectRules
) -> EffectSQL:
    """The estimate's expressions over four count columns."""
    z = rules.z
    p1 = _f(served_ok) / _f(func.nullif(served, 0))
    p2 = _f(withheld_ok) / _f(func.nullif(withheld, 0))
    l1, u1 = _wilson(served_ok, served, z)
    l2, u2 = _wilson(withheld_ok, withheld, z)
    d = p1 - p2
    return EffectSQL(
        enough=and_(served >= rules.min_served, withheld >= rules.min_withheld),
        served_rate=p1,
        withheld_rate=p2,
        difference=d,
        low=d - func.sqrt(_sq(p1 - l1) + _sq(u2 - p2)),
        high=d + func.sqrt(_sq(u1 - p1) + _sq(p2 - l2)),
    )


def fmt(dialect: str, x: ColumnElement[Any], places: int = 3) -> ColumnElement[str]:
    """A number as text with fixed decimals, for reasons (both dialects)."""
    if dialect == "postgresql":
        return func.to_char(x, "FM990." + "0" * places)
    return func.printf(f"%.{places}f", x)


def text_of(x: Any) -> ColumnElement[str]:
    """An integer column as text."""
    return cast(x, String)


def why(dialect: str, e: EffectSQL, *, served: Any, withheld: Any, rules: EffectRules) -> Any:
    """The numbers behind a verdict, as one sentence."""
    return (
        literal("success ")
        + fmt(dialect, e.served_rate)
        + literal(" served (n=")
        + text_of(served)
        + literal(") vs ")
        + fmt(dialect, e.withheld_rate)
        + literal(" withheld (n=")
        + text_of(withheld)
        + literal("), difference ")
        + fmt(dialect, e.difference)
        + literal(f", z={rules.z:g} interval [")
        + fmt(dialect, e.low)
        + literal(", ")
        + fmt(dialect, e.high)
        + literal("]")
    )
