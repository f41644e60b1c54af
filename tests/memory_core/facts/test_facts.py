"""Facts: written, refreshed, superseded by the newest statement with history, forgotten, found."""

from __future__ import annotations

from datetime import timedelta

import pytest
from sqlalchemy import select
from sqlmodel import Session, col

from memory_core.errors import InvalidInput, NotFound
from memory_core.facts.search import search_facts
from memory_core.facts.store import FactIn, forget_fact, write_fact
from memory_core.models.card import Card, CardVersion
from memory_core.models.columns import utcnow


def _write(engine, key, value, query=None, **kw):
    return write_fact(
        engine=engine,
        namespace="ns",
        fact=FactIn(key=key, value=value, query=query, **kw),
        actor="t",
    )


def _history(engine, card_id):
    with Session(engine) as s:
        return list(
            s.execute(
                select(CardVersion)
                .where(col(CardVersion.card_id) == card_id)
                .order_by(col(CardVersion.version))
            ).scalars()
        )


def test_same_statement_twice_is_one_fact(engine):
    a = _write(engine, "Preferred editor", "vim", "Which editor does the user prefer?")
    b = _write(engine, "preferred_editor", "vim", "Which editor does the user prefer?")
    assert a.card_id == b.card_id
    assert [v.version for v in _history(engine, a.card_id)] == [1]


def test_newer_value_supersedes_older_with_history(engine):
    old = _write(engine, "db", "we use MySQL", "Which database do we use?")
    new = _write(engine, "db", "we use PostgreSQL", "Which database do we use?")
    assert new.supersedes == old.card_id
    with Session(engine) as s:
        retired = s.get(Card, old.card_id)
        assert retired.status == "superseded" and retired.superseded_by == new.card_id
    hist = _history(engine, old.card_id)
    assert [v.version for v in hist] == [1, 2]
    assert "PostgreSQL" in hist[-1].reason and hist[-1].snapshot["status"] == "superseded"
    # another query under the same key is a different fact: not a contradiction
    other = _write(engine, "db", "version 16", "Which database version?")
    with Session(engine) as s:
        assert s.get(Card, new.card_id).status == "active"
        assert s.get(Card, other.card_id).status == "active"


def test_search_hides_superseded_unless_asked(engine):
    _write(engine, "db", "we use MySQL", "Which database do we use?")
    _write(engine, "db", "we use PostgreSQL", "Which database do we use?")
    _write(engine, "editor", "vim", "Which editor does the user prefer?")
    hits = search_facts(engine=engine, namespace="ns", text="which database")
    assert hits[0].fact.value == "we use PostgreSQL" and hits[0].keyword_rank == 0
    assert "we use MySQL" not in [h.fact.value for h in hits]
    both = search_facts(engine=engine, namespace="ns", text="database", include_superseded=True)
    assert {h.fact.value for h in both} == {"we use MySQL", "we use PostgreSQL"}
    assert search_facts(engine=engine, namespace="other", text="database") == []


def test_search_matches_word_forms_and_key_parts(engine):
    _write(engine, "favourite_hobby", "painting landscapes")
    _write(engine, "car", "a red bicycle")
    hits = search_facts(engine=engine, namespace="ns", text="what does she paint?")
    assert [h.fact.value for h in hits] == ["painting landscapes"]
    assert [h.fact.key for h in search_facts(engine=engine, namespace="ns", text="hobbies")] == [
        "favourite_hobby"
    ]


def test_expired_facts_are_hidden(engine):
    _write(engine, "oncall", "alice", valid_until=utcnow() - timedelta(hours=1))
    _write(engine, "office", "berlin")
    assert search_facts(engine=engine, namespace="ns", text="oncall alice") == []
    assert [h.fact.value for h in search_facts(engine=engine, namespace="ns", text="office")] == [
        "berlin"
    ]


def test_forget_takes_a_fact_out_and_keeps_history(engine):
    f = _write(engine, "pet", "a cat named Tom")
    gone = forget_fact(engine=engine, namespace="ns", fact_id=f.card_id, actor="t")
    assert gone.status == "forgotten"
    assert search_facts(engine=engine, namespace="ns", text="cat") == []
    assert [v.reason for v in _history(engine, f.card_id)][-1] == "forgotten on request"
    with pytest.raises(NotFound):
        forget_fact(engine=engine, namespace="elsewhere", fact_id=f.card_id, actor="t")


def test_bad_facts_are_refused(engine):
    with pytest.raises(InvalidInput, match="credential"):
        _write(engine, "token", "api_key=sk-abcdefghijklmnopqrstuvwx")
    with pytest.raises(ValueError):
        FactIn(key="  ", value="x")
    with pytest.raises(InvalidInput, match="empty"):
        search_facts(engine=engine, namespace="ns", text="  ")


def test_vector_side_finds_a_fact_without_shared_words(engine, settings):
    from memory_core.embed.onnx import OnnxMiniLM
    from memory_core.embed.store import ensure_embeddings
    from memory_core.index.factory import open_index
    from memory_core.index.similar import IndexedSimilarity
    from memory_core.index.sync import rebuild_index

    _write(engine, "db", "we use PostgreSQL", "Which database do we use?")
    _write(engine, "editor", "vim", "Which editor does the user prefer?")
    embedder = OnnxMiniLM()
    assert ensure_embeddings(engine=engine, embedder=embedder) == 2
    index = open_index(settings, dim=embedder.dim)
    try:
        rebuild_index(engine=engine, index=index, model=embedder.model)
        vectors = IndexedSimilarity(index=index, embedder=embedder)
        text = "what is our data store"
        assert search_facts(engine=engine, namespace="ns", text="data store") == []
        hits = search_facts(engine=engine, namespace="ns", text=text, vectors=vectors)
        assert hits[0].fact.key == "db" and hits[0].vector_rank == 0
        assert hits[0].keyword_rank is None
    finally:
        index.close()
