"""The runtime every service shares: settings, the store, the clock, the providers (built lazily) and the caches.

One :class:`Runtime` is built per :class:`~narrative.Memory`; each service receives it (and the peer services
it needs) as constructor arguments.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from narrative.checks import require_user
from narrative.config import Settings, default_db
from narrative.errors import NotFound
from narrative.store.protocol import Store
from narrative.write import embedding, storylines

if TYPE_CHECKING:
    from narrative.providers.embed import Embedder
    from narrative.providers.llm import LLM
    from narrative.providers.tokens import TokenCounter
    from narrative.write.embedding import MessageVectors, TextVectors
    from narrative.write.extract import Extractor
    from narrative.write.turn import TurnWriter

log = logging.getLogger("narrative")


def utc_now() -> datetime:
    return datetime.now(UTC)


class Runtime:
    """Settings, store, clock, providers and caches: what the services share.  Never subclassed."""

    def __init__(
        self,
        db: str | Path | None = None,
        *,
        user: str | None = None,
        settings: Settings | None = None,
        store: Store | None = None,
        embedder: Embedder | str | None = None,
        llm: LLM | str | None = None,
        clock: Callable[[], datetime] | None = None,
        env: Mapping[str, str] | None = None,
        **overrides: Any,
    ) -> None:
        if isinstance(embedder, str):  # a name: "minilm", "hashing" or "none"
            overrides["embedder"], embedder = embedder, None
        if isinstance(llm, str):  # a provider name: "none", "ollama" or "openai"
            overrides["llm_provider"], llm = llm, None
        if settings is None:
            settings = Settings.resolve(env, db=None if db is None else str(db), user=user, **overrides)
        elif db is not None or user is not None or overrides:
            settings = Settings.resolve({}, **{**settings.__dict__, **_given(db=db, user=user), **overrides})
        self.settings = settings
        if llm is None and settings.llm_provider.strip().lower() not in ("", "none"):
            from narrative.providers.llm import LLMSettings, provider_class

            provider_class(LLMSettings.from_settings(settings).provider)  # an unknown name fails here, not later
        if store is None:
            from narrative.store.opening import open_store

            if settings.db == default_db(env):  # the data directory's file: its folder is made on first use
                Path(settings.db).parent.mkdir(parents=True, exist_ok=True)
            store = open_store(settings.db, vector_precision=settings.vector_precision, held_rows=settings.held_rows)
        self.store: Store = store
        self._embedder = embedder
        self._writes_checked = False  # embedder_for_writes has checked the file's embedder
        self._llm = llm
        self.clock: Callable[[], datetime] = clock or utc_now
        self.known_users: set[str] = set()
        # caches, each owned by one service but kept here so that they live as long as the memory
        self.defaults: dict[str, dict[str, int]] = {}  # the default storylines' ids per user
        self.writer: TurnWriter | None = None  # the write path's turn writer (Turns)
        self.extractor: Extractor | None = None  # the heuristic extractor (Turns, Closing)
        self.message_vectors: MessageVectors | None = None  # compose mode: each conversation's last message
        self.close_vectors: TextVectors | None = None  # the texts closes compared, kept for the next close
        self.token_counter: TokenCounter | None = None  # what context budgets are measured with

    # --- providers (built lazily: nothing loads until first used) -------------------

    @property
    def embedder(self) -> Embedder | None:
        """The embedder, or None when settings say ``embedder="none"`` (keyword-only mode)."""
        if self._embedder is None and self.settings.embedder != "none":
            from narrative.providers.embed import HashingEmbedder, MiniLMEmbedder

            s = self.settings
            if s.embedder == "minilm":
                runtime = s.embed_runtime if s.embed_runtime != "auto" else self._auto_runtime()
                self._embedder = MiniLMEmbedder(runtime=runtime, cache_dir=s.cache_dir or None)
            else:
                self._embedder = HashingEmbedder()
        return self._embedder

    def embedder_for_writes(self) -> Embedder | None:
        """The embedder, checked once before this memory first writes vectors: a file holds one embedder's
        vectors (``store_meta`` key ``embedder`` records which, set by the first write or by a reindex).  A write
        with another one was accepted and then every user's search failed with "vectors were made by several
        embedders"; it is refused here, before anything is stored."""
        embedder = self.embedder
        if embedder is None or self._writes_checked:
            return embedder
        embedding.refuse_foreign_embedder(self.store, embedder.identity)
        self._writes_checked = True
        return embedder

    def _auto_runtime(self) -> str:
        """fp32 (the original model's vectors), unless the file's vectors were made in int8: then int8."""
        from narrative.providers.embed import MiniLMEmbedder

        counts = self.store.vector_models()
        fp32 = counts.get(MiniLMEmbedder(runtime="onnx").identity, 0)
        int8 = counts.get(MiniLMEmbedder(runtime="onnx-int8").identity, 0)
        return "onnx-int8" if int8 > fp32 else "onnx"

    def llm_enabled(self) -> bool:
        """Whether an LLM helps (a provider is configured, or an LLM object was given)."""
        return self.settings.llm_provider != "none" or self._llm is not None

    @property
    def llm(self) -> LLM:
        if self._llm is None:
            from narrative.providers.llm import LLMSettings, build_llm

            self._llm = build_llm(LLMSettings.from_settings(self.settings))
        return self._llm

    # --- users ---------------------------------------------------------------------

    @property
    def user(self) -> str:
        return self.settings.user

    def user_id(self, user: str | None) -> str:
        """Resolve and validate the user of a write; first sight creates the user and Your Story.

        A user this memory has seen is looked up again (one indexed read): when another process deleted it
        meanwhile, what is cached about it is dropped and the user is made again, as on first sight, instead
        of every later call failing on the missing row until a restart.
        """
        user_id = require_user(self.settings.user if user is None else user)
        if user_id in self.known_users and not self._still_there(user_id):
            log.info("user %r was deleted by another connection: starting it afresh", user_id)
            self.forget_user(user_id, known=False)
        return self._made(user_id)

    def owner_id(self, user: str | None) -> str:
        """Resolve and validate the user of a write on something the user already holds (an id, the active or
        waiting conversation, their pending messages): as :meth:`user_id` for a user with a row (one indexed
        read), else nothing is made.  A user nobody wrote for holds nothing, so such a write finds nothing to
        change and fails as for another user's id (NotFound, InvalidTransition) or does nothing, and the file is
        left as it was: no user row, no Your Story, no default storyline."""
        user_id = require_user(self.settings.user if user is None else user)
        if not self._still_there(user_id):
            if user_id in self.known_users:  # another connection deleted it: drop what is cached about it
                self.forget_user(user_id, known=False)
            return user_id
        return self._made(user_id)

    def _made(self, user_id: str) -> str:
        if user_id not in self.known_users:
            self.bootstrap_user(user_id)
            self.known_users.add(user_id)
        return user_id

    def reader_id(self, user: str | None) -> str:
        """Resolve and validate the user of a read: nothing is created and nothing is looked up (a round trip on
        PostgreSQL).  A user nobody wrote for has no rows, so a read of theirs finds nothing: empty results, or
        NotFound for an id it names.  A write that adds (through :meth:`user_id`) makes the user; a write on what
        the user holds goes through :meth:`owner_id`, which makes nothing for a user without a row."""
        return require_user(self.settings.user if user is None else user)

    def holds(self, user_id: str) -> bool:
        """Whether the user has a row (one indexed read): a read that records what it used (a use) records only
        then, so a read for a user nobody wrote for stores nothing."""
        return self._still_there(user_id)

    def _still_there(self, user_id: str) -> bool:
        try:
            self.store.get_user(user_id)
        except NotFound:
            return False
        return True

    def bootstrap_user(self, user_id: str) -> None:
        storylines.ensure_user(self.store, user_id, self.clock())

    def your_story_id(self, user_id: str) -> int:
        return storylines.your_story(self.store, user_id, self.clock()).id

    def default_ids(self, user_id: str) -> dict[str, int]:
        """The ids of the user's default storylines (made on first need)."""
        if user_id not in self.defaults:
            self.defaults[user_id] = storylines.ensure_defaults(self.store, user_id, self.clock())
        return self.defaults[user_id]

    def forget_user(self, user_id: str, *, known: bool = True) -> None:
        """Drop what is cached about a user (after an import or a delete); ``known=False``: its bootstrap too."""
        self.defaults.pop(user_id, None)
        if not known:
            self.known_users.discard(user_id)
            self.message_vectors = None  # keyed by conversation id: a new user's ids may repeat the old ones

    def close(self) -> None:
        """Close the database connection."""
        self.store.close()


def _given(**values: Any) -> dict[str, Any]:
    return {k: (str(v) if isinstance(v, Path) else v) for k, v in values.items() if v is not None}
