"""The settings page's table is the model's, and the variables users set keep their names."""

from __future__ import annotations

from flows.settings import FlowSettings
from flows.settings_doc import PAGE, page_table, rows, table
from memory_core.settings_legacy import RENAMED, new_variable

# every variable documented before the table was generated: a rename would break a setup
NAMED_BEFORE = [
    "CONSOLIDATE__SIMILARITY",
    "DASK_ADDRESS",
    "DATABASE_URL",
    "DATA_DIR",
    "DECAY__EFFECTS__Z",
    "DEFAULT_TASK_TYPE",
    "EMBEDDER",
    "EMBED_BASE_URL",
    "HOLDOUT_RATE",
    "HOLDOUT_RATES",
    "HOLDOUT_SEED",
    "LEASE_SECONDS",
    "LIMITS__MAX_FIELD_CHARS",
    "LIMITS__MAX_ID_CHARS",
    "LIMITS__MAX_MESSAGE_CHARS",
    "LLM_API_KEY",
    "LLM_BASE_URL",
    "LLM_CONCURRENCY",
    "LLM_CONTRAST",
    "LLM_MODE",
    "LLM_MODEL",
    "LLM_PREFECT_LIMIT",
    "LLM_RETRY_DELAYS_S",
    "LLM_STRUCTURED_OUTPUT",
    "LLM_TIMEOUT_S",
    "LLM_TOKEN_BUDGET",
    "LOG_FORMAT",
    "MAX_OBSERVATION_CHARS",
    "NAMESPACE",
    "NIGHTLY_CRON",
    "NIGHTLY_TIMEZONE",
    "QDRANT_API_KEY",
    "QDRANT_URL",
    "RANKING__CONFIDENCE",
    "RETROSPECT_BATCH_SIZE",
    "REVIEW_BELOW",
    "SCREEN",
    "TASK_RUNNER",
    "TOOL_REGISTRY",
    "USE_RETENTION_DAYS",
]


def test_the_settings_page_table_is_generated_from_the_settings() -> None:
    assert page_table(PAGE.read_text()) == table(), (
        "docs/settings.md table out of date: python -m flows.settings_doc --write"
    )
    assert all(r[2] for r in rows()), "a setting without a description (a docstring or Field)"


def test_documented_variable_names_still_set_what_they_set(monkeypatch) -> None:
    documented = {r[0].strip("`") for r in rows()}
    # a name grouped since is read as its new spelling (memory_core.settings_legacy)
    spelled_now = {
        new_variable(n.lower(), "HINDSIGHT_") if n.lower() in RENAMED else f"HINDSIGHT_{n}"
        for n in NAMED_BEFORE
    }
    assert spelled_now <= documented
    for key, value in {
        "LLM__BASE_URL": "http://llm.test/v1",
        "SERVE__PORT": "9001",
        "DECAY__EFFECTS__Z": "1.96",
        "LIMITS__MAX_JSON_DEPTH": "32",
        "HOLDOUT__RATES": '{"team-a": 0.1}',
        "TASK_RUNNER": "dask",
    }.items():
        monkeypatch.setenv(f"HINDSIGHT_{key}", value)
    s = FlowSettings()
    assert s.llm.base_url == "http://llm.test/v1" and s.serve.port == 9001
    assert s.decay.effects.z == 1.96 and s.limits.max_json_depth == 32
    assert s.holdout.rates == {"team-a": 0.1} and s.task_runner == "dask"
