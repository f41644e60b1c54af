"""One settings object for the whole project, read from HINDSIGHT_* environment variables."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field, SecretStr, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from memory_core.ingest.limits import InputLimits


class ConsolidateRules(BaseModel):
    """When two cards are the same lesson."""

    similarity: float = Field(default=0.92, gt=0.0, le=1.0, description="cosine, embeddings")
    lexical_similarity: float = Field(
        default=0.8, gt=0.0, le=1.0, description="token Jaccard, without an embedder"
    )
    # with an LLM: pairs alike down to these floors (but not clearly the same) are judged
    judge_floor: float = Field(default=0.75, gt=0.0, le=1.0)
    lexical_judge_floor: float = Field(default=0.5, gt=0.0, le=1.0)
    max_judged: int = Field(default=200, ge=0, description="LLM judgements per namespace and run")


class RankingWeights(BaseModel):
    """Weights of the retrieval score terms."""

    confidence: float = 0.4
    recency: float = 0.3
    use_frequency: float = 0.3
    # a card testing more of the state (the call's arguments, what ran before) than the tool
    # alone ranks above an equally supported general one: the most specific lesson first
    specificity: float = 0.1
    recency_half_life_days: float = 30.0
    # share of the final score taken by text similarity when the caller passes a query
    text_similarity: float = Field(default=0.3, ge=0.0, le=1.0)


class ServeSettings(BaseModel):
    """The read API and the MCP server (HINDSIGHT_SERVE__...)."""

    host: str = "127.0.0.1"
    port: int = Field(default=8765, ge=0, le=65535)
    mcp_port: int = Field(default=8766, ge=0, le=65535)
    max_body_bytes: int = Field(default=1_000_000, ge=1024, description="413 above this")
    snapshot_refresh_s: float = Field(
        default=1.0, gt=0, description="a changed card is served within this (change feed read)"
    )
    use_flush_s: float = Field(default=0.25, gt=0, description="batched use writes")
    key_cache_s: float = Field(default=30.0, ge=0, description="a revoked key works this long")
    near_misses: int = Field(default=10, ge=0, le=100, description="explain: closest misses")
    # the MCP server over HTTP answers only these Host / Origin headers (DNS rebinding)
    allowed_hosts: list[str] = Field(
        default_factory=lambda: ["127.0.0.1:*", "localhost:*", "[::1]:*"]
    )
    allowed_origins: list[str] = Field(
        default_factory=lambda: ["http://127.0.0.1:*", "http://localhost:*"]
    )
    mcp_write_tools: bool = Field(default=True, description="offer the MCP tools that write")


class DecayTier(BaseModel):
    """Cards unused for at least after_days have their confidence multiplied by factor (once)."""

    after_days: float = Field(gt=0)
    factor: float = Field(gt=0.0, le=1.0)


def _default_tiers() -> list[DecayTier]:
    return [DecayTier(after_days=30, factor=0.9), DecayTier(after_days=90, factor=0.7)]


class EffectRules(BaseModel):
    """When a card's measured effect (served against withheld, memory_core.effects) is clear
    enough to steer decay (HINDSIGHT_DECAY__EFFECTS__...)."""

    aware: bool = Field(default=True, description="False: the +0.05/-0.1 feedback rule alone")
    z: float = Field(default=2.576, gt=0, description="interval width: 2.576 is 99%, two-sided")
    min_served: int = Field(default=20, ge=1, description="outcomes needed in the served arm")
    min_withheld: int = Field(default=20, ge=1, description="outcomes needed in the withheld arm")
    margin: float = Field(
        default=0.05, gt=0, lt=1, description="no effect: the interval lies within +-margin"
    )
    fade: float = Field(default=0.85, gt=0, le=1, description="confidence factor, no effect")
    refade_hours: float = Field(default=20.0, gt=0, description="one fade per night at most")


class DecayRules(BaseModel):
    """The decay stage's rules: time decay tiers, the archive threshold, the cap, effects."""

    tiers: list[DecayTier] = Field(default_factory=_default_tiers, min_length=1, max_length=5)
    archive_after_days: float = Field(default=90.0, gt=0)
    cap: int = Field(default=5000, ge=0, description="active cards per namespace")
    effects: EffectRules = EffectRules()

    @field_validator("tiers")
    @classmethod
    def _ascending(cls, tiers: list[DecayTier]) -> list[DecayTier]:
        days = [t.after_days for t in tiers]
        if days != sorted(set(days)):
            raise ValueError("decay tiers must have strictly ascending after_days")
        return tiers


def _digest(value: Any) -> str:
    if isinstance(value, SecretStr):
        return "sha256:" + hashlib.sha256(value.get_secret_value().encode()).hexdigest()
    return str(value)


