"""The card table shared by `cards list`, `cards query` and the nightly's summary."""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from memory_cli.output import console, shown_of, table
from memory_core.screen.provenance import origin_of

if TYPE_CHECKING:
    from sqlalchemy.engine import Engine

    from memory_core.effects.estimate import HarmsTest
    from memory_core.models.card import Card, CardPublic
    from memory_core.settings import EffectRules


def card_row(
    c: Card | CardPublic,
    rules: EffectRules | None = None,
    tests: Mapping[uuid.UUID, HarmsTest] | None = None,
) -> list[object]:
    return [
        str(c.card_id)[:8],
        c.status,
        origin_of(c.provenance).value,
        f"{c.confidence:.2f}",
        f"{c.evidence_count}/{c.run_count}",  # evidence rows / the runs behind them
        c.scenario,
        "\n".join(c.preconditions) or "(always)",
        " → ".join(a.get("tool", "") for a in c.action_sequence),
        verdict(c, rules, tests),
    ]


def verdict(
    c: Card | CardPublic,
    rules: EffectRules | None = None,
    tests: Mapping[uuid.UUID, HarmsTest] | None = None,
) -> str:
    """The measured effect's verdict under these rules (the configured ones, memory_core.effects)
    and the namespace's harms tests (effects.cards.tests_for), '-' before any outcome."""
    from memory_core.effects.estimate import estimate
    from memory_core.models.card import CardPublic

    if isinstance(c, CardPublic):
        e = c.effect
        if e is not None and rules is not None:
            from memory_core.effects.cards import rescored

            e = rescored(e, rules, (tests or {}).get(c.card_id))
    else:
        e = estimate(
            served_uses=c.served_outcomes,
            served_successes=c.served_successes,
            withheld_uses=c.withheld_outcomes,
            withheld_successes=c.withheld_successes,
            rules=rules,
            harms=(tests or {}).get(c.card_id),
        )
    if e is None or e.difference is None:
        return "-"
    return f"{e.label} {e.difference:+.2f}"


COLUMNS = [
    "id",
    "status",
    "origin",
    "conf",
    "rows/runs",
    "scenario",
    "preconditions",
    "actions",
    "effect",
]


def columns_and_rows(
    cards: Sequence[Card | CardPublic],
    lead: list[list[object]] | None = None,
    rules: EffectRules | None = None,
    tests: Mapping[uuid.UUID, HarmsTest] | None = None,
) -> tuple[list[str], list[list[object]]]:
    """The table's columns and rows; the effect column only once a listed card has one (a
    column of dashes would squeeze the scenario)."""
    rows = [[*(lead[i] if lead else []), *card_row(c, rules, tests)] for i, c in enumerate(cards)]
    if any(r[-1] != "-" for r in rows):
        return COLUMNS, rows
    return COLUMNS[:-1], [r[:-1] for r in rows]


def show_cards_table(
    engine: Engine,
    namespace: str,
    *,
    title: str,
    limit: int,
    rules: EffectRules | None = None,
    statuses: Sequence[str] | None = None,
) -> None:
    """Print the most recently updated cards of a namespace (of these statuses)."""
    from sqlmodel import Session

    from memory_core.cards.query import count_cards, list_cards
    from memory_core.effects.cards import tests_for
    from memory_core.settings import EffectRules

    with Session(engine) as session:
        cards = list_cards(session=session, namespace=namespace, statuses=statuses, limit=limit)
        total = count_cards(session=session, namespace=namespace, statuses=statuses)
    tests = tests_for(engine=engine, namespaces=[namespace], rules=rules or EffectRules())
    columns, rows = columns_and_rows(list(cards), rules=rules, tests=tests)
    table(f"{title}: {shown_of(len(cards), total)}", columns, rows)
    if len(cards) < total:
        ns = "" if namespace == "default" else f" --namespace {namespace}"
        only = "".join(f" --status {s}" for s in statuses or ())
        console.print(f"all of them: hindsight cards list{ns}{only} --limit {total}", markup=False)
