"""One error tree for everything ``narrative`` raises on purpose::

    NarrativeError
    ├── NotFound                    unknown id, or an id that belongs to another user
    ├── ValidationError             bad input: empty text, importance outside 1–5, …
    ├── InvalidTransition           a lifecycle step the current state does not allow
    │   ├── ConversationAlreadyActive   a second active conversation for one user
    │   └── SealedNarrative             an attempt to change an immutable narrative
    ├── ProviderError               an embedder, LLM or tokenizer failed
    └── StoreError                  the database refused or is inconsistent
        └── EmbeddingMismatch       stored vectors were made by another model: run reindex

Every public call that fails on bad input leaves the database unchanged.
"""

from __future__ import annotations


class NarrativeError(Exception):
    """Root of every error ``narrative`` raises on purpose."""


class NotFound(NarrativeError):
    """The id does not exist for this user (another user's ids are not found either)."""


class ValidationError(NarrativeError):
    """The input is malformed; ``field`` names the offending argument when known."""

    def __init__(self, message: str, field: str | None = None) -> None:
        super().__init__(message)
        self.field = field


class InvalidTransition(NarrativeError):
    """The object's current state does not allow the requested step."""


class ConversationAlreadyActive(InvalidTransition):
    """The user already has an active conversation (Talking Rock's singleton rule)."""


class SealedNarrative(InvalidTransition):
    """Sealed narratives are immutable."""


class ProviderError(NarrativeError):
    """An embedder, LLM or token counter failed."""


class StoreError(NarrativeError):
    """The database refused an operation or is in an unexpected state."""


class EmbeddingMismatch(StoreError):
    """Stored vectors carry another embedder identity; run ``narrative reindex``."""
