"""Recall over what was said: every stored message is a searchable memory item.

The items are the message steps of the namespace's stored trajectories and conversations
(the trajectory table stays the source of truth; nothing new is stored). Each item is
rendered with its date and speaker, and searched at three scales fused by reciprocal rank:

* the turn alone: keyword (BM25 over memory_core.keywords' Snowball-stemmed terms) and
  vector (the configured embedder);
* the turn in its context: vector similarity smoothed over its neighbours, and keyword
  search over windows of one and two turns either side (an answer often lives in the reply
  to a question, or a name in the turn before);
* optionally the facts extracted from them, each pointing back at the turn it came from.

Neighbours are turns of the same trajectory less than SESSION_GAP apart (or in the same
dated session). Vectors are derived data, cached per text under the data directory.
"""

from memory_core.recall.index import ItemHit, RecallIndex
from memory_core.recall.items import MemoryItem, load_items
from memory_core.recall.search import fact_ranking, search_memory
from memory_core.recall.vectors import VectorCache, vector_cache_path

__all__ = [
    "ItemHit",
    "MemoryItem",
    "RecallIndex",
    "VectorCache",
    "fact_ranking",
    "load_items",
    "search_memory",
    "vector_cache_path",
]
