"""The facade's API keys (per user, stored hashed) for the HTTP API; the rules are in :mod:`narrative.write.keys`."""

from __future__ import annotations

from typing import Any

from narrative.checks import require_user
from narrative.engine.core import Runtime
from narrative.write import keys
from narrative.write.keys import KEY_PREFIX

__all__ = ["KEY_PREFIX", "Keys"]


class Keys:
    """API keys for the HTTP server: create, list, revoke, look up."""

    def __init__(self, runtime: Runtime) -> None:
        self.rt = runtime

    def create_api_key(self, *, label: str = "", user: str | None = None) -> str:
        """Mint a key for ``user``; the plaintext is returned now and cannot be recovered later."""
        return keys.mint_key(self.rt.store, self.rt.user_id(user), label, self.rt.clock())

    def list_api_keys(self, *, user: str | None = None) -> list[dict[str, Any]]:
        """``user``'s keys (never the keys themselves): id, label, created_at, and a fingerprint (the
        first 12 hex digits of the stored digest) to tell them apart."""
        return self.rt.store.list_keys(require_user(self.rt.settings.user if user is None else user))

    def revoke_api_key(self, key_id: int, *, user: str | None = None) -> dict[str, Any]:
        """Revoke one of ``user``'s keys; its next request is refused.  Another user's key id is not found."""
        user_id = require_user(self.rt.settings.user if user is None else user)
        keys.revoke_key(self.rt.store, user_id, key_id)
        return {"user": user_id, "revoked": key_id}

    def user_for_api_key(self, key: str) -> str | None:
        """Whose key this is, or None for an unknown, revoked or malformed key."""
        return keys.key_owner(self.rt.store, key)
