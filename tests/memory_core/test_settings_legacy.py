"""The flat variable names from before the settings were grouped still set what they set."""

from __future__ import annotations

import warnings

import pytest

from flows.settings import FlowSettings
from memory_core.settings import Settings
from memory_core.settings_legacy import RENAMED, new_variable

OLD = {
    "HINDSIGHT_LLM_BASE_URL": "http://old.test/v1",
    "HINDSIGHT_LLM_API_KEY": "sk-old",
    "HINDSIGHT_LLM_MODE": "instead",
    "HINDSIGHT_LLM_RETRY_DELAYS_S": "[0.5, 1.5]",
    "HINDSIGHT_LLM_CONTRAST": "false",
    "HINDSIGHT_LLM_TOKEN_BUDGET": "9000",
    "HINDSIGHT_EMBEDDER": "none",
    "HINDSIGHT_EMBED_BASE_URL": "http://embed.test/v1",
    "HINDSIGHT_EMBED_THREADS": "1",
    "HINDSIGHT_QDRANT_URL": "http://qdrant.test:6333",
    "HINDSIGHT_QDRANT_COLLECTION": "old_cards",
    "HINDSIGHT_HOLDOUT_RATE": "0.2",
    "HINDSIGHT_HOLDOUT_RATES": '{"team-a": 0.1}',
    "HINDSIGHT_HOLDOUT_SEED": "old-seed",
    "HINDSIGHT_LEASE_SECONDS": "45",
    "HINDSIGHT_RETROSPECT_BATCH_SIZE": "7",
    "HINDSIGHT_MAX_OBSERVATION_CHARS": "900",
    "HINDSIGHT_MAX_EXPRESSION_CHARS": "300",
    "HINDSIGHT_MAX_EXPRESSION_DEPTH": "5",
    "HINDSIGHT_MAX_PRECONDITIONS": "4",
    "HINDSIGHT_USE_RETENTION_DAYS": "9",
    "HINDSIGHT_REVIEW_BELOW": "0.7",
    "HINDSIGHT_FAILURES_TO_REVIEW": "2",
    "HINDSIGHT_TOOL_REGISTRY": '["search", "book"]',
}


def _check(s: Settings) -> None:
    assert s.llm.base_url == "http://old.test/v1" and s.llm.mode == "instead"
    assert s.llm.api_key is not None and s.llm.api_key.get_secret_value() == "sk-old"
    assert s.llm.retry_delays_s == [0.5, 1.5] and s.llm.token_budget == 9000
    assert s.llm.contrast is False
    assert s.embedding.provider == "none"
    assert s.embedding.base_url == "http://embed.test/v1"
    assert s.qdrant.url == "http://qdrant.test:6333" and s.qdrant.collection == "old_cards"
    assert s.holdout.rate == 0.2 and s.holdout.seed == "old-seed"
    assert s.holdout.rate_for("team-a") == 0.1 and s.holdout.rate_for("other") == 0.2
    assert (s.retrospect.lease_seconds, s.retrospect.batch_size) == (45, 7)
    assert (s.limits.max_observation_chars, s.limits.max_preconditions) == (900, 4)
    assert (s.limits.max_expression_chars, s.limits.max_expression_depth) == (300, 5)
    assert s.decay.use_retention_days == 9 and s.embedding.threads == 1
    assert (s.review.below, s.review.failures_in_a_row) == (0.7, 2)
    assert s.review.tool_registry == ["search", "book"]


def test_old_and_new_names_set_the_same_fields(monkeypatch) -> None:
    for old in RENAMED:  # conftest sets HINDSIGHT_HOLDOUT__RATE=0, which would win
        monkeypatch.delenv(new_variable(old, "HINDSIGHT_"), raising=False)
    for var, value in OLD.items():
        monkeypatch.setenv(var, value)
    with pytest.warns(FutureWarning) as caught:
        old = FlowSettings()
    _check(old)
    said = [str(w.message) for w in caught]
    assert "HINDSIGHT_LLM_BASE_URL is deprecated: set HINDSIGHT_LLM__BASE_URL instead" in said
    assert "HINDSIGHT_EMBEDDER is deprecated: set HINDSIGHT_EMBEDDING__PROVIDER instead" in said
    assert all("\n" not in m for m in said)  # one line each
    for var, value in OLD.items():
        monkeypatch.delenv(var)
        monkeypatch.setenv(
            new_variable(var.removeprefix("HINDSIGHT_").lower(), "HINDSIGHT_"), value
        )
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the new names warn of nothing
        new = FlowSettings()
    _check(new)
    assert new.cache_key() == old.cache_key()


def test_the_new_name_wins_when_both_are_set(monkeypatch) -> None:
    monkeypatch.setenv("HINDSIGHT_LLM_BASE_URL", "http://old.test/v1")
    monkeypatch.setenv("HINDSIGHT_LLM__BASE_URL", "http://new.test/v1")
    monkeypatch.setenv("HINDSIGHT_LLM_MODEL", "old-model")  # only the old spelling: still read
    monkeypatch.setenv("HINDSIGHT_HOLDOUT_RATE", "0.3")
    monkeypatch.setenv("HINDSIGHT_HOLDOUT__RATE", "0.1")
    with pytest.warns(FutureWarning):
        s = Settings()
    assert s.llm.base_url == "http://new.test/v1" and s.llm.model == "old-model"
    assert s.holdout.rate == 0.1


def test_every_old_name_maps_to_a_field_of_its_group() -> None:
    for old, (group, field) in RENAMED.items():
        model = Settings.model_fields[group].annotation
        assert model is not None and field in model.model_fields, old
        assert old not in Settings.model_fields  # the flat field is gone


def test_old_keyword_arguments_are_moved_into_their_group() -> None:
    with pytest.warns(FutureWarning) as caught:
        s = Settings(llm_base_url="http://kw.test/v1", holdout_rate=0.25)
    assert (
        "Settings(llm_base_url=...) is deprecated: set Settings(llm={'base_url': ...}) instead"
        in [str(w.message) for w in caught]
    )
    # an argument outranks the variables, as before (conftest sets HINDSIGHT_HOLDOUT__RATE)
    assert s.llm.base_url == "http://kw.test/v1" and s.holdout.rate == 0.25
    with pytest.warns(FutureWarning):
        both = Settings(llm_base_url="http://old.test/v1", llm={"base_url": "http://new.test/v1"})
    assert both.llm.base_url == "http://new.test/v1"
