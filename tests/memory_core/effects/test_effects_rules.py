"""A card's effect as the console, the API and the CLI show it: judged by the configured rules
(HINDSIGHT_DECAY__EFFECTS__...), not the defaults; the console's effect column and filter."""

from __future__ import annotations

import json

import httpx
import pytest
from sqlmodel import Session

from memory_api.app import create_app
from memory_core.effects.fdr import harms_p
from memory_core.models.card import Card
from memory_core.serve.service import MemoryService
from memory_core.settings import EffectRules
from tests.helpers.cli import hindsight
from tests.helpers.serve import LiveServer, add_card
from tests.helpers.ui import seed, signed_in

# counts per arm: (served, served ok, withheld, withheld ok); under the default rules
# (20 outcomes per arm, z=2.576) the first helps and the second harms
HELPS = (40, 34, 30, 10)
HARMS = (40, 8, 30, 22)
STRICT = EffectRules(min_withheld=50)  # 30 withheld outcomes are too few: no verdict yet


def _counts(engine, card_id, counts: tuple[int, int, int, int]) -> None:
    with Session(engine) as s:
        c = s.get(Card, card_id)
        assert c is not None
        c.served_outcomes, c.served_successes, c.withheld_outcomes, c.withheld_successes = counts
        s.add(c)
        s.commit()


@pytest.fixture
def judged_site(request, settings, engine):
    """The console and API of a namespace with a helpful and a harmful card, under the rules
    given by the test's parameter (None: the defaults)."""
    rules = getattr(request, "param", None)
    if rules is not None:
        settings = settings.model_copy(
            update={"decay": settings.decay.model_copy(update={"effects": rules})}
        )
    seeded = seed(engine)
    _counts(engine, seeded.cards["held"].card_id, HELPS)
    _counts(engine, seeded.cards["lookup"].card_id, HARMS)
    with LiveServer(create_app(MemoryService(engine=engine, settings=settings))) as server:
        yield server.url, seeded


def test_card_page_shows_arms_interval_verdict_and_pin(judged_site) -> None:
    base, s = judged_site
    with signed_in(base, s.keys["read"]) as c:
        page = c.get(f"/ui/cards/{s.cards['held'].card_id}").text
        assert 'class="tag effect helps">helps<' in page
        # served 34 of 40, withheld 10 of 30: 0.850 - 0.333 = +0.517
        assert "<td>40</td><td>34</td><td>0.850</td>" in page
        assert "<td>30</td><td>10</td><td>0.333</td>" in page
        assert "<strong>+0.517</strong>, 99% interval <strong>[+0.214, +0.713]</strong>" in page
        assert "not pinned" in page
        assert "p = 1, Benjamini-Hochberg q = 1 over 2 tested cards" in page  # does better
        bad = c.get(f"/ui/cards/{s.cards['lookup'].card_id}").text
        served, served_ok, withheld, withheld_ok = HARMS
        (p,) = harms_p([served_ok], [served], [withheld_ok], [withheld])
        # two cards tested in the namespace; the helpful one's p is 1, so q = 2p
        assert f"p = {p:.2g}, Benjamini-Hochberg q = {2 * p:.2g} over 2 tested cards" in bad
        fresh = c.get(f"/ui/cards/{s.cards['review'].card_id}").text
        assert "No outcome reported yet" in fresh

        listed = c.get("/ui/cards").text
        assert "helps</span> +0.52" in listed and "harms</span> -0.53" in listed
        harmful = c.get("/ui/cards?effect=harms").text
        assert "lookup needs an order id" in harmful
        assert "search answers 429 on big pages" not in harmful
        unclear = c.get("/ui/cards?effect=unclear").text
        assert "refunds need a second look" in unclear and "lookup needs" not in unclear
        assert c.get("/ui/cards?effect=great").status_code == 400


@pytest.mark.parametrize("judged_site", [STRICT], indirect=True)
def test_console_and_api_judge_by_the_configured_rules(judged_site) -> None:
    base, s = judged_site
    held = s.cards["held"].card_id
    with signed_in(base, s.keys["admin"]) as c:
        page = c.get(f"/ui/cards/{held}").text
        assert "no measurable effect yet" in page and 'effect helps"' not in page
        assert "lookup needs an order id" not in c.get("/ui/cards?effect=harms").text
    api = httpx.Client(base_url=base, headers={"Authorization": f"Bearer {s.keys['admin']}"})
    with api:
        one = api.get(f"/v1/cards/{held}").json()["effect"]
        assert one["verdict"] == "unclear" and one["withheld_uses"] == 30
        listed = {c["card_id"]: c["effect"]["verdict"] for c in api.get("/v1/cards").json()}
        assert listed[str(held)] == "unclear"
        assert listed[str(s.cards["lookup"].card_id)] == "unclear"
        state = {"tool": "search", "retry_count": 0}
        hits = api.post("/v1/cards/query", json={"task_state": state}).json()["cards"]
        served = [h["card"]["effect"]["verdict"] for h in hits if h["card"]["card_id"] == str(held)]
        assert served == ["unclear"]  # an agent's answer is judged by the same rules
        pinned = api.post(f"/v1/cards/{held}/pin", json={"pinned": True}).json()
        assert pinned["pinned"] and pinned["effect"]["verdict"] == "unclear"


def test_cli_judges_by_the_configured_rules(env_for, engine) -> None:
    card = add_card(engine, namespace="default", scenario="a card that helps")
    _counts(engine, card.card_id, HELPS)

    def run(*args: str, **env: str) -> str:
        return hindsight({**env_for, **env, "COLUMNS": "200"}, *args).stdout

    assert "helps +0.52" in run("cards", "list")
    strict = {"HINDSIGHT_DECAY__EFFECTS__MIN_WITHHELD": "50"}
    show = run("cards", "show", str(card.card_id), "--format", "json", **strict)
    assert json.loads(show)["effect"]["verdict"] == "unclear"
    assert "no measurable effect yet +0.52" in run("cards", "list", **strict)
