"""The few error types Hindsight raises; edges translate them (CLI message, HTTP status, ...)."""

from __future__ import annotations


class HindsightError(Exception):
    """Base class of every error Hindsight raises on purpose."""


class InvalidInput(HindsightError):
    """Input refused; the message names the record and the field."""

    def __init__(self, message: str, *, record: str | None = None, field: str | None = None):
        self.record = record
        self.field = field
        where = ", ".join(
            p
            for p in (f"record {record}" if record else "", f"field '{field}'" if field else "")
            if p
        )
        super().__init__(f"{where}: {message}" if where else message)


class InvalidPrecondition(InvalidInput):
    """A precondition that does not compile or breaks the length/depth caps."""


class NotFound(HindsightError):
    """The requested object does not exist (in this namespace)."""


class LeaseLost(HindsightError):
    """Another worker took over a claimed trajectory after our lease ran out."""