class Settings(BaseSettings):
    """Hindsight settings; env prefix HINDSIGHT_, nested fields with a double underscore."""

    model_config = SettingsConfigDict(
        env_prefix="HINDSIGHT_", env_nested_delimiter="__", extra="ignore"
    )

    data_dir: Path = Path(".hindsight")
    database_url: str | None = Field(
        default=None, description="SQLAlchemy URL; None means SQLite under data_dir"
    )
    namespace: str = "default"
    default_task_type: str = "default"
    # a claimed trajectory returns to the pool when its lease runs out (a crashed worker)
    lease_seconds: float = 300.0
    retrospect_batch_size: int = 200
    max_observation_chars: int = 4000
    max_expression_chars: int = 512
    max_expression_depth: int = 8
    max_preconditions: int = 12
    # hard input edges: id, message, metadata and field sizes, JSON depth (HINDSIGHT_LIMITS__...)
    limits: InputLimits = InputLimits()
    # the use log (card_use rows): rows older than this are deleted by the decay stage (the
    # card keeps its use_count and last_used_at); 0 keeps them all
    use_retention_days: float = Field(default=30.0, ge=0)
    ranking: RankingWeights = RankingWeights()
    serve: ServeSettings = ServeSettings()
    # validation: drafts below this confidence wait for a person; tools must be in the
    # registry when one is given
    review_below: float = Field(default=0.5, ge=0.0, le=1.0)
    tool_registry: list[str] | None = None
    # decay and the archive (HINDSIGHT_DECAY__CAP=...); outcome feedback
    decay: DecayRules = DecayRules()
    failures_to_review: int = Field(
        default=3, ge=1, description="failures in a row that send a card to review"
    )
    # the holdout: each matching card is withheld from a query with this probability (0: off),
    # so its effect can be measured (memory_core.effects); per namespace in holdout_rates
    holdout_rate: float = Field(default=0.05, ge=0.0, le=0.5)
    holdout_rates: dict[str, float] = Field(default_factory=dict)
    holdout_seed: str = Field(default="hindsight", max_length=256)

    def holdout_for(self, namespace: str) -> float:
        """The share of matching cards withheld in this namespace."""
        return min(0.5, max(0.0, self.holdout_rates.get(namespace, self.holdout_rate)))

    # trust: content that reads as an instruction is quarantined and calls made on an
    # instruction in a tool result or user message are dropped (off only to measure attacks)
    screen: bool = Field(default=True, description="the instruction screen on every write path")

    # LLM retrospection: set the base URL (any OpenAI-compatible server) to turn it on
    llm_base_url: str | None = None
    llm_model: str = "gpt-4o-mini"
    llm_api_key: SecretStr | None = None
    llm_mode: Literal["after_rules", "instead"] = "after_rules"
    llm_structured_output: Literal["auto", "json_schema", "json_object"] = "auto"
    llm_timeout_s: float = Field(default=60.0, gt=0)
    llm_max_tokens: int = Field(default=2048, ge=64)
    llm_concurrency: int = Field(default=8, ge=1, description="LLM calls in flight at once")
    # several workers on one LLM server: also take a slot of a Prefect global concurrency
    # limit per call (slower: Prefect polls for free slots)
    llm_prefect_limit: bool = False
    llm_retry_delays_s: list[float] = Field(default_factory=lambda: [2.0, 8.0, 30.0])
    llm_token_budget: int | None = Field(
        default=None, ge=1, description="prompt + completion tokens per run; None: no limit"
    )
    llm_max_observation_chars: int = 600
    llm_max_system_chars: int = 600
    # the LLM contrast: a task's successful and failed trials side by side in one prompt
    # (memory_core.retrospect.llm_contrast); off: the rule contrast alone
    # its result is a function of the stored runs, however they were batched or a worker
    # was killed (tests/test_crash.py)
    llm_contrast: bool = True
    llm_contrast_trials: int = Field(default=3, ge=1, le=9, description="trials per side")
    llm_contrast_max_tokens: int = Field(
        default=8000, ge=500, description="estimated prompt tokens of the trials, at most"
    )
    # embeddings: "auto" = an endpoint when HINDSIGHT_EMBED_BASE_URL is set, else the local
    # ONNX model (the default install), else the PyTorch model ('embeddings-torch' extra)
    embedder: Literal["auto", "local", "local-torch", "openai", "none"] = "auto"
    embed_base_url: str | None = None
    embed_model: str = "text-embedding-3-small"
    embed_api_key: SecretStr | None = None
    # the vector index: the embedded engine under data_dir/index, or a Qdrant server by URL
    qdrant_url: str | None = None
    qdrant_api_key: SecretStr | None = None
    qdrant_collection: str = "hindsight_cards"
    consolidate: ConsolidateRules = ConsolidateRules()

    # operations: the nightly deployment's schedule, the flows' task runner, log lines
    nightly_cron: str = Field(default="0 2 * * *", description="the nightly deployment's cron")
    nightly_timezone: str = "UTC"
    task_runner: Literal["threads", "dask"] = Field(
        default="threads", description="dask: prefect-dask, on dask_address or a local cluster"
    )
    dask_address: str | None = Field(
        default=None, description="a Dask scheduler (tcp://host:8786); None: a local cluster"
    )
    log_format: Literal["text", "json"] = Field(
        default="text", description="json: one JSON line per log event, with run and batch ids"
    )

    def cache_key(self) -> str:
        """A key for per-process caches: every field, each secret as a digest of its value.

        A dump (model_dump_json) masks secrets as '**********': settings rebuilt from it would
        send that literal as the key, so caches keep the object and use this as the key only.
        """
        return json.dumps(self.model_dump(), default=_digest, sort_keys=True)

    @property
    def sqlalchemy_url(self) -> str:
        """The database URL, defaulting to a SQLite file under the data directory."""
        if self.database_url:
            url = self.database_url
            # plain postgresql:// would pick psycopg2, which we do not ship
            if url.startswith("postgresql://") or url.startswith("postgres://"):
                url = "postgresql+psycopg://" + url.split("://", 1)[1]
            return url
        return f"sqlite:///{(self.data_dir / 'hindsight.db').resolve()}"

    @property
    def reports_dir(self) -> Path:
        """Where validation reports and benchmark pages go."""
        return self.data_dir / "reports"
