"""What the read API and the MCP tools accept and return: one set of models for both edges.

Layer: shapes.
"""

from __future__ import annotations

import uuid
from typing import Any, Literal

from pydantic import (
    AwareDatetime,
    BaseModel,
    ConfigDict,
    Field,
    ValidationInfo,
    computed_field,
    model_validator,
)

from memory_core.errors import InvalidInput
from memory_core.ingest.limits import DEFAULT_LIMITS, CleanInput, check_json
from memory_core.models.card import ActionStep, CardPublic, FailureMode
from memory_core.models.trajectory import Refusal

MAX_TOP_K = 50
# validation context of a body whose bytes show it passes check_json (`clean_bytes`)
CLEAN_BODY = {"clean_body": True}


def clean_bytes(body: bytes) -> bool:
    """Whether a JSON body is sure to pass check_json once parsed by a strict parser (orjson,
    which refuses raw control characters, invalid UTF-8 and numbers beyond a double): with no
    backslash there is no escaped NUL or lone surrogate, no string is longer than the body, and
    no value nests deeper than the body has brackets. Costs a scan in C, not a walk in Python."""
    return (
        b"\\" not in body
        and len(body) <= DEFAULT_LIMITS.max_field_chars
        and body.count(b"[") + body.count(b"{") <= DEFAULT_LIMITS.max_json_depth
    )


class QueryRequest(CleanInput):
    """A planning-time (or pre-call) query: the task state, and optionally a free-text query."""

    model_config = ConfigDict(extra="forbid")

    task_state: dict[str, Any] = Field(
        default_factory=dict,
        description="variables of the task vocabulary (task_type, last_tool, last_error, tool, "
        "args, ...); a precondition reading a variable the state lacks does not hold; error "
        "texts (last_error, error, *_error) are taken as the agent got them and normalised "
        "as ingest does",
    )
    top_k: int = Field(default=5, ge=1, le=MAX_TOP_K)
    query: str | None = Field(
        default=None, max_length=2000, description="free text blended into the ranking"
    )
    explain: bool = Field(
        default=False, description="per card, each precondition's verdict and the score terms"
    )
    prompt_tokens: int | None = Field(
        default=None,
        ge=16,
        le=8000,
        description="also return a prompt block of the cards, cut to this many tokens",
    )
    record_use: bool = Field(default=True, description="count this as a use of the cards")
    run_id: str | None = Field(
        default=None,
        max_length=256,
        description="the agent run asking: a run sees each card in one holdout arm only",
    )

    @model_validator(mode="before")
    @classmethod
    def _clean(cls, data: Any, info: ValidationInfo) -> Any:
        """CleanInput's check, skipped for a body `clean_bytes` passed (the hot route's)."""
        if info.context is CLEAN_BODY:
            return data
        try:
            check_json(data)
        except InvalidInput as exc:
            raise ValueError(str(exc)) from exc
        return data


class CheckActionRequest(CleanInput):
    """A call about to be made: which earlier failures warn about it."""

    model_config = ConfigDict(extra="forbid")

    tool: str = Field(min_length=1, max_length=256)
    args: dict[str, Any] = Field(default_factory=dict)
    task_state: dict[str, Any] = Field(default_factory=dict)
    top_k: int = Field(default=5, ge=1, le=MAX_TOP_K)


class PreconditionCheck(BaseModel):
    """One precondition on the caller's state."""

    expression: str
    verdict: Literal["held", "failed", "missing", "error"]
    missing: list[str] = []
    detail: str = ""


class Score(BaseModel):
    """The ranking terms of one card (the weights are settings)."""

    confidence: float
    recency: float
    use_frequency: float
    specificity: float = 0.0  # how many conditions of the state the card tests (0: one)
    text_similarity: float | None = None
    support: float = 0.0  # evidence against the best-supported card matching the same state
    score: float

    @classmethod
    def of(
        cls,
        confidence: float,
        recency: float,
        use_frequency: float,
        specificity: float,
        text_similarity: float | None,
        score: float,
    ) -> Score:
        """Unvalidated, as model_construct builds it (the same fields, order, defaults and set
        fields) without its loop over the fields: retrieval builds one per card it scores,
        and model_construct's 9 us a card was a twentieth of a query's CPU."""
        made = _NEW(cls)
        _SET(made, "__dict__", {
            "confidence": confidence,
            "recency": recency,
            "use_frequency": use_frequency,
            "specificity": specificity,
            "text_similarity": text_similarity,
            "support": 0.0,
            "score": score,
        })  # fmt: skip
        _SET(made, "__pydantic_fields_set__", set(_SCORE_SET))
        _SET(made, "__pydantic_extra__", None)
        _SET(made, "__pydantic_private__", None)
        return made


_NEW, _SET = object.__new__, object.__setattr__
_SCORE_SET = ("confidence", "recency", "use_frequency", "specificity", "text_similarity", "score")


