"""The gate every write path calls: content that reads as an instruction is quarantined, calls
made on an instruction from untrusted text are dropped, and each piece says where it came from.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from memory_core.models.card import CardStatus, FailureMode
from memory_core.models.drafts import DraftCard
from memory_core.models.trajectory import Step
from memory_core.screen.detect import directive
from memory_core.screen.exposure import exposures, names_a_tool, run_tools
from memory_core.screen.instructed import instructed_steps
from memory_core.screen.pointers import known_identifiers, points_at_tool, strings_in
from memory_core.screen.provenance import Origin, with_origin
from memory_core.screen.taint import instructed_by, words_of
from memory_core.screen.values import scrub, supplied_values
from memory_core.task_state import normalise_error

# producers that write their own templates around what the run held (errors, tool names,
# argument features): only those run-derived parts are screened, never the templates
CONTRAST = "contrast"
RULE_PRODUCERS = frozenset({"rule-extractor", CONTRAST})
CARRIED = frozenset({CONTRAST, "llm-contrast"})  # group lessons, screened when made
CARD_TEXT_FIELDS = ("scenario", "expected_outcome", "actual_outcome")
_ERROR_LABEL = re.compile(r"^\s*(?:error|exception|fatal)\s*[:\-]\s*", re.IGNORECASE)


def reasons(texts: Iterable[str]) -> list[str]:
    """One reason per text that reads as an instruction to the agent (quoted, cut short)."""
    out = []
    for t in texts:
        why = directive(t)
        if why:
            out.append(f"instruction-like content ({why}): {t[:120]!r}")
    return out


def card_texts(card: Mapping[str, Any]) -> list[str]:
    """Every text of a card a reader or an agent sees (fields of a card dict or row dump)."""
    texts = [str(card.get(k) or "") for k in CARD_TEXT_FIELDS]
    texts += list(strings_in(card.get("action_sequence") or []))
    texts += list(strings_in(card.get("failure_modes") or []))
    # preconditions are served too, and their literals can quote any text
    texts += [str(p) for p in card.get("preconditions") or []]
    texts += [str(card.get(k) or "") for k in ("key", "query", "value")]
    return [t for t in texts if t.strip()]


def screen_card(card: Mapping[str, Any]) -> list[str]:
    """Why a card written from outside (API, MCP, review edit, regeneration, merge) is not safe."""
    return reasons(card_texts(card))


def _untrusted(d: DraftCard) -> list[str]:
    """The parts of a draft that came from the run's text, not from the extractor's templates."""
    if d.provenance.get("producer") in RULE_PRODUCERS:
        # the rule extractor copies error texts into the modes (and the scenario names them);
        # its handling and notes are its own templates around tool names
        texts = [f.mode for f in d.failure_modes]
        texts += [str(v) for a in d.action_sequence for v in strings_in(a.params_template)]
        return texts
    return card_texts(
        {
            "scenario": d.scenario,
            "expected_outcome": d.expected_outcome,
            "actual_outcome": d.actual_outcome,
            "action_sequence": [a.model_dump() for a in d.action_sequence],
            "failure_modes": [f.model_dump() for f in d.failure_modes],
        }
    )


def screen_draft(d: DraftCard) -> DraftCard:
    """The draft with its typed origin, quarantined if untrusted parts read as instructions."""
    rule = d.provenance.get("producer") in RULE_PRODUCERS
    mode_origin = Origin.observed if rule else Origin.llm
    modes = [
        FailureMode.model_validate({**f.model_dump(), "origin": mode_origin.value})
        for f in d.failure_modes
    ]
    out = replace(
        d,
        failure_modes=modes,
        provenance=with_origin(d.provenance, Origin.agent_action if rule else Origin.llm),
    )
    if d.status is CardStatus.rejected:
        return out
    why = reasons(_untrusted(d))
    if why:
        out.status = CardStatus.quarantined
        out.flags = [*d.flags, *why]
    return out


def _mentions(d: DraftCard, tool: str) -> bool:
    name = words_of(tool)
    texts = [d.scenario, d.actual_outcome, d.expected_outcome]
    texts += [f"{f.mode} {f.handling}" for f in d.failure_modes]
    texts += [f"{a.tool} {a.note}" for a in d.action_sequence]
    return any(name in words_of(t) for t in texts)


def split_orders(steps: Sequence[Step]) -> dict[str, str]:
    """Error signatures that are part of an instruction split over neighbouring steps (each
    half harmless alone), with the reason."""
    texts = [(s, t) for s in steps for t in ((s.error,) if s.type == "tool_call" else ()) if t]
    out: dict[str, str] = {}
    for (a, ta), (b, tb) in itertools.pairwise(texts):
        # each half's "Error:" label would sit inside the joined sentence
        why = directive(f"{_ERROR_LABEL.sub('', ta)} {_ERROR_LABEL.sub('', tb)}")
        if why:
            for s in (a, b):
                out[normalise_error(s.error or "")] = f"split over steps, {why}"
    return out


def untaint(drafts: Sequence[DraftCard], steps: Sequence[Step]) -> list[DraftCard]:
    """Drafts without the calls the agent made on an instruction from untrusted text: the
    steps go; a draft about such a call (or that still names it) goes. Drafts quoting part of
    an instruction split over steps are quarantined."""
    # a contrast caution is screened for taint over its own failed runs when it is made
    # (retrospect.contrast), and an LLM contrast over every trial its model read
    # (retrospect.llm_contrast_cards); this run only carries it, so its steps say nothing about it
    carried = [d for d in drafts if d.provenance.get("producer") in CARRIED]
    drafts = [d for d in drafts if d.provenance.get("producer") not in CARRIED]
    return [*_untaint_own(drafts, steps), *carried]


def _untaint_own(drafts: Sequence[DraftCard], steps: Sequence[Step]) -> list[DraftCard]:
    supplied = supplied_values(steps)  # values an error, a result or a user handed the agent
    drafts = [scrub(d, supplied) for d in drafts]
    known = known_identifiers(steps)
    named_tools = run_tools(steps)
    # the raw errors too: a failure mode is normalised (lower case hides a camelCase name);
    # an error that names another tool of the run points at it just the same
    pointed = {
        normalise_error(s.error): why
        for s in steps
        if s.type == "tool_call"
        and s.error
        and (
            why := points_at_tool(s.error, known=known, strict=True)
            or names_a_tool(s.error, named_tools, s.tool)
        )
    }
    drafts = [_quarantine_pointers(d, known, pointed) for d in drafts]
    by = instructed_by(steps)
    bad = set(by)
    instructed = instructed_steps(steps, by, supplied)
    if instructed:  # which steps a message directed, and which message: on every card of the run
        drafts = [replace(d, provenance={**d.provenance, "instructed": instructed}) for d in drafts]
    exposed = exposures(steps, tainted=by)
    if exposed:  # an LLM that read an injection may have restated it in any words, and a run
        # that obeyed one shows what the order wanted: neither path learns from it
        drafts = [_quarantine_exposed(d, exposed) for d in drafts]
    split = split_orders(steps)
    if split:
        drafts = [_quarantine_split(d, split) for d in drafts]
    if not bad:
        return list(drafts)
    tools = {s.tool for s in steps if s.index in bad and s.tool}
    # a tool the agent also called untainted in this run keeps its other lessons
    clean_calls = {s.tool for s in steps if s.type == "tool_call" and s.index not in bad}
    out = []
    for d in drafts:
        kept = [a for a in d.action_sequence if a.tool not in tools]
        cut = replace(d, action_sequence=kept)
        if d.action_sequence and not kept:
            continue
        if len(kept) < len(d.action_sequence):
            cut.signature_parts = tuple(p for p in d.signature_parts if p not in tools)
        if any(_mentions(cut, t) for t in tools - clean_calls):
            continue
        out.append(cut)
    return out


def _quarantine_pointers(
    d: DraftCard, known: frozenset[str], pointed: Mapping[str, str]
) -> DraftCard:
    """A draft whose run-derived text points the agent at a tool the run never used."""
    if d.status is CardStatus.rejected:
        return d
    why = [
        f"instruction-like content ({reason}): {t[:120]!r}"
        for t in _untrusted(d)
        if (reason := pointed.get(t) or points_at_tool(t, known=known))
    ]
    if not why:
        return d
    return replace(d, status=CardStatus.quarantined, flags=[*d.flags, *why])


def _quarantine_exposed(d: DraftCard, exposed: Sequence[str]) -> DraftCard:
    if d.status is CardStatus.rejected:
        return d
    reader = "rule extractor" if d.provenance.get("producer") in RULE_PRODUCERS else "LLM"
    shown = "; ".join(exposed[:3]) + (f"; {len(exposed) - 3} more" if len(exposed) > 3 else "")
    why = f"instruction-like content in the run the {reader} read ({shown})"
    return replace(d, status=CardStatus.quarantined, flags=[*d.flags, why])


def _quarantine_split(d: DraftCard, split: dict[str, str]) -> DraftCard:
    why = [
        f"instruction-like content ({split[f.mode]}): {f.mode[:120]!r}"
        for f in d.failure_modes
        if f.mode in split
    ]
    if not why or d.status is CardStatus.rejected:
        return d
    return replace(d, status=CardStatus.quarantined, flags=[*d.flags, *why])


def fact_reasons(
    *,
    key: str,
    value: str,
    query: str | None,
    said: Sequence[str] = (),
    known: frozenset[str] | None = None,
) -> list[str]:
    """Why a fact (or the statement it came from) reads as an instruction to the agent; with
    `known` (the identifiers of the run it was said in), also when a statement or the value
    points the agent at a tool the run never used."""
    spaced = re.sub(r"[_.]", " ", key)
    out = reasons([spaced, value, query or "", *said])
    if known is not None:
        out += [
            f"instruction-like content ({reason}): {t[:120]!r}"
            for t in (value, *said)
            if (reason := points_at_tool(t, known=known))
        ]
    return out
