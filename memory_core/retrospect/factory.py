"""Build the extractor the settings ask for: rules, the LLM, or rules then the LLM."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any

from sqlalchemy.engine import Engine

from memory_core.llm.client import LLMClient
from memory_core.models.drafts import Extraction, Extractor, TrajectoryView
from memory_core.retrospect.prefilter import FilterLimits
from memory_core.retrospect.rule_extractor import RuleExtractor
from memory_core.settings import Settings


class ChainedExtractors:
    """Several extractors on the same trajectory; drafts and costs add up."""

    def __init__(self, *extractors: Extractor) -> None:
        self.extractors = extractors
        self.name = "+".join(e.name for e in extractors)

    def extract(self, trajectory: TrajectoryView) -> Extraction:
        """Every extractor's drafts, in order."""
        total = Extraction()
        for e in self.extractors:
            x = e.extract(trajectory)
            total.drafts.extend(x.drafts)
            total.calls += x.calls
            total.cached += x.cached
            total.tokens_sent += x.tokens_sent
            total.tokens_received += x.tokens_received
            total.tokens_saved += x.tokens_saved
            total.rejected = total.rejected or x.rejected  # the first one is the run's
        return total


def build_llm(
    settings: Settings, *, gate: Callable[[], AbstractContextManager[Any]] | None = None
) -> LLMClient | None:
    """The configured OpenAI-compatible LLM client, or None without HINDSIGHT_LLM__BASE_URL."""
    if not settings.llm.base_url:
        return None
    from memory_core.llm.client import OpenAICompatibleLLM

    return OpenAICompatibleLLM(
        base_url=settings.llm.base_url,
        model=settings.llm.model,
        api_key=settings.llm.api_key.get_secret_value() if settings.llm.api_key else None,
        timeout_s=settings.llm.timeout_s,
        structured=settings.llm.structured_output,
        max_tokens=settings.llm.max_tokens,
        gate=gate,
    )


def build_rule_extractor(settings: Settings) -> Extractor | None:
    """The rule extractor, unless the LLM replaces it (HINDSIGHT_LLM__MODE=instead)."""
    if settings.llm.base_url and settings.llm.mode == "instead":
        return None
    return RuleExtractor(default_task_type=settings.default_task_type)


def build_llm_extractor(
    settings: Settings,
    engine: Engine,
    *,
    gate: Callable[[], AbstractContextManager[Any]] | None = None,
) -> Extractor | None:
    """The LLM extractor alone (None without HINDSIGHT_LLM__BASE_URL)."""
    llm = build_llm(settings, gate=gate)
    if llm is None:
        return None
    from memory_core.llm.cache import SQLAnswerCache
    from memory_core.retrospect.llm_contrast import LLMContrast
    from memory_core.retrospect.llm_extractor import LLMExtractor

    limits = FilterLimits(
        max_observation_chars=settings.llm.max_observation_chars,
        max_system_chars=settings.llm.max_system_chars,
    )
    extractor = LLMExtractor(llm=llm, cache=SQLAnswerCache(engine), limits=limits)
    if not settings.llm.contrast:
        return extractor
    # a run that is its task group's newest also contrasts the group's trials (one call)
    contrast = LLMContrast(
        llm=llm,
        cache=SQLAnswerCache(engine),
        engine=engine,
        limits=limits,
        max_trials=settings.llm.contrast_trials,
        max_tokens=settings.llm.contrast_max_tokens,
        screen=settings.screen,
    )
    return ChainedExtractors(extractor, contrast)


def build_extractor(
    settings: Settings,
    engine: Engine,
    *,
    gate: Callable[[], AbstractContextManager[Any]] | None = None,
) -> Extractor:
    """The rule extractor; with HINDSIGHT_LLM__BASE_URL set, the LLM too (after the rules)."""
    rules = build_rule_extractor(settings)
    extractor = build_llm_extractor(settings, engine, gate=gate)
    if extractor is None:
        return rules or RuleExtractor(default_task_type=settings.default_task_type)
    return extractor if rules is None else ChainedExtractors(rules, extractor)
