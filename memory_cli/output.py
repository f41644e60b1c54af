"""Rendering for the CLI: rich tables for people, JSON for scripts, errors as one clear line."""

from __future__ import annotations

import json
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from rich.console import Console

if TYPE_CHECKING:
    from rich.progress import Progress

# logs and pipes get whole lines instead of rich's 80-column fallback: an id or a key folded
# in two breaks the script that reads it; a table is only as wide as its content
UNWRAPPED = 100_000
console = Console(width=None if sys.stdout.isatty() else UNWRAPPED)
err_console = Console(stderr=True, width=None if sys.stderr.isatty() else UNWRAPPED)


class Format(StrEnum):
    """Output format of listing commands."""

    table = "table"
    json = "json"


class IngestFormat(StrEnum):
    """`hindsight ingest --format`: the report's format, or otlp (trace exports only; their
    report is a table). Trace exports are recognised in any case; otlp refuses other records."""

    table = "table"
    json = "json"
    otlp = "otlp"


def to_jsonable(value: Any) -> Any:
    """Pydantic models and dataclass-like objects as plain JSON values."""
    from pydantic import BaseModel

    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    if isinstance(value, (list, tuple)):
        return [to_jsonable(v) for v in value]
    if isinstance(value, dict):
        return {str(k): to_jsonable(v) for k, v in value.items()}
    return value


def print_json(value: Any) -> None:
    """Machine-readable output on stdout."""
    print(json.dumps(to_jsonable(value), indent=2, default=str))


def table(title: str, columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
    """A readable table on stdout; every cell shown as stored (no rich markup read into it)."""
    from rich.table import Table
    from rich.text import Text

    # stored text such as "could not find [bisquick manufacturer]" would lose its brackets
    # as rich markup: Text objects are printed literally
    t = Table(title=Text(title), show_lines=False, header_style="bold")
    for c in columns:
        t.add_column(Text(c), overflow="fold")
    for r in rows:
        t.add_row(*[v if isinstance(v, Text) else Text("" if v is None else str(v)) for v in r])
    console.print(t)


def shown_of(shown: int, total: int, offset: int = 0) -> str:
    """'12 in all' or '50 of 498 shown (1-50)': a listing says how many there are."""
    if shown == total and offset == 0:
        return f"{total} in all"
    return f"{shown} of {total} shown ({offset + 1 if shown else offset}-{offset + shown})"


def literal(text: object) -> str:
    """Stored text escaped for a rich console.print with markup around it."""
    from rich.markup import escape

    return escape(str(text))


@contextmanager
def polled_progress(
    label: str,
    poll: Callable[[], tuple[int, int]] = lambda: (0, 0),
    interval: float = 0.5,
    *,
    transient: bool = False,
) -> Iterator[None]:
    """A progress bar fed by polling (done, total) while the body runs (e.g. a Prefect flow)."""
    stop = threading.Event()
    with _bar(label, transient) as progress:
        bar = progress.add_task(label, total=None)

        def _loop() -> None:
            while not stop.wait(interval):
                done, total = poll()
                progress.update(bar, completed=done, total=total or None)

        thread = threading.Thread(target=_loop, daemon=True)
        thread.start()
        try:
            yield
        finally:
            stop.set()
            thread.join()
            done, total = poll()
            progress.update(bar, completed=done, total=total or done or None)


def _bar(text: str, transient: bool) -> Progress:
    """A bar with its count and the time taken, on stderr."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    return Progress(
        TextColumn(text),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=err_console,
        transient=transient,
    )


StepReport = Callable[[str, int, int], None]


@contextmanager
def stage_progress(label: str, *, transient: bool = False) -> Iterator[StepReport]:
    """A progress bar the stage moves itself: the body calls report(what, done, total) at each
    step; every report is drawn (a quick step is not skipped between refreshes)."""
    with _bar("{task.description}", transient) as progress:
        bar = progress.add_task(label, total=None)

        def report(what: str, done: int, total: int) -> None:
            progress.update(
                bar, description=f"{label}: {what}", completed=done, total=total or None
            )
            progress.refresh()

        yield report
