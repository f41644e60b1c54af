"""The one keyword matcher: the same terms for retrieval's text blend, facts and recall."""

from __future__ import annotations

from memory_core.keywords import KeywordIndex, overlap, stem_words, term_set, terms


def test_stem_words() -> None:
    assert set(stem_words(["painted", "painting", "paints"])) == {"paint"}
    assert stem_words(["running", "class"]) == ["run", "class"]


def test_terms_are_stemmed_content_words_split_at_underscores() -> None:
    assert terms("When did Caroline paint the push_image? It's Caroline's 2023 paintings") == [
        "when",
        "did",
        "carolin",
        "paint",
        "push",
        "imag",
        "carolin",
        "2023",
        "paint",
    ]
    assert terms("the and into a I") == []


def test_overlap_is_the_share_of_query_terms_a_text_holds() -> None:
    assert overlap(term_set("pushing images"), "push_image failed: registry timeout") == 1.0
    assert overlap(term_set("pushed registries deploy"), "push_image to the registry") == 2 / 3
    assert overlap(frozenset(), "anything") == 0.0


def test_keyword_index_ranks_by_bm25_on_the_same_terms() -> None:
    index = KeywordIndex(texts=["we painted the fence", "a red car", "painting and paints"])
    ranked = index.ranked(text="Paint", limit=10)
    assert [i for i, _ in ranked] == [2, 0]  # two occurrences beat one
    assert all(score > 0 for _, score in ranked)
    assert index.scores(text="bicycle") is None
    assert index.ranked(text="the", limit=10) == []


def test_the_stopwords_are_bm25s_english_list() -> None:
    from bm25s.stopwords import STOPWORDS_EN

    from memory_core.keywords import STOPWORDS

    assert frozenset(STOPWORDS_EN) == STOPWORDS
