"""The facade's API keys (per user, stored hashed) for the HTTP API.

A key is ``nk_`` followed by 32 random bytes (``secrets.token_urlsafe``), so it
carries 256 bits of entropy.  Only its SHA-256 digest is stored: with keys that
random, a fast digest is enough (nobody can search 2**256 inputs), and a slow
password hash would only make every authenticated request slower.  The
plaintext is returned once, by :meth:`KeysAPI.create_api_key`, and never again; keys can be
listed (id, label, time, fingerprint) and revoked one by one without touching the user's memory.
"""

from __future__ import annotations

import hashlib
import secrets
from typing import Any

from narrative.checks import require_user
from narrative.engine.core import Runtime
from narrative.errors import NotFound

KEY_PREFIX = "nk_"
KEY_BYTES = 32
MAX_KEY_LENGTH = 200


def hash_key(key: str) -> str:
    """The stored form of a key: the hex SHA-256 digest of its UTF-8 text."""
    return hashlib.sha256(key.encode("utf-8")).hexdigest()


class Keys:
    """API keys for the HTTP server: create, list, revoke, look up."""

    def __init__(self, runtime: Runtime) -> None:
        self.rt = runtime

    def create_api_key(self, *, label: str = "", user: str | None = None) -> str:
        """Mint a key for ``user``; the plaintext is returned now and cannot be recovered later."""
        user_id = self.rt.user_id(user)
        key = KEY_PREFIX + secrets.token_urlsafe(KEY_BYTES)
        self.rt.store.insert_api_key(user_id, hash_key(key), label.strip()[:200], self.rt.clock())
        return key

    def list_api_keys(self, *, user: str | None = None) -> list[dict[str, Any]]:
        """``user``'s keys (never the keys themselves): id, label, created_at, and a fingerprint (the
        first 12 hex digits of the stored digest) to tell them apart."""
        return self.rt.store.list_keys(require_user(self.rt.settings.user if user is None else user))

    def revoke_api_key(self, key_id: int, *, user: str | None = None) -> dict[str, Any]:
        """Revoke one of ``user``'s keys; its next request is refused.  Another user's key id is not found."""
        user_id = require_user(self.rt.settings.user if user is None else user)
        if not self.rt.store.revoke_key(user_id, key_id):
            raise NotFound(f"key {key_id} not found")
        return {"user": user_id, "revoked": key_id}

    def user_for_api_key(self, key: str) -> str | None:
        """Whose key this is, or None for an unknown, revoked or malformed key."""
        if not isinstance(key, str) or not key.startswith(KEY_PREFIX) or len(key) > MAX_KEY_LENGTH:
            return None
        return self.rt.store.user_for_key_hash(hash_key(key))
