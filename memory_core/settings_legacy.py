"""The flat setting names used before the settings were grouped (HINDSIGHT_LLM__BASE_URL, ...).

Deployments set them: they keep working, each with a one-line FutureWarning naming its new
spelling. The new (nested) variable wins when both are set."""

from __future__ import annotations

import json
import os
import types
import typing
import warnings
from typing import Any

from pydantic import BaseModel
from pydantic.fields import FieldInfo
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource

# old flat field name -> (group, field in the group)
RENAMED: dict[str, tuple[str, str]] = {
    **{
        f"llm_{f}": ("llm", f)
        for f in (
            "base_url",
            "model",
            "api_key",
            "mode",
            "structured_output",
            "timeout_s",
            "max_tokens",
            "concurrency",
            "prefect_limit",
            "retry_delays_s",
            "token_budget",
            "max_observation_chars",
            "max_system_chars",
            "contrast",
            "contrast_trials",
            "contrast_max_tokens",
        )
    },
    "embedder": ("embedding", "provider"),
    "embed_base_url": ("embedding", "base_url"),
    "embed_model": ("embedding", "model"),
    "embed_api_key": ("embedding", "api_key"),
    "embed_threads": ("embedding", "threads"),
    "qdrant_url": ("qdrant", "url"),
    "qdrant_api_key": ("qdrant", "api_key"),
    "qdrant_collection": ("qdrant", "collection"),
    "holdout_rate": ("holdout", "rate"),
    "holdout_rates": ("holdout", "rates"),
    "holdout_seed": ("holdout", "seed"),
    "lease_seconds": ("retrospect", "lease_seconds"),
    "retrospect_batch_size": ("retrospect", "batch_size"),
    "max_observation_chars": ("limits", "max_observation_chars"),
    "max_expression_chars": ("limits", "max_expression_chars"),
    "max_expression_depth": ("limits", "max_expression_depth"),
    "max_preconditions": ("limits", "max_preconditions"),
    "use_retention_days": ("decay", "use_retention_days"),
    "review_below": ("review", "below"),
    "failures_to_review": ("review", "failures_in_a_row"),
    "tool_registry": ("review", "tool_registry"),
}


_SEEN: dict[Any, Any] = {}  # the warnings' registry: each old name is named once per process


def new_variable(old: str, prefix: str) -> str:
    """The variable of an old flat one (`HINDSIGHT_LLM__BASE_URL` -> `HINDSIGHT_LLM__BASE_URL`)."""
    group, field = RENAMED[old]
    return f"{prefix}{group}__{field}".upper()


def _warn(old: str, new: str) -> None:
    # FutureWarning, not DeprecationWarning: Python shows it to the users who set the variable;
    # warn_explicit without a source line keeps it to one line
    warnings.warn_explicit(
        f"{old} is deprecated: set {new} instead",
        FutureWarning,
        filename="hindsight settings",
        lineno=0,
        module="memory_core.settings",
        registry=_SEEN,
    )


def _is_json(field: FieldInfo) -> bool:
    """Lists and dicts come as JSON in a variable, as pydantic-settings reads them."""
    kinds = [field.annotation]
    if typing.get_origin(field.annotation) in (typing.Union, types.UnionType):  # X | None
        kinds = list(typing.get_args(field.annotation))
    return any(typing.get_origin(k) in (list, dict) or k in (list, dict) for k in kinds)


class LegacyEnvSource(PydanticBaseSettingsSource):
    """Reads the old flat variables into their groups; ranked below the new variables."""

    def __init__(self, settings_cls: type[BaseSettings], prefix: str) -> None:
        super().__init__(settings_cls)
        self.prefix = prefix

    def get_field_value(self, field: FieldInfo, field_name: str) -> tuple[Any, str, bool]:
        """Unused: __call__ reads the variables by their old names."""
        return None, field_name, False

    def __call__(self) -> dict[str, Any]:
        env = {k.upper(): v for k, v in os.environ.items()}
        out: dict[str, dict[str, Any]] = {}
        for old, (group, field) in RENAMED.items():
            var = f"{self.prefix}{old}".upper()
            if var not in env:
                continue
            _warn(var, new_variable(old, self.prefix))
            value: Any = env[var]
            group_model = self.settings_cls.model_fields[group].annotation
            assert isinstance(group_model, type) and issubclass(group_model, BaseModel)
            if _is_json(group_model.model_fields[field]):
                value = json.loads(value)
            out.setdefault(group, {})[field] = value
        return out


class LegacyInitSource(PydanticBaseSettingsSource):
    """Settings(llm_base_url=...) moved into its group before the sources merge, so an
    argument still outranks every variable."""

    def __init__(self, settings_cls: type[BaseSettings], init: PydanticBaseSettingsSource) -> None:
        super().__init__(settings_cls)
        self.init = init

    def get_field_value(self, field: FieldInfo, field_name: str) -> tuple[Any, str, bool]:
        """Unused: __call__ moves the arguments as a whole."""
        return None, field_name, False

    def __call__(self) -> dict[str, Any]:
        moved: dict[str, Any] = move_flat_kwargs(self.init())
        return moved


def move_flat_kwargs(data: Any) -> Any:
    """Settings(llm_base_url=...) as Settings(llm={"base_url": ...}), with a warning."""
    if not isinstance(data, dict) or not any(k in RENAMED for k in data):
        return data
    data = dict(data)
    for old in [k for k in data if k in RENAMED]:
        group, field = RENAMED[old]
        _warn(f"Settings({old}=...)", f"Settings({group}={{'{field}': ...}})")
        current = data.get(group, {})
        merged = (
            current.model_dump(exclude_unset=True)
            if isinstance(current, BaseModel)
            else dict(current)
        )
        merged.setdefault(field, data.pop(old))  # the nested spelling wins
        data[group] = merged
    return data
