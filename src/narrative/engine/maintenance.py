"""The facade's maintenance: embedder identity checks and re-embedding (``narrative reindex``)."""

from __future__ import annotations

from narrative.engine.core import EngineBase


class MaintenanceAPI(EngineBase):
    pass
