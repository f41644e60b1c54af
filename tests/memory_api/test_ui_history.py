"""The console's card history: each version by its actor with only what that actor changed;
outcomes are the use log's, not versions; a long history is paged."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest

from memory_api.app import create_app
from memory_core.db import session_scope
from memory_core.decay.feedback import record_feedback
from memory_core.models.card import Card, CardUse, CardVersion
from memory_core.models.columns import utcnow
from memory_core.serve.service import MemoryService
from memory_core.validate.review import edit
from memory_core.validate.stage import validate_drafts
from tests.helpers.serve import LiveServer, add_card
from tests.helpers.ui import seed, signed_in


@pytest.fixture
def ui(settings, engine):
    svc = MemoryService(engine=engine, settings=settings)
    seeded = seed(engine)
    with LiveServer(create_app(svc)) as server:
        yield server, seeded


def _versions(page: str) -> list[str]:
    return re.findall(r'<li class="version">(.*?)</li>', page, re.S)


def test_history_names_the_stage_and_the_person_and_folds_outcomes(ui, engine, tmp_path) -> None:
    server, s = ui
    card = add_card(
        engine,
        scenario="When the export times out",
        preconditions=['tool == "search"'],
        confidence=0.4,
        status="draft",
    )
    with session_scope(engine) as session:  # a draft as the nightly writes one
        row = session.get(Card, card.card_id)
        row.expected_outcome = row.actual_outcome = "ok"
        session.add(row)
    validate_drafts(engine=engine, reports_dir=tmp_path, namespace="team-a")
    for outcome in ("success", "failure"):  # a reader key's agent reports outcomes
        record_feedback(
            engine=engine, namespace="team-a", card_id=card.card_id, outcome=outcome, actor="key:r"
        )
    edit(
        engine=engine,
        namespace="team-a",
        card_id=card.card_id,
        changes={"scenario": "nightly export times out"},
        actor="key:cy",
    )
    with signed_in(server.url, s.keys["read"]) as c:
        page = c.get(f"/ui/cards/{card.card_id}").text
    versions = _versions(page)
    assert len(versions) == 2, versions  # the validator's and the person's; no outcome
    person, validator = versions
    assert "key:cy" in person and "edited in review: scenario" in person
    diff = person.split('class="meta unrecorded"')[0]
    # the person's diff holds the field they changed, not the confidence outcomes moved
    assert "<td>scenario</td>" in diff and "<td>confidence</td>" not in diff
    assert "confidence" in person.split('class="meta unrecorded"')[1], person
    assert "validator" in validator and "waits in review" in validator
    assert "key:r" not in page and "&#34;draft&#34;" not in page.split('id="hist-h"')[1]


def test_an_old_store_s_outcome_versions_fold_into_the_use_log_and_history_pages(
    ui, engine
) -> None:
    server, s = ui
    card = add_card(engine, scenario="search answers 503")
    with session_scope(engine) as session:
        session.add(
            CardVersion(
                card_id=card.card_id,
                version=1,
                snapshot={"scenario": card.scenario, "status": "draft", "confidence": 0.7},
                reason="distilled",
                actor="retrospect",
            )
        )
        for v in range(2, 122):  # one version per outcome, as older stores kept them
            session.add(
                CardVersion(
                    card_id=card.card_id,
                    version=v,
                    snapshot={"outcome": "success", "use_id": f"u{v}", "status": "active"},
                    reason="feedback: success",
                    actor="key:r",
                )
            )
        for v in range(122, 182):  # a stage's versions: more than a page
            session.add(
                CardVersion(
                    card_id=card.card_id,
                    version=v,
                    snapshot={"confidence": round(0.7 - v / 1000, 3)},
                    reason="decayed",
                    actor="decay",
                )
            )
        row = session.get(Card, card.card_id)
        row.version = 181
        session.add(row)
    with signed_in(server.url, s.keys["read"]) as c:
        page = c.get(f"/ui/cards/{card.card_id}").text
        assert "62 versions" in page and "119 outcomes reported by agents" in page
        assert len(_versions(page)) == 50 and "older versions" in page
        older = c.get(f"/ui/cards/{card.card_id}?versions=50").text
    assert len(_versions(older)) == 12 and "newer versions" in older
    # the first outcome moved the status draft -> active: shown, under the key that sent it
    first_outcome = _versions(older)[-2]
    assert "key:r" in first_outcome and "<td>status</td>" in first_outcome


def test_a_card_s_uses_are_paged(ui, engine) -> None:
    server, s = ui
    card = add_card(engine, scenario="search answers 502")
    with session_scope(engine) as session:
        for i in range(45):
            session.add(
                CardUse(
                    card_id=card.card_id,
                    namespace="team-a",
                    used_at=utcnow() - timedelta(minutes=i),
                    outcome="success" if i % 2 else None,
                    arm="withheld" if i % 3 == 0 else "served",
                    context={"state": {"tool": "search", "n": i}},
                )
            )
    with signed_in(server.url, s.keys["read"]) as c:
        first = c.get(f"/ui/cards/{card.card_id}").text
        last = c.get(f"/ui/cards/{card.card_id}?uses=40").text
    uses = re.findall(r'<ul class="uses">(.*?)</ul>', first, re.S)[0]
    assert "Uses (45)" in first and uses.count("<li>") == 20 and "older uses" in first
    assert "withheld" in uses and re.search(r"&#34;n&#34;: 0[,}]", uses)  # the newest first
    rest = re.findall(r'<ul class="uses">(.*?)</ul>', last, re.S)[0]
    assert rest.count("<li>") == 5 and re.search(r"&#34;n&#34;: 44[,}]", rest)
    assert "newer uses" in last
