"""Read trajectory records from files, folders or stdin and store each one exactly once."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

from pydantic import BaseModel
from sqlalchemy import insert
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.engine import Engine
from sqlmodel import col

from memory_core.db import session_scope
from memory_core.errors import InvalidInput
from memory_core.ingest.conversations import is_message_list
from memory_core.ingest.formats import parse_record
from memory_core.ingest.limits import DEFAULT_LIMITS, InputLimits
from memory_core.models.columns import new_id, utcnow
from memory_core.models.trajectory import Refusal, Trajectory, TrajectoryCreate, TrajectoryStatus

SUFFIXES = (".json", ".jsonl", ".ndjson")
_CHUNK = 500


class IngestReport(BaseModel):
    """What one ingest did: rows stored, duplicates skipped, records refused with the reason.
    The one model of the stage: the task and the nightly summary pass it on as it is."""

    source: str | None = None  # the file or folder read, when there was one
    stored: int = 0
    duplicates: int = 0
    refused: list[Refusal] = []

    @property
    def seen(self) -> int:
        """Records read, whatever became of them."""
        return self.stored + self.duplicates + len(self.refused)


def source_files(path: Path) -> list[Path]:
    """The trajectory files under a path: the file itself, or every .json/.jsonl in a folder."""
    if path.is_dir():
        return sorted(p for p in path.rglob("*") if p.is_file() and p.suffix in SUFFIXES)
    if path.is_file():
        return [path]
    raise InvalidInput(f"no such file or folder: {path}", field="path")


BOM = "\ufeff"  # editors on Windows start UTF-8 files with one; it is not part of the JSON
MAX_LINE_ERRORS = 5  # per file; past this the rest of its bad lines are counted in one line


def _loads(text: str) -> Any:
    try:
        return json.loads(text)
    except RecursionError as exc:  # nesting deeper than the parser's stack
        raise ValueError("nested too deep to read") from exc


def read_records(text: str, *, name: str) -> Iterator[tuple[str, Any]]:
    """Records in a document: a JSON list, one object, or JSON Lines; bad lines yield errors
    (a document that is not JSON at all is one refusal, not one a line; an empty one, or an
    empty list, is refused as holding no records)."""
    text = text.removeprefix(BOM)
    stripped = text.lstrip()
    if not stripped:
        yield name, InvalidInput("no records: the input is empty", record=name)
        return
    if stripped.startswith("["):
        try:
            items = _loads(text)
        except ValueError as exc:
            yield name, InvalidInput(f"not valid JSON: {exc}", record=name)
            return
        if is_message_list(items):  # one conversation given as a bare list of messages
            yield name, {"messages": items}
            return
        if items == []:
            yield name, InvalidInput("no records: the input is an empty list", record=name)
            return
        for i, item in enumerate(items):
            yield f"{name}[{i}]", item
        return
    try:
        yield name, _loads(text)  # one object, possibly spread over lines
        return
    except ValueError as exc:
        whole_error = exc  # not a single document: read it as JSON Lines
    bad: list[tuple[str, ValueError]] = []
    good = 0
    for lineno, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        rec_name = f"{name}:{lineno}"
        try:
            record = _loads(line)
        except ValueError as exc:
            bad.append((rec_name, exc))
            continue
        good += 1
        yield rec_name, record
    if bad and not good:
        yield (
            name,
            InvalidInput(
                f"not JSON or JSON Lines ({len(bad)} line(s), none parsed): {whole_error}",
                record=name,
            ),
        )
        return
    for rec_name, why in bad[:MAX_LINE_ERRORS]:
        yield rec_name, InvalidInput(f"not valid JSON: {why}", record=rec_name)
    if len(bad) > MAX_LINE_ERRORS:
        more = len(bad) - MAX_LINE_ERRORS
        yield f"{name}:*", InvalidInput(f"{more} more line(s) not valid JSON", record=name)


def iter_sources(paths: Iterable[str]) -> Iterator[tuple[str, Any]]:
    """(record name, record) for every record in the given paths; '-' reads stdin. A file
    that cannot be read as UTF-8 is one refusal; the other files still go in."""
    for raw in paths:
        if raw == "-":
            yield from read_records(sys.stdin.read(), name="<stdin>")
            continue
        for f in source_files(Path(raw)):
            try:
                text = f.read_bytes().decode("utf-8")
            except UnicodeDecodeError as exc:
                yield (
                    str(f),
                    InvalidInput(f"not UTF-8 text (byte {exc.start}: {exc.reason})", record=str(f)),
                )
                continue
            except OSError as exc:
                yield str(f), InvalidInput(f"cannot be read: {exc.strerror}", record=str(f))
                continue
            yield from read_records(text, name=str(f))


def _row(t: TrajectoryCreate) -> dict[str, Any]:
    # the task group from the moment a run is stored: the contrast finds every sibling, so
    # what it learns does not depend on how the runs were batched (or on a worker killed
    # mid-batch); `extra` keeps a copy for readers of the row and for a downgrade
    from memory_core.retrospect.contrast import task_group
    from memory_core.retrospect.siblings import GROUP_KEY

    group = task_group(extra=t.extra or {}, steps=t.steps)
    extra = {**(t.extra or {}), GROUP_KEY: group} if group is not None else dict(t.extra or {})
    return {
        "id": new_id(),
        "namespace": t.namespace,
        "key": t.key,
        "content_hash": t.content_hash,
        "source_format": t.source_format,
        "task_type": t.task_type,
        "agent_id": t.agent_id,
        "outcome": t.outcome.value,
        "reward": t.reward,
        "steps": [s.model_dump(mode="json", exclude_none=True) for s in t.steps],
        "extra": extra,
        "task_group": group,
        "status": TrajectoryStatus.pending.value,
        "attempts": 0,
        "cards_written": 0,
        "tokens_sent": 0,
        "tokens_saved": 0,
        "created_at": utcnow(),
    }


def store_trajectories(*, engine: Engine, trajectories: list[TrajectoryCreate]) -> int:
    """Insert trajectories in one transaction, skipping (namespace, key) already stored."""
    if not trajectories:
        return 0
    rows = list({(t.namespace, t.key): _row(t) for t in trajectories}.values())
    dialect = engine.dialect.name
    stmt: Any
    if dialect == "postgresql":
        stmt = pg_insert(Trajectory).on_conflict_do_nothing(index_elements=["namespace", "key"])
    elif dialect == "sqlite":
        stmt = sqlite_insert(Trajectory).on_conflict_do_nothing(index_elements=["namespace", "key"])
    else:
        stmt = insert(Trajectory)
    with session_scope(engine) as session:
        result = session.execute(stmt.returning(col(Trajectory.id)), rows)
        return len(result.all())


def parse_each(
    records: Iterable[tuple[str, Any]],
    *,
    namespace: str,
    task_type: str,
    max_observation_chars: int = 4000,
    limits: InputLimits = DEFAULT_LIMITS,
) -> Iterator[TrajectoryCreate | Refusal]:
    """Each record parsed, or its refusal naming the record and why (ingest and replay share it)."""
    for name, record in records:
        if isinstance(record, InvalidInput):
            yield Refusal(record=name, error=str(record))
            continue
        try:
            yield parse_record(
                record,
                name=name,
                namespace=namespace,
                task_type=task_type,
                max_observation_chars=max_observation_chars,
                limits=limits,
            )
        except InvalidInput as exc:
            yield Refusal(record=name, error=str(exc))


def ingest(
    *,
    engine: Engine,
    records: Iterable[tuple[str, Any]],
    namespace: str,
    task_type: str,
    max_observation_chars: int = 4000,
    on_progress: Callable[[int], None] | None = None,
    limits: InputLimits = DEFAULT_LIMITS,
) -> IngestReport:
    """Parse and store records; a refused record is reported and the rest still go in."""
    report = IngestReport()
    pending: list[TrajectoryCreate] = []

    def flush() -> None:
        stored = store_trajectories(engine=engine, trajectories=pending)
        report.stored += stored
        report.duplicates += len(pending) - stored
        if on_progress:
            on_progress(len(pending))
        pending.clear()

    for parsed in parse_each(
        records,
        namespace=namespace,
        task_type=task_type,
        max_observation_chars=max_observation_chars,
        limits=limits,
    ):
        if isinstance(parsed, Refusal):
            report.refused.append(parsed)
            continue
        pending.append(parsed)
        if len(pending) >= _CHUNK:
            flush()
    flush()
    return report
