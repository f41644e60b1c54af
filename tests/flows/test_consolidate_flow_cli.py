"""The consolidate flow with the real local embedder and the embedded index, and the
`hindsight consolidate` / `cards history` commands, on SQLite and PostgreSQL."""

from __future__ import annotations

import json

from sqlmodel import Session

from flows.consolidate import consolidate
from flows.params import ConsolidateParams
from memory_core.embed.onnx import MODEL_NAME
from memory_core.index.factory import open_index
from memory_core.index.sync import check_index
from memory_core.models.card import Card, CardVersion
from tests.helpers.cli import hindsight
from tests.memory_core.consolidate.test_consolidate import _card


def test_similar_wording_merges_through_embeddings_and_the_index_follows(
    flow_env, settings, engine
) -> None:
    pre_a = ['last_tool == "pay" && last_error == "http 429 too many requests"']
    pre_b = ['last_tool == "pay" && last_error == "http 429 too many requests, retry later"']
    a = _card(
        engine,
        scenario="After pay failed with HTTP 429, wait and retry the payment",
        pre=pre_a,
        tools=["pay"],
        evidence=2,
    )
    b = _card(
        engine,
        scenario="After pay failed with http 429: wait, then retry the payment",
        pre=pre_b,
        tools=["pay"],
    )
    other = _card(
        engine,
        scenario="After pay failed because the card was declined, ask for another card",
        pre=['last_tool == "pay" && last_error == "card declined"'],
        tools=["pay"],
    )
    dry = consolidate(ConsolidateParams(dry_run=True))
    assert dry.absorbed == 1 and "cosine" in dry.similarity and dry.index == ""
    done = consolidate(ConsolidateParams())
    assert (done.merges, done.absorbed) == (1, 1) and done.embedded == 3
    with Session(engine) as s:
        assert s.get(Card, b).superseded_by == a and s.get(Card, other).status == "active"
    index = open_index(settings, dim=384)
    try:
        drift = check_index(engine=engine, index=index, model=MODEL_NAME)
        assert drift.clean and drift.expected == 2  # the merged-away card left the index
    finally:
        index.close()
    again = consolidate(ConsolidateParams())
    assert (again.absorbed, again.embedded) == (0, 0)  # nothing new to embed or merge


def test_consolidate_and_history_commands(env_for, engine) -> None:
    pre = ['tool == "x"']
    a = _card(engine, scenario="s1", pre=pre, tools=["x"], evidence=2)
    b = _card(engine, scenario="s2", pre=pre, tools=["x"])
    env = {**env_for, "HINDSIGHT_EMBEDDING__PROVIDER": "none"}
    plan = json.loads(hindsight(env, "consolidate", "--dry-run", "-f", "json").stdout)
    assert plan["dry_run"] and plan["absorbed"] == 1
    assert plan["plan"][0]["survivor"] == str(a)
    shown = hindsight(env, "consolidate")
    assert "cards merged away" in shown.stdout and "no embedder" in shown.stderr
    hist = hindsight(env, "cards", "history", str(b)).stdout
    assert "merged into" in hist and "superseded" in hist
    full = json.loads(hindsight(env, "cards", "history", str(a), "-f", "json").stdout)
    assert [v["version"] for v in full["versions"]] == [2] or full["card"]["version"] == 2
    bad = hindsight(env, "cards", "history", "nope", check=False)
    assert bad.returncode == 2 and "card_id" in bad.stderr


def test_history_command_redacts_secrets_in_stored_versions(env_for, engine) -> None:
    """An old version written before redaction (or by a path that missed it): the CLI shows
    its reason and snapshot redacted, as the served history does."""
    secret = "sk-abcdefghijklmnopqrstuvwxyz012345"
    cid = _card(engine, scenario="call the api", pre=['tool == "x"'], tools=["x"])
    with Session(engine) as s:
        s.add(
            CardVersion(
                card_id=cid,
                version=0,
                snapshot={"scenario": f"call the api with OPENAI_API_KEY={secret}"},
                reason=f"imported; the key was {secret}",
                actor="legacy",
            )
        )
        s.commit()
    shown = hindsight(env_for, "cards", "history", cid.hex[:8])  # by prefix, as before
    assert secret not in shown.stdout and "[REDACTED:" in shown.stdout
    assert "legacy" in shown.stdout
    full = hindsight(env_for, "cards", "history", str(cid), "-f", "json").stdout
    assert secret not in full
    (old,) = [v for v in json.loads(full)["versions"] if v["actor"] == "legacy"]
    assert "[REDACTED:" in old["snapshot"]["scenario"] and "[REDACTED:" in old["reason"]
