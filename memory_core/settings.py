"""One settings object for the whole project, read from HINDSIGHT_* environment variables.

How Prefect runs the flows (schedule, task runner, log lines) is added by flows/settings.py's
FlowSettings, a subclass: memory_core knows nothing of Prefect or Dask."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator, model_validator
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict

from memory_core.ingest.limits import InputLimits
from memory_core.settings_groups import (
    EmbeddingSettings,
    GateSettings,
    HoldoutSettings,
    LLMSettings,
    QdrantSettings,
    RetrospectSettings,
    ReviewRules,
)
from memory_core.settings_legacy import LegacyEnvSource, LegacyInitSource, move_flat_kwargs
from memory_core.settings_store import default_data_dir


class ConsolidateRules(BaseModel):
    """When two cards are the same lesson."""

    model_config = ConfigDict(use_attribute_docstrings=True)

    similarity: float = Field(default=0.92, gt=0.0, le=1.0, description="cosine, embeddings")
    lexical_similarity: float = Field(
        default=0.8, gt=0.0, le=1.0, description="token Jaccard, without an embedder"
    )
    judge_floor: float = Field(default=0.75, gt=0.0, le=1.0)
    """with an LLM: pairs this alike (cosine), but not clearly the same, are judged"""
    lexical_judge_floor: float = Field(default=0.5, gt=0.0, le=1.0)
    """the same floor for word overlap, without an embedder"""
    max_judged: int = Field(default=200, ge=0, description="LLM judgements per namespace and run")


class RankingWeights(BaseModel):
    """Weights of the retrieval score terms (memory_core/cards/score.py)."""

    model_config = ConfigDict(use_attribute_docstrings=True)

    confidence: float = 0.4
    """score weight of the card's confidence"""
    recency: float = 0.3
    """score weight of recency (1 when just used, halving every half-life)"""
    use_frequency: float = 0.3
    """score weight of uses, against the namespace's most used card"""
    specificity: float = 0.5
    """a card testing more of the state than the tool alone ranks above a general one (at 0.5
    a card keyed on the call's arguments, 0.25 up, outranks the tool's better-supported general
    reminders: what recurs for calls like this one before what recurs for the tool)"""
    support: float = 0.3
    """score weight of a card's evidence, against the best-supported card matching the same
    state (a lesson seen more often first, as an error seen more often is likelier again)"""
    support_counts: Literal["rows", "runs"] = "rows"
    """what support counts: evidence rows (an error hit again within a run counts again) or
    distinct runs (a run that loops on one failure counts once)"""
    recency_half_life_days: float = 30.0
    """days for recency to halve"""
    text_similarity: float = Field(default=0.3, ge=0.0, le=1.0)
    """share of the score taken by the query's terms the card holds, when a query is given"""


class ServeSettings(BaseModel):
    """The read API and the MCP server (HINDSIGHT_SERVE__...)."""

    model_config = ConfigDict(use_attribute_docstrings=True)

    host: str = "127.0.0.1"
    """the address `hindsight serve` and `hindsight mcp --http` listen on"""
    port: int = Field(default=8765, ge=0, le=65535)
    """the read API's port"""
    mcp_port: int = Field(default=8766, ge=0, le=65535)
    """the MCP server's port over HTTP"""
    max_body_bytes: int = Field(default=1_000_000, ge=1024, description="413 above this")
    snapshot_refresh_s: float = Field(
        default=1.0, gt=0, description="a changed card is served within this (change feed read)"
    )
    max_cached_cards: int = Field(default=250_000, ge=1)
    """cards of all namespaces held in memory, 2-2.7 KB each (250k: ~650 MB RSS); past it the
    least recently queried namespaces are dropped and loaded again on their next query"""
    snapshot_file_min_cards: int = Field(default=20_000, ge=0)
    """a namespace with at least this many cards is saved to a file under data_dir/snapshots
    after a full load and read from it on the next cold load (0: no files)"""
    # a card used again within the interval is written once: at 600 queries a second on 5,000
    # cards the writer's CPU a query was 200 us at 0.25 s and 160-176 us at 1 s
    use_flush_s: float = Field(default=1.0, gt=0, description="batched use writes")
    inline_budget_ms: float = Field(
        default=1.0,
        ge=0,
        description="a plain query of a namespace whose queries average under this (CPU) is "
        "answered on the event loop, not in a worker thread (0: always a thread)",
    )
    key_cache_s: float = Field(default=30.0, ge=0)
    """how long a checked key is remembered; a key revoked or deleted anywhere is refused
    within snapshot_refresh_s all the same (the change feed tells of it)"""
    near_misses: int = Field(default=10, ge=0, le=100, description="explain: closest misses")
    trace_root_wait_s: float = Field(default=300.0, gt=0)
    """OTLP: how long the spans of a trace wait for its root span before the trace is ingested
    as incomplete (outcome unknown)"""
    allowed_hosts: list[str] = Field(
        default_factory=lambda: ["127.0.0.1:*", "localhost:*", "[::1]:*"]
    )
    """Host headers the MCP server over HTTP answers (DNS rebinding)"""
    allowed_origins: list[str] = Field(
        default_factory=lambda: ["http://127.0.0.1:*", "http://localhost:*"]
    )
    """Origin headers the MCP server over HTTP answers"""
    mcp_write_tools: bool = Field(default=True, description="offer the MCP tools that write")
    prefect_ui_url: str | None = None
    """the Prefect UI's address as the console's users reach it (e.g. http://127.0.0.1:4200):
    each dead letter then links to the flow run that parked it (None: no links)"""
    console_url: str | None = None
    """the console's address as operators reach it (e.g. http://127.0.0.1:8765): the night's
    changes report in Prefect links each card to its page there (None: no links)"""


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
    fdr: float = Field(
        default=0.02,
        ge=0,
        lt=0.5,
        description="harms: false discovery rate over a namespace's cards (Benjamini-Hochberg);"
        " 0: each card alone, its interval below 0",
    )
    fade: float = Field(default=0.85, gt=0, le=1, description="confidence factor, no effect")
    refade_hours: float = Field(default=20.0, gt=0, description="one fade per night at most")


