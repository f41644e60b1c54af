"""API keys: created once (the secret is shown once), stored as a sha256 hash, one namespace.

Keys are 32 random bytes, so a plain sha256 is enough (no password stretching needed): the
hash of a guess is as hard to hit as the key itself.

Layer: service.
"""

from __future__ import annotations

import hashlib
import logging
import secrets
import threading
import time
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from sqlalchemy import insert, select, update
from sqlalchemy.engine import Engine
from sqlalchemy.exc import SQLAlchemyError
from sqlmodel import col

from memory_core.db import read_session, session_scope
from memory_core.errors import Forbidden, InvalidInput, NotFound, Unauthorized
from memory_core.models.api_key import ApiKey
from memory_core.models.card_change import CardChange, keys_changed
from memory_core.models.columns import utcnow

log = logging.getLogger(__name__)
SCOPES = ("read", "write", "admin")
KEY_PREFIX = "hs_"
MAX_NAMESPACE = 128
USE_EVERY_S = 60.0  # last use is recorded at most this often per key


@dataclass(frozen=True)
class Principal:
    """Who is calling: the key's id, its namespace and scopes (admin implies read and write)."""

    key_id: uuid.UUID
    namespace: str
    scopes: frozenset[str]

    def allows(self, scope: str) -> bool:
        """True when the key carries the scope (or admin)."""
        return scope in self.scopes or "admin" in self.scopes

    def require(self, scope: str) -> None:
        """Raise Forbidden unless the key carries the scope."""
        if not self.allows(scope):
            raise Forbidden(
                f"this key has scope(s) {', '.join(sorted(self.scopes))}; {scope!r} is needed"
            )

    @property
    def actor(self) -> str:
        """How the key appears in card history."""
        return f"key:{self.key_id}"


def hash_key(secret: str) -> str:
    """The stored form of a key."""
    return hashlib.sha256(secret.encode()).hexdigest()


def parse_scopes(scopes: Iterable[str]) -> list[str]:
    """Validated, de-duplicated scopes."""
    out = sorted({s.strip().lower() for s in scopes if s.strip()})
    bad = [s for s in out if s not in SCOPES]
    if bad or not out:
        raise InvalidInput(f"scopes must be some of {', '.join(SCOPES)}, not {bad}", field="scopes")
    return out


def create_key(
    *, engine: Engine, namespace: str, scopes: Iterable[str], name: str = ""
) -> tuple[ApiKey, str]:
    """A new key; the secret is returned once and never stored."""
    if not namespace.strip() or len(namespace) > MAX_NAMESPACE or not namespace.isprintable():
        raise InvalidInput(
            "a namespace of 1..128 printable characters is needed", field="namespace"
        )
    secret = KEY_PREFIX + secrets.token_urlsafe(32)
    key = ApiKey(
        namespace=namespace,
        scopes=parse_scopes(scopes),
        key_hash=hash_key(secret),
        prefix=secret[:10],
        name=name[:128],
    )
    with session_scope(engine) as session:
        session.add(key)
    return key, secret


def list_keys(*, engine: Engine, namespace: str | None = None) -> list[ApiKey]:
    """Keys (hashes only), newest first."""
    q = select(ApiKey).order_by(col(ApiKey.created_at).desc())
    if namespace is not None:
        q = q.where(col(ApiKey.namespace) == namespace)
    with read_session(engine) as session:
        return list(session.execute(q).scalars())


def revoke_key(*, engine: Engine, key_id: uuid.UUID, namespace: str | None = None) -> ApiKey:
    """Revoke a key (kept for audit); servers stop accepting it within their change feed's
    refresh interval (they read the feed's row this writes). With a namespace, a key of another
    namespace is not found (an admin key sees its own)."""
    with session_scope(engine) as session:
        key = session.get(ApiKey, key_id)
        if key is None or (namespace is not None and key.namespace != namespace):
            where = f" in namespace {namespace!r}" if namespace is not None else ""
            raise NotFound(f"no key {key_id}{where}")
        if key.revoked_at is None:
            key.revoked_at = utcnow()
            session.add(key)
            session.execute(insert(CardChange).values(**keys_changed()))
        return key


def record_last_use(*, engine: Engine, used: Mapping[uuid.UUID, datetime]) -> None:
    """Write when each key was last used (one small transaction for all of them)."""
    with session_scope(engine) as session:
        for key_id, at in used.items():
            session.execute(update(ApiKey).where(col(ApiKey.id) == key_id).values(last_used_at=at))


