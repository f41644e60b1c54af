"""The one keyword matcher: words, stopwords and Snowball stems for every text search.

Retrieval's text similarity (serve), fact search (facts) and message recall (recall) all
tokenize here, so a query word matches the same card, fact or turn wherever it is asked:
lower case, words of two or more letters or digits (an underscore splits, so `push image`
finds `push_image`), English stopwords dropped, Snowball English stems ("painted",
"painting", "paints" -> "paint").
"""

from __future__ import annotations

import re
import threading
from collections.abc import Sequence
from functools import lru_cache
from typing import TYPE_CHECKING

import Stemmer

if TYPE_CHECKING:
    import bm25s
    import numpy as np

# bm25s's English list (bm25s.stopwords.STOPWORDS_EN, 33 words; a test keeps them equal),
# written out so that splitting words, all serving needs, imports neither bm25s nor the numpy
# and scipy it pulls in (~45 MB of each API worker's RSS). Adding retrieval's old extras
# (from, when, has, have) moved LoCoMo recall@1 from 0.293 to 0.287 (recall@10 0.707 ->
# 0.708): not worth it
STOPWORDS = frozenset(
    (  # noqa: SIM905
        "a an and are as at be but by for if in into is it no not of on or such that the their "
        "then there these they this to was will with"
    ).split()
)
_WORD = re.compile(r"[^\W_]{2,}")  # bm25s's \w\w+ without the underscore
_stemmer_per_thread = threading.local()  # a Stemmer instance is not thread-safe


def stem_words(words: list[str]) -> list[str]:
    """The Snowball English stems of the words ("painted", "painting", "paints" -> "paint")."""
    stemmer = getattr(_stemmer_per_thread, "stemmer", None)
    if stemmer is None:
        stemmer = _stemmer_per_thread.stemmer = Stemmer.Stemmer("english")
    stems: list[str] = stemmer.stemWords(words)
    return stems


def terms(text: str) -> list[str]:
    """The stemmed content words of a text, in order (repeats kept: BM25 counts them)."""
    return stem_words([w for w in _WORD.findall(text.lower()) if w not in STOPWORDS])


@lru_cache(maxsize=65_536)
def term_set(text: str) -> frozenset[str]:
    """The distinct terms of a text (cached: served cards' texts are matched again and again)."""
    return frozenset(terms(text))


@lru_cache(maxsize=8_192)
def term_tuple(text: str) -> tuple[str, ...]:
    """The distinct terms of a text as a tuple: what a served card keeps of its text. A tenth
    of a frozenset's memory (216 against 2,264 bytes for 22 terms) and never tracked by the
    cycle collector, for ~0.4 us more per intersection; cards of equal texts share one."""
    return tuple(dict.fromkeys(terms(text)))


def overlap(query_terms: frozenset[str], text: str) -> float:
    """Share of the query's terms the text contains (0..1)."""
    if not query_terms:
        return 0.0
    return len(query_terms & term_set(text)) / len(query_terms)


class KeywordIndex:
    """BM25 over a fixed list of texts, queried with free text."""

    def __init__(self, *, texts: Sequence[str]) -> None:
        corpus = [terms(t) for t in texts]
        # bm25s cannot index a corpus without a single term (it takes max() of an empty
        # vocabulary): texts like "0" or "?" only, which then match nothing
        self.bm25: bm25s.BM25 | None = None
        if any(corpus):
            import bm25s  # with numpy and scipy: only a process that ranks by BM25 pays them

            self.bm25 = bm25s.BM25()
            self.bm25.index(corpus, show_progress=False)

    def scores(self, *, text: str) -> np.ndarray | None:
        """A BM25 score per text, or None when no query term is in the vocabulary."""
        if self.bm25 is None:
            return None
        vocab = self.bm25.vocab_dict
        words = [w for w in terms(text) if w in vocab]
        if not words:
            return None
        import numpy as np

        return np.asarray(self.bm25.get_scores(words))

    def ranked(self, *, text: str, limit: int) -> list[tuple[int, float]]:
        """The texts matching the query, best first: (index, BM25 score), at most limit."""
        scores = self.scores(text=text)
        if scores is None:
            return []
        import numpy as np

        order = np.argsort(-scores, kind="stable")[:limit]
        return [(int(i), float(scores[i])) for i in order if scores[i] > 0]
