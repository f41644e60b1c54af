"""A tool's reminder's profile: the kinds of argument every call behind it had.

A reminder (a card naming the tool alone, serve.retrieval.warning_scope) warns of one error of
the tool; several match every call of the tool and tie. Its profile is the keyable argument
features (retrospect.call_features: an enumerated word, a flag, an identifier's kind) that
every supporting call in its evidence had, once that evidence spans at least MIN_GROUPS task
groups (one task's calls share features by chance). Retrieval puts a reminder whose profile a
call contradicts after the others (serve.profiles). Stored in the card's provenance under
PROFILE as [{"expr": CEL over `args`, "text": the feature in words}], recomputed from all the
evidence whenever evidence is added or merged, so it only narrows as calls of other kinds come.

Layer: cards.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from sqlalchemy import bindparam, select, update
from sqlmodel import Session, col

from memory_core.cards.confidence import run_of
from memory_core.cards.evidence import group_unit, grouped_evidence
from memory_core.cel_programs import scan_variables
from memory_core.models.card import Card, CardEvidence
from memory_core.retention.evidence import REMOVED
from memory_core.retrospect.call_features import atoms, keyable
from memory_core.retrospect.placeholders import REDACTED
from memory_core.screen.values import PLACEHOLDER

PROFILE = "seen_with"
MIN_GROUPS = 2  # task groups the evidence must span for its shared features to mean a kind
_CHUNK = 500  # ids per IN (...) read


def tool_scope(preconditions: Iterable[str]) -> bool:
    """The card names the tool alone: it has preconditions, and each reads `tool` alone (one
    with none applies everywhere: no tool's reminder)."""
    found = [scan_variables(p) for p in preconditions]
    return bool(found) and all(v is not None and v <= {"tool"} for v in found)


def _clean(text: str) -> bool:
    low = text.casefold()
    return PLACEHOLDER not in low and REDACTED.casefold() not in low


def _removed(args: Any) -> bool:
    return isinstance(args, dict) and REMOVED in args.values()


def profile_of(calls: Sequence[tuple[Mapping[str, Any] | None, str]]) -> list[dict[str, str]]:
    """The features every call had (calls: (action, task group)), in a stable order; empty
    below MIN_GROUPS groups. A withheld or redacted value is never a feature."""
    # a call whose run retention summarised (its values removed) has no kinds left to tell
    calls = [(a, g) for a, g in calls if not _removed((a or {}).get("args"))]
    if len({g for _, g in calls}) < MIN_GROUPS:
        return []
    shared: dict[str, str] | None = None
    for action, _ in calls:
        args = (action or {}).get("args")
        have = {
            a.expr: a.text
            for a in atoms(args if isinstance(args, dict) else None)
            if keyable(a) and _clean(a.expr) and _clean(a.text)
        }
        shared = have if shared is None else {k: v for k, v in shared.items() if k in have}
        if not shared:
            return []
    return [{"expr": k, "text": v} for k, v in sorted((shared or {}).items())]


def stored_profile(provenance: Mapping[str, Any] | None) -> list[dict[str, str]]:
    """A card's profile as its provenance holds it (malformed entries skipped)."""
    raw = (provenance or {}).get(PROFILE)
    if not isinstance(raw, list):
        return []
    return [
        {"expr": p["expr"], "text": str(p.get("text", p["expr"]))}
        for p in raw
        if isinstance(p, dict) and isinstance(p.get("expr"), str) and _clean(p["expr"])
    ]


def refresh_profiles(session: Session, card_ids: Iterable[uuid.UUID]) -> int:
    """Recompute the profiles of the tool's reminders among the cards, in the caller's
    transaction; how many changed. Other cards hold none."""
    ids = sorted(set(card_ids), key=str)
    cards: dict[uuid.UUID, dict[str, Any]] = {}
    for i in range(0, len(ids), _CHUNK):
        for cid, pre, prov in session.execute(
            select(col(Card.card_id), col(Card.preconditions), col(Card.provenance)).where(
                col(Card.card_id).in_(ids[i : i + _CHUNK])
            )
        ).all():
            if tool_scope(pre or []) or PROFILE in (prov or {}):
                cards[cid] = prov or {}
    if not cards:
        return 0
    calls: dict[uuid.UUID, list[tuple[Any, str]]] = {c: [] for c in cards}
    wanted = sorted(cards, key=str)
    for cid, tid, result, group, action in grouped_evidence(
        session, wanted, col(CardEvidence.action)
    ):
        run = run_of(result or {})
        if run is None or not run.supports:  # a contrast or contradicting call: no kind of it
            continue
        calls[cid].append((action, group_unit(group, run, tid)))
    params = []
    for cid in wanted:
        prov = cards[cid]
        now = profile_of(calls[cid])
        if now == stored_profile(prov) and (now or PROFILE not in prov):
            continue
        fresh = {k: v for k, v in prov.items() if k != PROFILE}
        if now:
            fresh[PROFILE] = now
        params.append({"cid": cid, "prov": fresh})
    if params:
        session.connection().execute(
            update(Card)
            .where(col(Card.card_id) == bindparam("cid"))
            .values(provenance=bindparam("prov")),
            params,
        )
    return len(params)


def profile_words(provenance: Mapping[str, Any] | None) -> str:
    """The profile in words ("" when none): what the console's card page shows."""
    return ", ".join(p["text"] for p in stored_profile(provenance))
