"""One set of grounding checks for every LLM-made card: a regenerated draft is held to the
first draft's standard (preconditions that hold on the run, tools the run called), and a
judged merge stands only when each card holds on the other's runs."""

from __future__ import annotations

import json
from datetime import UTC, datetime

from sqlalchemy import select
from sqlmodel import Session

from flows.nightly import nightly
from flows.params import NightlyParams
from flows.stages import run_summary
from flows.summary import NightlySummary
from memory_core.consolidate.judge import grounded_judge
from memory_core.consolidate.rows import CardRow, PairJudgement
from memory_core.ingest.store import ingest
from memory_core.models.card import Card, CardVersion
from memory_core.retrospect.dead_letters import list_rejections
from tests.helpers import fake_model
from tests.helpers.scripted_llm import Reply

# a first draft that fails the suite (its expected outcome is over the size bound); a secret
# no longer does: it is redacted before validation sees the draft
WORDY = "the vault answers again " * 120
RUN = {"id": "leak", "steps": [{"type": "tool_call", "tool": "vault_read", "error": "HTTP 401"}]}


def _regenerating(card_change):
    def respond(body, n):
        kind = fake_model.prompt_kind(body)
        if kind == "cards":  # a first draft that fails validation (over the size bound)
            out = fake_model.cards(body)
            out["cards"][0]["expected_outcome"] = WORDY
            return Reply(json.dumps(out))
        if kind == "regenerate":
            card = json.loads(
                body["messages"][1]["content"].split("The card:\n", 1)[1].split("\n\nIt failed")[0]
            )
            card["expected_outcome"] = "the vault answers again"
            card_change(card)
            return Reply(json.dumps(card))
        if "durable facts" in body["messages"][0]["content"]:
            return Reply(json.dumps({"facts": []}))
        return fake_model.respond(body, n)

    return respond


def _ungrounded(card) -> None:
    card["preconditions"] = ["error_code == 401"]  # not a task-state variable
    card["action_sequence"][0]["tool"] = "wipe_disk"  # never called in the run


def _run(llm_env, engine, change) -> tuple[Card, list[str], NightlySummary]:
    # what validation decides, not the serving gate after it (one run is one task group)
    llm_env(_regenerating(change), gate__enabled="false")
    ingest(engine=engine, records=iter([("r", RUN)]), namespace="default", task_type="default")
    state = nightly(NightlyParams(), return_state=True)
    assert state.is_completed(), state.message
    summary = run_summary(state)
    with Session(engine) as s:
        [card] = s.execute(select(Card)).scalars().all()
        reasons = [
            v.reason
            for v in s.execute(
                select(CardVersion)
                .where(CardVersion.card_id == card.card_id)
                .order_by(CardVersion.version)
            ).scalars()
        ]
    return card, reasons, summary


def test_an_ungrounded_regenerated_card_is_rejected(llm_env, engine) -> None:
    card, reasons, summary = _run(llm_env, engine, _ungrounded)
    assert card.status == "rejected", (card.status, card.preconditions)
    assert "regenerated card: its preconditions hold on no state" in reasons[-1]
    assert "wipe_disk never called in the source run" in reasons[-1]
    # a refused regeneration is a rejection as a refused first draft is: counted, kept on
    # the card's run with the model's answer, listed for the night and the console
    assert summary.validation.drafts_rejected == 1 and summary.validation.rejected == 1
    [line] = [x for x in summary.outcome.rejections if "regenerated card" in x]
    assert line.startswith("leak (draft): rejected: regenerated card: its preconditions"), line
    [kept] = [x for x in list_rejections(engine=engine) if "regenerated card" in x.reason]
    assert kept.part == "draft" and kept.key == "leak" and "wipe_disk" in kept.raw
    assert "regenerated" not in kept.raw  # the model's answer, not the provenance added to it


def test_a_grounded_regenerated_card_goes_active(llm_env, engine) -> None:
    card, reasons, summary = _run(llm_env, engine, lambda card: None)
    assert summary.validation.drafts_rejected == 0
    assert card.status == "active" and card.provenance["regenerated"]
    assert reasons[-2].startswith("regenerated after failing"), reasons
    assert reasons[-1].startswith("passed validation"), reasons  # the validator's own version


def _row(card: Card) -> CardRow:
    return CardRow(
        card_id=card.card_id,
        scenario=card.scenario,
        preconditions=card.preconditions,
        action_sequence=card.action_sequence,
        failure_modes=card.failure_modes,
        confidence=card.confidence,
        evidence_count=card.evidence_count,
        use_count=0,
        success_count=0,
        failure_count=0,
        version=card.version,
        created_at=datetime.now(UTC),
    )


def test_a_judged_merge_must_hold_on_both_cards_runs(engine) -> None:
    from datetime import timedelta

    from memory_core.retrospect.rule_extractor import RuleExtractor
    from memory_core.retrospect.stage import retrospect_once

    runs = [
        {"id": "a", "steps": [{"type": "tool_call", "tool": "search", "error": "HTTP 429"}]},
        {"id": "b", "steps": [{"type": "tool_call", "tool": "book", "error": "HTTP 429"}]},
        {"id": "c", "steps": [{"type": "tool_call", "tool": "book", "error": "HTTP 429 again"}]},
    ]
    ingest(
        engine=engine,
        records=iter([(r["id"], r) for r in runs]),
        namespace="default",
        task_type="default",
    )
    retrospect_once(
        engine=engine,
        extractor=RuleExtractor(),
        worker="w",
        batch_size=10,
        lease=timedelta(minutes=5),
    )
    with Session(engine) as s:
        cards = list(s.execute(select(Card)).scalars())
    on = {
        tool: [c for c in cards if any(f'"{tool}"' in p for p in c.preconditions)]
        for tool in ("search", "book")
    }
    search, book = on["search"][0], on["book"][0]
    same = grounded_judge(
        judge=lambda older, newer: PairJudgement(relation="same", reason="both are 429s"),
        engine=engine,
    )
    verdict = same(_row(search), _row(book))
    assert verdict.relation == "unrelated" and "hold on no state" in verdict.reason
    books = on["book"]
    if len(books) > 1:  # two cards on the same tool: each holds on the other's runs
        assert same(_row(books[0]), _row(books[1])).relation == "same"
    assert same(_row(book), _row(book)).relation == "same"
