"""Rendering for the CLI: rich tables for people, JSON for scripts, errors as one clear line."""

from __future__ import annotations

import json
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from enum import StrEnum
from typing import Any

from rich.console import Console

# logs and pipes get a wide table instead of rich's 80-column fallback
console = Console(width=None if sys.stdout.isatty() else 160)
err_console = Console(stderr=True)


class Format(StrEnum):
    """Output format of listing commands."""

    table = "table"
    json = "json"


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
    """A readable table on stdout."""
    from rich.table import Table

    t = Table(title=title, show_lines=False, header_style="bold")
    for c in columns:
        t.add_column(c, overflow="fold")
    for r in rows:
        t.add_row(*[("" if v is None else str(v)) for v in r])
    console.print(t)


@contextmanager
def polled_progress(
    label: str, poll: Callable[[], tuple[int, int]], interval: float = 0.5
) -> Iterator[None]:
    """A progress bar fed by polling (done, total) while the body runs (e.g. a Prefect flow)."""
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
    )

    stop = threading.Event()
    with Progress(
        TextColumn(label),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=err_console,
        transient=False,
    ) as progress:
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
