"""Restoring a JSON export into an empty user (``import_data``), under fresh ids, all or nothing.

The rows are checked and written by the store (``import_user_rows``: every row checked as the write path
checks input, pointing only at rows of the same export).  Decided here: the user must be empty (a default
storyline renamed, described otherwise or archived is the person's, as a storyline with messages is); which
vectors are kept (those this memory can search with); the history an export made before there was one gets
(what the migration gives a file's memories); and what is embedded again — memories without a
usable vector, ``REEMBED_CHUNK`` per model call, and the storylines whose routing embedding was dropped
(one recipe: :func:`narrative.write.embedding.routing_vectors`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from narrative.errors import InvalidTransition
from narrative.model import Storyline, StorylineKind, StorylineStatus
from narrative.store.protocol import Store
from narrative.write import history
from narrative.write.embedding import Embed, remade_vectors, routing_vectors
from narrative.write.passages import backfill_passages, embed_passages
from narrative.write.routing import DEFAULT_STORYLINES

__all__ = ["REEMBED_CHUNK", "Tables", "restore_user"]

REEMBED_CHUNK = 256  # memories per model call when an import re-embeds (a progress step each)

Tables = dict[str, list[dict[str, Any]]]


def restore_user(
    store: Store,
    user_id: str,
    tables: Tables,
    export_models: Iterable[str],
    embed: Embed | None,
    identity: str | None,
    progress: Callable[[int, int], None] | None = None,
) -> tuple[dict[str, int], dict[str, int]]:
    """Import the export's ``tables`` as ``user_id``'s rows; returns (rows per table, re-embedded counts).

    ``export_models``: the vector identities the export holds; ``embed``/``identity``: the current embedder
    (None: keyword-only).
    """
    _refuse_unless_empty(store, user_id)
    if "memory_events" not in tables and tables.get("memories"):  # made before there was a history
        tables = {**tables, "memory_events": history.events_for_old_export(tables["memories"])}
    kept, dropped = _vectors_to_keep(
        store, {name: list(rows) for name, rows in tables.items()}, identity, set(export_models)
    )
    old_storylines = sorted(r["id"] for r in tables.get("storylines", []))
    with store.transaction():
        counts = store.import_user_rows(user_id, kept)
        reembedded = _reembed(store, user_id, old_storylines, dropped, embed, identity, progress)
    store.drop_index()
    return counts, reembedded


def _refuse_unless_empty(store: Store, user_id: str) -> None:
    existing = dict(store.user_content(user_id))
    changed = len(_changed_starters(store, user_id))
    if changed:  # the store counts a default storyline only once it holds something; a rename is the person's too
        existing["storylines"] = existing.get("storylines", 0) + changed
    if existing:
        held = ", ".join(f"{n} {table}" for table, n in sorted(existing.items()))
        raise InvalidTransition(
            f"user {user_id!r} already has data ({held}): import only restores into an empty user;"
            " delete the user first or import under another user"
        )


def _changed_starters(store: Store, user_id: str) -> list[Storyline]:
    """The empty default storylines the person renamed, described otherwise or archived: the import would put
    the starters back in their place ("Chit-chat" would silently be "Small talk" again)."""
    starters = {name: description for name, (description, _pattern) in DEFAULT_STORYLINES.items()}
    return [
        s
        for s in store.list_storylines(user_id, include_archived=True)
        if s.kind is StorylineKind.DEFAULT
        and not s.interaction_count
        and not s.summary
        and (starters.get(s.name) != s.description or s.status is StorylineStatus.ARCHIVED)
    ]


def _vectors_to_keep(
    store: Store, tables: Tables, identity: str | None, export_models: set[str]
) -> tuple[Tables, set[int]]:
    """Keep the vectors this memory can search with; return the storylines whose vectors must be made again.

    With an embedder: only its own identity's vectors.  Without one (keyword-only): only vectors of the one
    model the file already holds (or, in a file without vectors, of the export's one model), so an import
    never leaves the file with vectors of several embedders.
    """
    if identity is not None:
        keep = {identity}
    else:
        held = set(store.vector_models())
        keep = held if len(held) == 1 else export_models if not held and len(export_models) == 1 else set()
    dropped: dict[str, set[int]] = {}
    for table, key in (
        ("memory_vectors", "memory_id"),
        ("storyline_vectors", "storyline_id"),
        ("passage_vectors", "passage_id"),
    ):
        rows = tables.get(table, [])
        dropped[table] = {r[key] for r in rows if r.get("model") not in keep and isinstance(r.get(key), int)}
        tables[table] = [r for r in rows if r.get("model") in keep]
    return tables, dropped["storyline_vectors"]


def _reembed(
    store: Store,
    user_id: str,
    old_storylines: list[int],
    dropped_storylines: set[int],
    embed: Embed | None,
    identity: str | None,
    progress: Callable[[int, int], None] | None,
) -> dict[str, int]:
    """Embed what came without a usable vector: memories without one, and the storylines whose vector was
    dropped (fresh ids follow the export's id order, so old and new ids pair up sorted)."""
    backfill_passages(store, user_id, None, None)  # an export made before passages: its messages get them
    if embed is None or identity is None:
        return {"memories": 0, "storylines": 0, "passages": 0}
    memories = store.memories_without_vectors(user_id, model=identity)
    for start in range(0, len(memories), REEMBED_CHUNK):
        chunk = memories[start : start + REEMBED_CHUNK]
        if chunk:
            remade_vectors(store, user_id, identity, embed, chunk)
        if progress is not None:
            progress(min(len(memories), start + REEMBED_CHUNK), len(memories))
    new = sorted(s.id for s in store.list_storylines(user_id, include_archived=True))
    renamed = dict(zip(old_storylines, new, strict=False))
    storylines = [store.get_storyline(user_id, renamed[i]) for i in sorted(dropped_storylines) if i in renamed]
    for sid, vector in routing_vectors(store, embed, storylines).items():
        store.put_storyline_vector(user_id, sid, identity, vector)
    passages = embed_passages(store, user_id, identity, embed, store.passages_without_vectors(user_id, identity))
    return {"memories": len(memories), "storylines": len(storylines), "passages": passages}
