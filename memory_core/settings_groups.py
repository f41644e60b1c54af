"""Settings grouped by concern: the LLM, the embedder, the Qdrant index, the holdout.

Each group is one nested model of Settings (HINDSIGHT_LLM__BASE_URL, ...). The flat names
they replace (HINDSIGHT_LLM__BASE_URL, ...) still work: memory_core.settings_legacy maps them."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, model_validator


class LLMSettings(BaseModel):
    """The OpenAI-compatible LLM of retrospection and fact extraction (HINDSIGHT_LLM__...)."""

    model_config = ConfigDict(use_attribute_docstrings=True)

    base_url: str | None = None
    """an OpenAI-compatible endpoint turns the LLM on (unset: rules only)"""
    model: str = "gpt-4o-mini"
    """the model asked"""
    api_key: SecretStr | None = None
    """the endpoint's key"""
    mode: Literal["after_rules", "instead"] = "after_rules"
    """instead: the LLM only"""
    structured_output: Literal["auto", "json_schema", "json_object"] = "auto"
    """how answers are asked to be JSON"""
    timeout_s: float = Field(default=60.0, gt=0)
    """per call"""
    max_tokens: int = Field(default=2048, ge=64)
    """completion tokens per call"""
    concurrency: int = Field(default=8, ge=1, description="LLM calls in flight at once")
    prefect_limit: bool = False
    """also hold a slot of the Prefect global concurrency limit `hindsight-llm` per call
    (several workers, one LLM server; slower: Prefect polls for free slots)"""
    retry_delays_s: list[float] = Field(default_factory=lambda: [2.0, 8.0, 30.0])
    """seconds between tries of a failed call"""
    token_budget: int | None = Field(
        default=None, ge=1, description="prompt + completion tokens per run; None: no limit"
    )
    max_observation_chars: int = 600
    """a tool result in a prompt is cut to this"""
    max_system_chars: int = 600
    """a run's system prompt in a prompt is cut to this"""
    # its result is a function of the stored runs, however they were batched or a worker was
    # killed (tests/test_crash.py)
    contrast: bool = True
    """a task's successful and failed trials side by side in one prompt (off: the rule
    contrast alone)"""
    contrast_trials: int = Field(default=3, ge=1, le=9, description="trials per side")
    contrast_max_tokens: int = Field(
        default=8000, ge=500, description="estimated prompt tokens of the trials, at most"
    )


class EmbeddingSettings(BaseModel):
    """The embedder of cards, facts and messages (HINDSIGHT_EMBEDDING__...)."""

    model_config = ConfigDict(use_attribute_docstrings=True)

    provider: Literal["auto", "local", "local-torch", "openai", "none"] = "auto"
    """auto: an endpoint when base_url is set, else the local ONNX MiniLM, else the
    PyTorch one"""
    base_url: str | None = None
    """an OpenAI-compatible embeddings endpoint"""
    model: str = "text-embedding-3-small"
    """the endpoint's model"""
    api_key: SecretStr | None = None
    """the endpoint's key"""
    threads: int = Field(default=0, ge=0)
    """CPU threads of the local ONNX model (0: ONNX Runtime's choice, every core)"""


class QdrantSettings(BaseModel):
    """Where the cards' vectors are indexed (HINDSIGHT_QDRANT__...)."""

    model_config = ConfigDict(use_attribute_docstrings=True)

    url: str | None = None
    """a Qdrant server instead of the embedded engine under the data dir"""
    api_key: SecretStr | None = None
    """the Qdrant server's key"""
    collection: str = "hindsight_cards"
    """the collection the cards' vectors go to"""


class HoldoutSettings(BaseModel):
    """Cards withheld from some queries, to measure their effect (HINDSIGHT_HOLDOUT__...)."""

    model_config = ConfigDict(use_attribute_docstrings=True)

    rate: float = Field(default=0.05, ge=0.0, le=0.5)
    """share of matching cards withheld per query, to measure their effect (0: off)"""
    rates: dict[str, float] = Field(default_factory=dict)
    """per namespace, as JSON: `{"team-a": 0.1}`"""
    seed: str = Field(default="hindsight", max_length=256)
    """the holdout's hash seed (same seed, run id and card: same arm)"""

    def rate_for(self, namespace: str) -> float:
        """The share of matching cards withheld in this namespace."""
        return min(0.5, max(0.0, self.rates.get(namespace, self.rate)))


class RetrospectSettings(BaseModel):
    """How retrospection claims its work (HINDSIGHT_RETROSPECT__...)."""

    model_config = ConfigDict(use_attribute_docstrings=True)

    batch_size: int = Field(default=200, ge=1)
    """trajectories claimed per batch"""
    lease_seconds: float = Field(default=300.0, gt=0)
    """a claimed batch returns to the pool after this (a crashed worker)"""
    heartbeat_seconds: float = Field(default=30.0, gt=0)
    """a worker refreshes the heartbeat of the runs it holds this often"""
    stale_after_seconds: float = Field(default=90.0, gt=0)
    """a claim whose heartbeat is older than this is given back at once, on any host"""

    @model_validator(mode="after")
    def _silence_outlasts_beats(self) -> RetrospectSettings:
        if self.stale_after_seconds <= self.heartbeat_seconds:
            raise ValueError(
                "retrospect.stale_after_seconds must exceed retrospect.heartbeat_seconds "
                "(3 times it is usual), or a live worker loses its claims between two beats"
            )
        return self


class GateSettings(BaseModel):
    """When a learned lesson is served (HINDSIGHT_GATE__...; memory_core.backtest)."""

    model_config = ConfigDict(use_attribute_docstrings=True)

    enabled: bool = True
    """False: validation's confidence threshold alone decides what is served"""
    min_groups: int = Field(default=2, ge=1)
    """task groups whose runs must support a lesson (an operator's write or approval waives it)"""
    lift: bool = True
    """a lesson of fewer groups is served once its warnings on later runs of other task groups
    are right clearly more often than its error happens at those calls anyway"""
    promote_confirmed: bool = False
    """a lesson validation left in review for its low confidence alone is served once later
    runs of other task groups confirm it (with `lift`)"""
    reminder_min_groups: int = Field(default=1, ge=1)
    """task groups that must have seen a tool's error for its reminder (a card naming the tool
    alone) to be served as one of the tool's known errors"""
    precision: float = Field(default=0.5, ge=0.0, lt=1.0)
    """mostly right: the lower bound of the share of right warnings must reach this"""
    z: float = Field(default=1.645, gt=0)
    """width of that bound (1.645: one-sided 95%)"""
    min_fired: int = Field(default=5, ge=1)
    """warnings on later runs before the share is judged (fewer: not yet measured)"""
    max_runs: int = Field(default=2000, ge=1)
    """the namespace's latest runs the backtest replays"""


class ReviewRules(BaseModel):
    """What sends a card to a person's review queue (HINDSIGHT_REVIEW__...)."""

    model_config = ConfigDict(use_attribute_docstrings=True)

    below: float = Field(default=0.5, ge=0.0, le=1.0)
    """passing drafts below this confidence go to review"""
    failures_in_a_row: int = Field(default=3, ge=1)
    """failures reported in a row that send a served card to review"""
    streak_min_withheld: int = Field(default=20, ge=1)
    """holdout on: a failure streak sends a card to review only once its withheld arm has this
    many outcomes or its effect interval lies below 0"""
    tool_registry: list[str] | None = None
    """JSON list of known tool names; a card's actions must use them"""

    @property
    def registry(self) -> frozenset[str] | None:
        """The known tools as a set; None when no registry is configured."""
        return None if self.tool_registry is None else frozenset(self.tool_registry)
