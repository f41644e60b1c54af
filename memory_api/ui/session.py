"""Console sign-in: an API key becomes a signed, expiring session cookie; CSRF tokens per session.

The cookie holds the key's id, an expiry and a random nonce, signed with HMAC keyed by the
key's stored hash: every server process can check it (no shared session store), revoking the
key ends its sessions, and the key's secret never sits in the browser.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import threading
import time
import uuid
from dataclasses import dataclass

from memory_core.db import read_session
from memory_core.models.api_key import ApiKey
from memory_core.serve.keys import Principal, hash_key
from memory_core.serve.service import MemoryService

COOKIE = "hs_console"
SESSION_S = 8 * 3600  # a working day; sign in again after it


@dataclass(frozen=True)
class NamedPrincipal(Principal):
    """A principal that signs history with the key's name, so a reviewer's decision says who."""

    name: str = ""

    @property
    def actor(self) -> str:
        """The key's name and id, as card history shows them."""
        base = f"key:{self.key_id}"
        return f"{self.name[:80]} ({base})" if self.name else base


@dataclass(frozen=True)
class ConsoleUser:
    """The signed-in key and this session's CSRF token."""

    principal: NamedPrincipal
    csrf: str
    expires: int


def _mac(key_hash: str, message: str) -> str:
    return hmac.new(key_hash.encode(), message.encode(), hashlib.sha256).hexdigest()


class Sessions:
    """Makes and checks session cookies for one service's keys."""

    def __init__(self, service: MemoryService) -> None:
        self._service = service
        # key id -> (row, expiry, the key ring's epoch when read): a revocation heard of since
        # (here or from the change feed) makes the row read again
        self._cache: dict[uuid.UUID, tuple[ApiKey | None, float, int]] = {}
        self._lock = threading.Lock()

    def _key(self, key_id: uuid.UUID) -> ApiKey | None:
        """The key row, re-read after the key cache time or a revocation (so it ends sessions)."""
        now = time.monotonic()
        epoch = self._service.keys.current()
        hit = self._cache.get(key_id)
        if hit is not None and hit[1] > now and hit[2] == epoch:
            return hit[0]
        with read_session(self._service.engine) as session:
            key = session.get(ApiKey, key_id)
            if key is not None:
                session.expunge(key)
        if key is not None and key.revoked_at is None:  # a console page is a use of the key
            self._service.keys.note(key)
        with self._lock:
            if len(self._cache) > 10_000:
                self._cache.clear()
            self._cache[key_id] = (key, now + self._service.settings.serve.key_cache_s, epoch)
        return key

    def forget(self) -> None:
        """Drop cached key rows (after a revoke in this process: its sessions end at once)."""
        with self._lock:
            self._cache.clear()

    def sign_in(self, secret: str) -> str:
        """The cookie value for a valid key (Unauthorized from the key ring otherwise)."""
        principal = self._service.authenticate(secret.strip())
        expires = int(time.time()) + SESSION_S
        body = f"{principal.key_id}.{expires}.{secrets.token_urlsafe(16)}"
        return f"{body}.{_mac(hash_key(secret.strip()), body)}"

    def user(self, cookie: str | None) -> ConsoleUser | None:
        """The signed-in user of a cookie; None when it is missing, forged, expired or revoked."""
        if not cookie or cookie.count(".") != 3:
            return None
        body, mac = cookie.rsplit(".", 1)
        kid, exp, nonce = body.split(".")
        try:
            key_id, expires = uuid.UUID(kid), int(exp)
        except ValueError:
            return None
        key = self._key(key_id)
        if key is None or key.revoked_at is not None or expires < time.time():
            return None
        if not hmac.compare_digest(mac, _mac(key.key_hash, body)):
            return None
        principal = NamedPrincipal(key.id, key.namespace, frozenset(key.scopes), key.name)
        return ConsoleUser(principal, _mac(key.key_hash, f"csrf.{nonce}")[:32], expires)

    @staticmethod
    def csrf_ok(user: ConsoleUser, token: str | None) -> bool:
        """True when a form carries this session's token."""
        return bool(token) and hmac.compare_digest(user.csrf, token or "")
