"""The engine: :class:`Memory`, the one object users hold.

It is assembled from small parts, one per path of ARCHITECTURE.md; each part
only orchestrates pipelines (``write/``, ``read/``) over the store and the
providers, and none of them writes SQL.
"""

from __future__ import annotations

from narrative.engine.closing import ClosingAPI
from narrative.engine.context import ContextAPI
from narrative.engine.conversations import ConversationsAPI
from narrative.engine.keys import KeysAPI
from narrative.engine.maintenance import MaintenanceAPI
from narrative.engine.memories import MemoriesAPI
from narrative.engine.searching import SearchAPI
from narrative.engine.sovereignty import SovereigntyAPI
from narrative.engine.storylines import StorylinesAPI
from narrative.engine.turns import Turn, TurnsAPI
from narrative.validate import validated

__all__ = ["Memory", "Turn"]


@validated  # every public call's arguments are checked first (narrative.validate)
class Memory(
    ClosingAPI,
    ContextAPI,
    SovereigntyAPI,
    KeysAPI,
    MaintenanceAPI,
    TurnsAPI,
    StorylinesAPI,
    ConversationsAPI,
    MemoriesAPI,
    SearchAPI,
):
    """A user's narrative memory in one SQLite file (or any :class:`~narrative.store.protocol.Store`).

    >>> mem = Memory("notes.db", user="alice")          # doctest: +SKIP
    >>> mem.add_message("We decided to ship on Friday because QA signed off.")  # doctest: +SKIP
    """