class CardHit(BaseModel):
    """A card that applies to the state, best first."""

    card: CardPublic
    score: Score
    use_id: uuid.UUID | None = Field(
        default=None, description="pass it with the outcome feedback of this use"
    )
    checks: list[PreconditionCheck] | None = None


class NearMiss(BaseModel):
    """A card that did not apply, with why (explain only)."""

    card_id: uuid.UUID
    scenario: str
    checks: list[PreconditionCheck]
    score: Score


class UnreadVariable(BaseModel):
    """A variable of the state that no card reads: a misspelling, or a name of its own."""

    name: str
    did_you_mean: str | None = Field(
        default=None, description="the nearest name a card reads or the vocabulary defines"
    )

    @computed_field  # type: ignore[prop-decorator]
    @property
    def message(self) -> str:
        """One line for people: `tol: no card reads this; did you mean tool?`."""
        return unread_message(self.name, self.did_you_mean)


def unread_message(name: str, did_you_mean: str | None) -> str:
    """UnreadVariable's message: `tol: no card reads this; did you mean tool?`."""
    hint = f"; did you mean {did_you_mean}?" if did_you_mean else ""
    return f"{name}: no card reads this{hint}"


class Demoted(BaseModel):
    """A tool's reminder served after the others: the call lacks the kinds of argument its
    errors came with (memory_core.cards.profile)."""

    card_id: uuid.UUID
    reason: str


class Explanation(BaseModel):
    """How the query was answered (explain only)."""

    active_cards: int
    candidates: int = Field(description="cards whose equality atoms matched the state")
    near_misses: list[NearMiss] = []
    unread_variables: list[UnreadVariable] = Field(
        default=[], description="variables of the state no card reads, with the nearest name"
    )
    demoted: list[Demoted] = Field(
        default=[], description="the tool's reminders put after the others, and why"
    )


class QueryResult(BaseModel):
    """The answer to a query."""

    cards: list[CardHit]
    prompt: str | None = None
    explain: Explanation | None = None
    query_id: uuid.UUID | None = Field(
        default=None,
        description="report the run's outcome for it (POST /v1/uses/{query_id}/outcome), "
        "also when no card was served: a withheld card's effect is measured on such runs",
    )


class CheckActionResult(BaseModel):
    """Warnings about a call: cards keyed on it and their failure modes."""

    tool: str
    warnings: list[dict[str, Any]] = Field(
        default_factory=list,
        description=(
            "failure modes of the matching cards, best card first; scope 'call' for a card"
            " keyed on this call's arguments or state, 'tool' for one naming the tool alone;"
            " 'demoted' says why a tool's reminder comes after the others"
        ),
    )
    cards: list[CardHit] = []
    query_id: uuid.UUID | None = None


class FeedbackRequest(CleanInput):
    """The outcome of a task that used a card."""

    model_config = ConfigDict(extra="forbid")

    outcome: Literal["success", "failure"]
    use_id: uuid.UUID | None = None


class OutcomeRequest(CleanInput):
    """The outcome of the run that made a query (every card it served or withheld)."""

    model_config = ConfigDict(extra="forbid")

    outcome: Literal["success", "failure"]


class PinRequest(CleanInput):
    """Pin a card (never withheld by the holdout) or unpin it."""

    model_config = ConfigDict(extra="forbid")

    pinned: bool = True


class RejectRequest(CleanInput):
    """Why a card in review is rejected."""

    model_config = ConfigDict(extra="forbid")

    reason: str = Field(min_length=1, max_length=2000)


class HistoryEntry(BaseModel):
    """One version of a card: what changed, who, why."""

    version: int
    reason: str
    actor: str
    created_at: Any
    snapshot: dict[str, Any]


class CardIn(CleanInput):
    """A card an operator or agent stores; status and provenance are the server's to set."""

    model_config = ConfigDict(extra="forbid")

    scenario: str = Field(min_length=1, max_length=1000)
    preconditions: list[str] = Field(default_factory=list, max_length=64)
    action_sequence: list[ActionStep] = Field(min_length=1, max_length=64)
    expected_outcome: str = Field(default="", max_length=4000)
    actual_outcome: str = Field(default="", max_length=4000)
    failure_modes: list[FailureMode] = Field(default_factory=list, max_length=64)
    confidence: float = Field(default=0.6, ge=0.0, le=1.0)
    applies_everywhere: bool = Field(
        default=False,
        description="the card is meant for every state: its preconditions may pick none (an "
        "empty list, `true`); without it such a card is refused",
    )


class FactSearchRequest(CleanInput):
    """A question to the facts of the namespace."""

    model_config = ConfigDict(extra="forbid")

    text: str = Field(min_length=1, max_length=2000)
    top_k: int = Field(default=5, ge=1, le=MAX_TOP_K)
    include_superseded: bool = False
    # what only a speaker said, unchecked (standing "claim"): on request, marked as such
    include_claims: bool = False
    # what the memory held true at that moment (with its zone), from the facts' history
    as_of: AwareDatetime | None = None


class IngestResult(BaseModel):
    """What an ingest request stored."""

    stored: int
    duplicates: int
    refused: list[Refusal] = []
