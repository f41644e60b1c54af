"""The holdout: which matching cards a query withholds, decided by a hash, not a generator.

A card is withheld when hash(seed, key, card) falls below the rate, so the same seed, query
key and card always give the same arm (tests and replays reproduce it), and the arms of
different cards in one query are independent. The key is the caller's run id when it sends
one, so a run that asks several times sees a card in one arm only (its outcome then speaks
for that arm alone); else the query's own id.
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Callable, Sequence
from typing import TypeVar

T = TypeVar("T")
_SCALE = 2**64


def withheld(*, seed: str, key: str, card_id: uuid.UUID, rate: float) -> bool:
    """True when this card is withheld from this query (never at rate 0)."""
    if rate <= 0.0:
        return False
    digest = hashlib.blake2b(f"{seed}\x1f{key}\x1f{card_id.hex}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") < rate * _SCALE


def split_arms(
    items: Sequence[T],
    *,
    card_id: Callable[[T], uuid.UUID],
    pinned: Callable[[T], bool],
    seed: str,
    key: str,
    rate: float,
) -> tuple[list[T], list[T]]:
    """(served, withheld), each in the given order; a pinned card is always served."""
    served: list[T] = []
    held: list[T] = []
    for item in items:
        out = (
            rate > 0.0
            and not pinned(item)
            and withheld(seed=seed, key=key, card_id=card_id(item), rate=rate)
        )
        (held if out else served).append(item)
    return served, held
