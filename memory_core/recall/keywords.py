"""Keyword search over texts: bm25s with English stopwords and the Snowball English stemmer."""

from __future__ import annotations

import threading
from collections.abc import Sequence

import bm25s
import numpy as np
import Stemmer

_stemmer_per_thread = threading.local()  # a Stemmer instance is not thread-safe


def stem_words(words: list[str]) -> list[str]:
    """The Snowball English stems of the words ("painted", "painting", "paints" -> "paint")."""
    stemmer = getattr(_stemmer_per_thread, "stemmer", None)
    if stemmer is None:
        stemmer = _stemmer_per_thread.stemmer = Stemmer.Stemmer("english")
    stems: list[str] = stemmer.stemWords(words)
    return stems


class KeywordIndex:
    """BM25 over a fixed list of texts, queried with free text."""

    def __init__(self, *, texts: Sequence[str]) -> None:
        self.tokens = bm25s.tokenize(
            list(texts), stopwords="en", stemmer=stem_words, show_progress=False
        )
        self.bm25 = bm25s.BM25()
        self.bm25.index(self.tokens, show_progress=False)

    def scores(self, *, text: str) -> np.ndarray | None:
        """A BM25 score per text, or None when no query word is in the vocabulary."""
        words = bm25s.tokenize(
            [text], stopwords="en", stemmer=stem_words, return_ids=False, show_progress=False
        )[0]
        words = [w for w in words if w in self.tokens.vocab]
        if not words:
            return None
        return np.asarray(self.bm25.get_scores(words))
