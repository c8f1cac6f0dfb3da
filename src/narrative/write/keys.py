"""API keys for the HTTP API, per user, stored hashed.

A key is ``nk_`` followed by 32 random bytes (``secrets.token_urlsafe``), so it carries 256 bits of entropy.
Only its SHA-256 digest is stored: with keys that random, a fast digest is enough (nobody can search 2**256
inputs), and a slow password hash would only make every authenticated request slower.  The plaintext is
returned once, by :func:`mint_key`, and never again; keys are revoked one by one without touching the user's
memory, and a presented key is looked up by its digest (:func:`key_owner`).
"""

from __future__ import annotations

import hashlib
import secrets
from datetime import datetime

from narrative.errors import NotFound
from narrative.store.protocol import Store

__all__ = ["KEY_BYTES", "KEY_PREFIX", "MAX_KEY_LENGTH", "hash_key", "key_owner", "mint_key", "revoke_key"]

KEY_PREFIX = "nk_"
KEY_BYTES = 32
MAX_KEY_LENGTH = 200


def hash_key(key: str) -> str:
    """The stored form of a key: the hex SHA-256 digest of its UTF-8 text."""
    return hashlib.sha256(key.encode("utf-8")).hexdigest()


def mint_key(store: Store, user_id: str, label: str, now: datetime) -> str:
    """A new key for ``user_id`` (its digest stored, the label cut to 200 characters); the plaintext."""
    key = KEY_PREFIX + secrets.token_urlsafe(KEY_BYTES)
    store.insert_api_key(user_id, hash_key(key), label.strip()[:200], now)
    return key


def revoke_key(store: Store, user_id: str, key_id: int) -> None:
    """Revoke one of ``user_id``'s keys; another user's key id is not found."""
    if not store.revoke_key(user_id, key_id):
        raise NotFound(f"key {key_id} not found")


def key_owner(store: Store, key: str) -> str | None:
    """Whose key this is, or None for an unknown, revoked or malformed key."""
    if not isinstance(key, str) or not key.startswith(KEY_PREFIX) or len(key) > MAX_KEY_LENGTH:
        return None
    return store.user_for_key_hash(hash_key(key))
