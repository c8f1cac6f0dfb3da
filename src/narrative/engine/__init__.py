"""The engine: :class:`Memory`, the one object users hold (engine/facade.py), over plain services.

Read engine/facade.py first: it lists the services and what each owns; engine/core.py holds the runtime
they share.  Each service only orchestrates pipelines (``write/``, ``read/``) over the store and the
providers; none of them writes SQL, and none inherits from another.
"""

from __future__ import annotations

from narrative.engine.aio import AsyncMemory
from narrative.engine.facade import Memory
from narrative.engine.turns import Turn

__all__ = ["AsyncMemory", "Memory", "Turn"]
