"""narrative: an offline-first narrative memory engine for LLM agents.

Hold one :class:`Memory` (or, from asyncio, one :class:`AsyncMemory`); everything else is reached through it.
:class:`Turn` is one message for ``Memory.remember_many``.  The model
types are here for type hints; the memory dataclass itself is
``narrative.model.MemoryItem`` (the facade owns the short name).
"""

from narrative.config import Settings
from narrative.engine import AsyncMemory, Memory, Turn
from narrative.errors import (
    ConversationAlreadyActive,
    EmbeddingMismatch,
    InvalidTransition,
    NarrativeError,
    NotFound,
    ProviderError,
    SealedNarrative,
    StoreError,
    ValidationError,
)
from narrative.model import (
    Conversation,
    ConversationStatus,
    Entity,
    EntityType,
    Message,
    Narrative,
    Role,
    Source,
    StateDelta,
    Storyline,
    Stream,
    Use,
)

__version__ = "0.1.0"

__all__ = [
    "AsyncMemory",
    "Conversation",
    "ConversationAlreadyActive",
    "ConversationStatus",
    "EmbeddingMismatch",
    "Entity",
    "EntityType",
    "InvalidTransition",
    "Memory",
    "Message",
    "Narrative",
    "NarrativeError",
    "NotFound",
    "ProviderError",
    "Role",
    "SealedNarrative",
    "Settings",
    "Source",
    "StateDelta",
    "StoreError",
    "Storyline",
    "Stream",
    "Turn",
    "Use",
    "ValidationError",
    "__version__",
]
