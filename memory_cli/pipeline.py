"""`hindsight retrospect` and `hindsight nightly`: the stages over the pending runs."""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from memory_cli import stages
from memory_cli.card_table import show_cards_table
from memory_cli.context import fail_on_errors, load
from memory_cli.output import Format, console, literal, polled_progress, print_json, table

if TYPE_CHECKING:
    from memory_core.settings import Settings

FormatOpt = Annotated[Format, typer.Option("--format", "-f", help="table or json")]


def retrospect(
    namespace: Annotated[str | None, typer.Option(help="only this namespace")] = None,
    fmt: FormatOpt = Format.table,
) -> None:
    """Distil cards from every pending trajectory (rules here; an LLM or PREFECT_API_URL: a flow
    run)."""
    with fail_on_errors():
        settings, engine = load()
        with polled_progress("retrospect", lambda: _progress(engine, namespace)):
            summary, failed = stages.retrospect(settings=settings, namespace=namespace)
        _show_summary(summary, fmt)
        _say_held(engine, settings, namespace, fmt)
        _exit_if_failed(failed, fmt)


def _say_held(engine: object, settings: Settings, namespace: str | None, fmt: Format) -> None:
    """Runs another live worker holds are not "nothing to do": say how many, whose, until when
    (a dead worker's claims, by its process on this host or its heartbeat, were given back
    already, and retrospected here)."""
    from datetime import timedelta

    from memory_core.leases import held_claims

    if fmt is Format.json:
        return
    stale_s = settings.retrospect.stale_after_seconds
    for h in held_claims(
        engine=engine,  # type: ignore[arg-type]
        namespace=namespace,
        stale_after=timedelta(seconds=stale_s),
    ):
        beat = f", its last heartbeat at {h.beat:%H:%M:%S} UTC" if h.beat else ""
        console.print(
            literal(
                f"{h.runs} trajectories are claimed by a running worker ({h.owner}) until "
                f"{h.until:%Y-%m-%d %H:%M:%S} UTC{beat}: it finishes them; if it stops, they "
                f"return to the queue {stale_s:g} s after its last heartbeat"
            ),
            style="yellow",
            soft_wrap=True,
        )


def nightly(
    input: Annotated[
        list[str] | None, typer.Option("--input", "-i", help="files/folders to ingest first")
    ] = None,
    namespace: Annotated[str | None, typer.Option(help="namespace for ingested runs")] = None,
    task_type: Annotated[str | None, typer.Option(help="task type for runs without one")] = None,
    fmt: FormatOpt = Format.table,
) -> None:
    """Run the nightly flow: ingest (optional), retrospect, validate, consolidate, decay,
    retention."""
    from sqlmodel import Session

    from memory_core.cards.query import example_state

    with fail_on_errors():
        from memory_core.errors import InvalidInput

        # a mistyped path is refused before a flow starts (and runs every stage on nothing)
        for p in input or []:
            if p != "-" and not Path(p).exists():
                raise InvalidInput(f"no such file or folder: {p}", field="--input")
        settings, engine = load()
        with polled_progress("nightly", lambda: _progress(engine, None)):
            summary, failed = stages.nightly(
                settings=settings,
                input=[str(Path(p).resolve()) for p in input or []],
                namespace=namespace,
                task_type=task_type,
            )
        if fmt is Format.json:
            print_json(summary)
            _exit_if_failed(failed, fmt)
            return
        for ing in summary.ingested:
            console.print(
                f"ingested {ing.source}: {ing.stored} new, {ing.duplicates} already "
                f"stored, {len(ing.refused)} refused"
            )
        _show_summary(summary.retrospect.model_dump(), fmt)
        v = summary.validation
        console.print(
            f"validated {v.evaluated} drafts: {v.activated} active, {v.review} to "
            f"review, {v.rejected} rejected" + (f"; report: {v.docs_index}" if v.docs_index else "")
        )
        if summary.outcome.rejections:
            console.print(
                f"{len(summary.outcome.rejections)} rejections: answers and drafts wrong by "
                "content (not dead letters): hindsight dead-letters rejected"
            )
        m = summary.consolidation
        console.print(
            f"consolidate: {m.merges} merges absorbing {m.absorbed} near-duplicates, "
            f"{m.facts_superseded} facts superseded" + (f"; index: {m.index}" if m.index else "")
        )
        d = summary.decay
        console.print(
            f"decay: {d.decayed} cards faded, {d.archived_unused} archived as unused, "
            f"{d.archived_cap} archived over the cap"
        )
        console.print(
            f"retention removed: {summary.retention.text() or 'nothing'}",
            markup=False,
            highlight=False,
        )
        ns = namespace or settings.namespace
        show_cards_table(
            engine,
            ns,
            title=f"live cards (active or in review) in namespace {ns!r}",
            limit=20,
            rules=settings.decay.effects,
            statuses=["active", "review"],  # what the night learned, not its history
        )
        with Session(engine) as session:
            state = example_state(session=session, namespace=ns) or {"tool": "<tool name>"}
        ns_opt = "" if ns == settings.namespace else f" --namespace {shlex.quote(ns)}"
        console.print(
            "\nquery them with:\n  hindsight cards query"
            f"{ns_opt} --state {shlex.quote(json.dumps(state))} --explain",
            soft_wrap=True,
        )
        _say_held(engine, settings, None, fmt)
        _exit_if_failed(failed, fmt)


def _exit_if_failed(failed: stages.RunFailure | None, fmt: Format) -> None:
    """A run that dead-lettered or failed says so, names them, and exits 1 (cron notices)."""
    if failed is None:
        return
    if fmt is not Format.json:
        console.print(literal(failed.message), style="red")
        for line in failed.lines[:20]:
            console.print(literal(f"  {line}"), soft_wrap=True)
        console.print("re-drive them with: hindsight dead-letters redrive")
    raise typer.Exit(1)


def _progress(engine: object, namespace: str | None) -> tuple[int, int]:
    from memory_core.status import trajectory_counts

    counts = trajectory_counts(engine=engine, namespace=namespace)  # type: ignore[arg-type]
    finished = counts.get("done", 0) + counts.get("dead_letter", 0)
    return finished, sum(counts.values())


_LLM_ONLY = (
    "deferred",
    "llm_calls",
    "tokens_sent",
    "tokens_received",
    "tokens_saved",
    "budget_exhausted",
    "llm_failed_calls",
    "llm_failures",
    "rejected",
    "rejected_again",
    "drafts_rejected",
)


def _show_summary(summary: dict[str, object], fmt: Format) -> None:
    if fmt is Format.json:
        print_json(summary)
        return
    # the LLM columns only when the LLM did something
    shown = {k: v for k, v in summary.items() if k not in _LLM_ONLY or v}
    table("retrospect", list(shown), [list(shown.values())])
