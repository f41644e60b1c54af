"""Typed provenance: where a card's, a fact's or a failure mode's content came from."""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum
from typing import Any


class Origin(StrEnum):
    """The source of a piece of content, most trusted first."""

    operator = "operator"  # written by a person through a key (key_id kept)
    agent_action = "agent_action"  # the agent's own tool calls, as seen in its run
    observed = "observed"  # seen in a tool result or error (data, never an instruction)
    user = "user"  # a user's statement (data, never an instruction)
    llm = "llm"  # an LLM's inference from a run or a conversation


# ranking multiplies a card's score by its origin's weight: a lesson an operator wrote or the
# agent was seen to act out beats one an LLM inferred
TRUST: dict[Origin, float] = {
    Origin.operator: 1.0,
    Origin.agent_action: 1.0,
    Origin.observed: 0.95,
    Origin.user: 0.9,
    Origin.llm: 0.85,
}
LABEL: dict[Origin, str] = {
    Origin.operator: "written by an operator",
    Origin.agent_action: "seen in the agent's own runs",
    Origin.observed: "observed in a tool result",
    Origin.user: "stated by a user",
    Origin.llm: "inferred by an LLM",
}
# producers written before provenance was typed (see migration 0011)
_LEGACY: dict[str, Origin] = {
    "rule-extractor": Origin.agent_action,
    "llm": Origin.llm,
    "facts-llm": Origin.llm,
    "facts-rules": Origin.user,
    "operator": Origin.operator,
}


def origin_of(provenance: Mapping[str, Any]) -> Origin:
    """A card's origin: the typed field, else inferred from its producer (older rows)."""
    value = provenance.get("origin")
    if isinstance(value, str) and value in Origin.__members__:
        return Origin(value)
    producer = str(provenance.get("producer", ""))
    if producer in _LEGACY:
        return _LEGACY[producer]
    if provenance.get("model") or producer.startswith("llm"):
        return Origin.llm
    # a fact written through a key names the key's actor as producer
    return Origin.operator if producer.startswith("key:") else Origin.agent_action


def trust(provenance: Mapping[str, Any]) -> float:
    """The ranking weight of a card's origin (0..1)."""
    return TRUST[origin_of(provenance)]


def label(provenance: Mapping[str, Any]) -> str:
    """How the prompt block names a card's origin."""
    return LABEL[origin_of(provenance)]


def with_origin(provenance: Mapping[str, Any], origin: Origin, **more: Any) -> dict[str, Any]:
    """The provenance with its typed origin set (and more fields, e.g. key_id)."""
    return {**provenance, "origin": origin.value, **more}
