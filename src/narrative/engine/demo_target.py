"""Where ``narrative demo`` may write: a new file, or a database an earlier demo made; never anyone else's.

The demo marks what it makes (``store_meta`` key ``demo``).  Before it touches a database it reads, without
changing anything (no migration, no write), what is there (:func:`narrative.store.opening.database_kind`):

* nothing yet: the demo creates it and marks it;
* a marked demo SQLite file: ``fresh`` deletes it (with its -wal and -shm files) and makes it again, else the
  sample is loaded into it once more;
* a PostgreSQL database: the demo never drops or deletes anything there; it loads into a schema without
  narrative data or into one it marked before (refusing when the user already holds the sample and
  ``fresh`` asks to replace it);
* anything else (a narrative database with someone's data, a file of another program): refused with a
  ValidationError naming the file and what to do instead.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from narrative.engine.facade import Memory
from narrative.errors import ValidationError
from narrative.store.opening import DEMO_KEY, database_kind, is_postgres_url
from narrative.store.opening import safe_name as shown

__all__ = ["DEFAULT_DEMO_DB", "open_demo", "shown"]

DEFAULT_DEMO_DB = "narrative-demo.db"


def open_demo(db: str, *, user: str, fresh: bool, named_by: str = "--db", **options: Any) -> Memory:
    """A :class:`Memory` on ``db`` ready for the sample (marked as a demo), or a ValidationError saying why not.

    ``named_by`` says where the path came from (``--db`` or ``NARRATIVE_DB``), for the refusal's advice.
    """
    kind = database_kind(db)
    if kind in ("data", "foreign"):
        raise ValidationError(_refusal(db, kind, named_by), field="db")
    if is_postgres_url(db):
        memory = Memory(db, user=user, **options)
        if fresh and memory.users().get(user):
            memory.close()
            raise ValidationError(
                f"user {user!r} already holds the sample in {shown(db)}, and on PostgreSQL the demo never deletes"
                f" anything: delete it first (`narrative --db URL delete user {user}`), choose another --user, or"
                " add --keep to load it again",
                field="db",
            )
    else:
        if kind == "demo" and fresh:
            for suffix in ("", "-wal", "-shm"):
                Path(f"{db}{suffix}").unlink(missing_ok=True)
        memory = Memory(db, user=user, **options)
    if memory.store.get_meta(DEMO_KEY) is None:
        memory.store.set_meta(DEMO_KEY, datetime.now(UTC).isoformat(timespec="seconds"))
    return memory


def _refusal(db: str, kind: str, named_by: str) -> str:
    what = (
        "a narrative database that `narrative demo` did not make (it may hold someone's memories)"
        if kind == "data"
        else "a file that is not a narrative demo database"
    )
    where = (
        f" (NARRATIVE_DB names it: the demo needs a file of its own; `--db {DEFAULT_DEMO_DB}` overrides it)"
        if named_by == "NARRATIVE_DB"
        else ""
    )
    return (
        f"{shown(db)} is {what}{where}: the demo never deletes or loads into it. "
        f"Run it on a new file instead, e.g. `narrative --db {DEFAULT_DEMO_DB} demo`, or move the file away first"
    )
