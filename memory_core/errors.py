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


class LLMTransient(HindsightError):
    """A timeout, rate limit, 5xx or connection error: worth retrying later."""


class LLMRefused(HindsightError):
    """A 4xx answer (bad request, auth, unknown model): retrying will not help."""


class LLMOutputInvalid(HindsightError):
    """The model's answer did not parse into the expected shape, even after repair."""

    def __init__(self, message: str, *, raw: str):
        self.raw = raw
        super().__init__(message)


class LLMAnswerRejected(LLMOutputInvalid):
    """A well-formed answer wrong by content (it cites what it was not shown, fails a trust
    check), still after the repair prompt: a rejection, kept with its reason; a retry would
    get the same answer, so it is never parked as a dead letter."""


class ConcurrentUpdate(HindsightError):
    """Another writer changed the same rows meanwhile; re-running is safe."""


class Unauthorized(HindsightError):
    """No key, or a key that is unknown or revoked."""


class Forbidden(HindsightError):
    """A valid key without the scope the operation needs."""


class EmbedderUnavailable(HindsightError):
    """No embedding model could be loaded or reached, or it answered something unusable."""


class Conflict(HindsightError):
    """The object already exists (the same card is live in the namespace)."""


class IndexUnavailable(HindsightError):
    """The vector index is locked, unreachable, or built for another dimension (never recreated)."""