def keyed_namespaces(engine: Engine) -> list[str]:
    """The namespaces some unrevoked key reads, by name."""
    with read_session(engine) as session:
        return list(
            session.execute(
                select(col(ApiKey.namespace))
                .where(col(ApiKey.revoked_at).is_(None))
                .distinct()
                .order_by(ApiKey.namespace)
            ).scalars()
        )


class KeyFeed(Protocol):
    """Where a server hears of revoked and deleted keys: the change feed it reads for cards
    (serve/snapshot_catchup.py), whose reads call KeyRing.forget when keys changed."""

    def feed_age(self) -> float: ...

    def read_feed(self, *, older_than_s: float) -> None: ...


class KeyRing:
    """Checks presented keys against the database, remembering answers for cache_s seconds;
    a cached answer is used only while the change feed was read within trust_s (a revocation
    anywhere writes a row there, and its read drops every cached answer)."""

    def __init__(
        self,
        *,
        engine: Engine,
        cache_s: float = 30.0,
        feed: KeyFeed | None = None,
        trust_s: float = 1.0,
    ) -> None:
        self._engine = engine
        self._cache_s = cache_s
        self._feed = feed
        self._trust_s = trust_s
        self._cache: dict[str, tuple[Principal | None, float]] = {}
        self._used: dict[uuid.UUID, datetime] = {}  # last uses not yet written
        self._lock = threading.Lock()
        self.epoch = 0  # counts forgets: an answer read before one is not kept after it

    def verify(self, secret: str | None) -> Principal:
        """The principal of a key; Unauthorized when it is missing, unknown or revoked."""
        if not secret:
            raise Unauthorized("an API key is needed: Authorization: Bearer <key>")
        epoch = self.current()
        digest = hash_key(secret)
        now = time.monotonic()
        hit = self._cache.get(digest)
        if hit is not None and hit[1] > now:
            principal = hit[0]
        else:
            with read_session(self._engine) as session:
                key = session.execute(
                    select(ApiKey).where(col(ApiKey.key_hash) == digest)
                ).scalar_one_or_none()
            principal = (
                Principal(key.id, key.namespace, frozenset(key.scopes))
                if key is not None and key.revoked_at is None
                else None
            )
            if key is not None and principal is not None:
                self.note(key)
            with self._lock:
                if len(self._cache) > 10_000:  # random wrong keys must not grow it forever
                    self._cache.clear()
                if self.epoch == epoch:  # else a revocation may have come after the read
                    self._cache[digest] = (principal, now + self._cache_s)
        if principal is None:
            raise Unauthorized("unknown or revoked API key")
        return principal

    def current(self) -> int:
        """Read the change feed when it was last read more than trust_s ago (a key revoked
        since drops the cached answers); the epoch answers read from now on are kept under."""
        if self._due():
            assert self._feed is not None
            try:
                self._feed.read_feed(older_than_s=self._trust_s)
            except SQLAlchemyError as exc:  # the database is down: nothing can be revoked
                log.warning("reading the change feed for revoked keys failed: %s", exc)
        return self.epoch

    def _due(self) -> bool:
        return self._feed is not None and self._feed.feed_age() >= self._trust_s

    def note(self, key: ApiKey, now: datetime | None = None) -> None:
        """Queue a key's use for write_uses, at most once a minute per key: a check never
        writes (it must not wait behind a writer), the use writer's thread does."""
        now = now or utcnow()
        if key.last_used_at is not None and (now - key.last_used_at).total_seconds() < USE_EVERY_S:
            return
        with self._lock:
            self._used[key.id] = now

    def write_uses(self) -> None:
        """Write the queued last uses (kept for the next call when the database refuses)."""
        with self._lock:
            used, self._used = self._used, {}
        if not used:
            return
        try:
            record_last_use(engine=self._engine, used=used)
        except SQLAlchemyError:
            with self._lock:
                self._used = {**used, **self._used}
            raise

    def cached(self, secret: str | None) -> bool:
        """True when verifying this key needs no database read (a fresh cached answer)."""
        if not secret:
            return True
        hit = self._cache.get(hash_key(secret))
        return hit is not None and hit[1] > time.monotonic() and not self._due()

    def known(self, secret: str) -> Principal | None:
        """The principal a fresh cached answer gives this key (one hash, no database read);
        None when verifying it would read the database or refuse it."""
        hit = self._cache.get(hash_key(secret))
        fresh = hit is not None and hit[1] > time.monotonic() and not self._due()
        return hit[0] if hit is not None and fresh else None

    def forget(self) -> None:
        """Drop cached answers (after a revoke or a namespace's deletion, here or heard of
        from the change feed)."""
        with self._lock:
            self._cache.clear()
            self.epoch += 1
