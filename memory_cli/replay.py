"""`hindsight replay PATH`: what the memory would have told the agent at each call of old runs."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

from memory_cli.context import fail_on_errors, load
from memory_cli.output import Format, console, literal, print_json, table

if TYPE_CHECKING:
    from memory_core.replay_report import ReplayReport


# the verdicts listed call by call (StrEnum values: no import of the report module here)
_SHOWN = ("hit", "miss")


def _short(text: str | None, n: int = 70) -> str:
    text = " ".join((text or "").split())
    return text if len(text) <= n else text[: n - 1] + "…"


def _show(report: ReplayReport, *, calls: bool) -> None:
    rows = [
        [
            _short(r.key, 40),
            r.outcome,
            r.totals.calls,
            r.totals.failed,
            r.totals.hit,
            r.totals.miss,
            r.totals.noise,
            r.totals.quiet,
        ]
        for r in report.trajectories
    ]
    t = report.totals
    rows.append(["total", "", t.calls, t.failed, t.hit, t.miss, t.noise, t.quiet])
    table(
        f"replay against {report.namespace!r} ({report.active_cards} served cards, top "
        f"{report.top_k}{', pre-call cards only' if report.pre_call_only else ''})",
        ["trajectory", "outcome", "calls", "failed", "hit", "miss", "noise", "quiet"],
        rows,
    )
    if calls:
        detail = [
            [
                _short(c.trajectory, 30),
                c.call,
                c.tool,
                c.verdict.value,
                _short(c.signature, 60),
                next((str(s.rank) for s in c.served if s.warned), ""),
                len(c.served),
            ]
            for r in report.trajectories
            for c in r.calls
            if c.verdict in _SHOWN
        ]
        if detail:
            table(
                "failed calls",
                ["trajectory", "call", "tool", "verdict", "error", "warned at", "served"],
                detail,
            )
    hit = "n/a" if report.hit_rate is None else f"{report.hit_rate:.0%}"
    noise = "n/a" if report.noise_rate is None else f"{report.noise_rate:.0%}"
    console.print(
        f"warned before {t.hit} of {t.failed} failed calls ({hit}); cards served for "
        f"{t.noise} of {t.calls - t.failed} calls that succeeded ({noise})"
    )
    for r in report.refused:
        console.print(f"[red]refused[/red] {literal(r.error)}")


def replay_cmd(
    paths: Annotated[list[str], typer.Argument(help="trajectory files or folders, - for stdin")],
    namespace: Annotated[str | None, typer.Option(help="whose memory")] = None,
    task_type: Annotated[str | None, typer.Option(help="task type for records without one")] = None,
    top_k: Annotated[int, typer.Option("--top-k", min=1, max=100, help="cards per call")] = 5,
    pre_call: Annotated[
        bool, typer.Option("--pre-call", help="only cards keyed on the call (as check_action)")
    ] = False,
    calls: Annotated[bool, typer.Option("--calls", help="also list every failed call")] = False,
    fmt: Annotated[Format, typer.Option("--format", "-f", help="table or json")] = Format.table,
) -> None:
    """At each tool call of each run in PATHS, ask the memory with the state known just before
    the call: hit (a served card warned about the error that followed), miss (the call failed
    unwarned), noise (cards served for a call that succeeded). Nothing is stored or recorded."""
    from memory_core.ingest.store import iter_sources
    from memory_core.replay import parse_all, replay

    with fail_on_errors():
        settings, engine = load()
        ns = namespace or settings.namespace
        parsed, refused = parse_all(
            iter_sources(paths),
            namespace=ns,
            task_type=task_type or settings.default_task_type,
            max_observation_chars=settings.limits.max_observation_chars,
            limits=settings.limits,
        )
        report = replay(
            engine=engine,
            namespace=ns,
            trajectories=parsed,
            top_k=top_k,
            weights=settings.ranking,
            pre_call_only=pre_call,
            refused=refused,
        )
        if fmt is Format.json:
            print_json(report)
        else:
            _show(report, calls=calls)
        if refused and not parsed:
            raise typer.Exit(2)