class DecayRules(BaseModel):
    """The decay stage's rules: time decay tiers, the archive threshold, the cap, effects."""

    model_config = ConfigDict(use_attribute_docstrings=True)

    tiers: list[DecayTier] = Field(default_factory=_default_tiers, min_length=1, max_length=5)
    """cards unused for after_days have their confidence multiplied by factor (once each)"""
    archive_after_days: float = Field(default=90.0, gt=0)
    """unused this long: to the archive"""
    cap: int = Field(default=5000, ge=0, description="active cards per namespace")
    use_retention_days: float = Field(default=30.0, ge=0)
    """use and query log rows older than this are deleted (cards keep their counts); 0 keeps all;
    a namespace's own policy (`hindsight namespace retention`) overrides it"""
    trajectory_retention_days: float = Field(default=0.0, ge=0)
    """raw trajectories older than this are removed by the nightly's retention stage (those
    cards cite stay as summaries); 0 keeps all; a namespace's own policy overrides it"""
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
        env_prefix="HINDSIGHT_",
        env_nested_delimiter="__",
        extra="ignore",
        use_attribute_docstrings=True,  # docs/settings.md's table (flows.settings_doc)
    )

    data_dir: Path = Field(default_factory=default_data_dir)
    """SQLite file, Prefect's embedded state, reports, the embedded vector index"""
    database_url: str | None = Field(
        default=None, description="SQLAlchemy URL; None means SQLite under data_dir"
    )
    database_busy_wait_s: float = Field(default=30.0, ge=0)
    """seconds a new PostgreSQL connection waits while the server has no free slot or is
    starting up, before the error is raised"""
    namespace: str = "default"
    """namespace for runs and queries that name none"""
    default_task_type: str = "default"
    """task type for runs that name none"""
    limits: InputLimits = InputLimits()
    retrospect: RetrospectSettings = RetrospectSettings()
    ranking: RankingWeights = RankingWeights()
    serve: ServeSettings = ServeSettings()
    review: ReviewRules = ReviewRules()
    gate: GateSettings = GateSettings()
    decay: DecayRules = DecayRules()
    holdout: HoldoutSettings = HoldoutSettings()

    # trust: content that reads as an instruction is quarantined and calls made on an
    # instruction in a tool result or user message are dropped (off only to measure attacks)
    screen: bool = Field(default=True, description="the instruction screen on every write path")

    llm: LLMSettings = LLMSettings()
    embedding: EmbeddingSettings = EmbeddingSettings()
    qdrant: QdrantSettings = QdrantSettings()
    consolidate: ConsolidateRules = ConsolidateRules()

    @model_validator(mode="before")
    @classmethod
    def _flat_names(cls, data: Any) -> Any:
        # Settings.model_validate({...}) skips the sources: old names are moved here too
        return move_flat_kwargs(data)

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        """The usual sources, with the old flat variables ranked just below the new ones."""
        init = LegacyInitSource(settings_cls, init_settings)
        legacy = LegacyEnvSource(settings_cls, prefix="HINDSIGHT_")
        return init, env_settings, legacy, dotenv_settings, file_secret_settings

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
