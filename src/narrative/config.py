"""Typed settings: explicit values > ``NARRATIVE_*`` environment variables > defaults.

Nothing here runs at import time; :meth:`Settings.resolve` reads the mapping it
is given (``os.environ`` by default) when a :class:`~narrative.Memory` is built.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from narrative.errors import ValidationError

ENV_PREFIX = "NARRATIVE_"


@dataclass(frozen=True)
class StreamWeights:
    """ITSERR per-stream weights: how much similarity vs recency counts."""

    semantic: float
    recency: float


def default_stream_weights() -> dict[str, StreamWeights]:
    return {
        "conversation": StreamWeights(0.5, 0.5),
        "research": StreamWeights(0.8, 0.2),
        "decision": StreamWeights(0.7, 0.3),
        "reflection": StreamWeights(0.7, 0.3),
        "narrative": StreamWeights(0.7, 0.3),
        "fact": StreamWeights(0.8, 0.2),
    }


@dataclass(frozen=True)
class Settings:
    """Everything a :class:`~narrative.Memory` needs, resolved once at construction."""

    db: str = ""  # "" = default_db(): $XDG_DATA_HOME/narrative/narrative.db or ~/.local/share/narrative/narrative.db
    user: str = "default"
    embedder: str = "minilm"  # minilm | hashing | none
    # how MiniLM runs: auto | onnx | onnx-int8 | torch.  auto = onnx (fp32, the original vectors), except on
    # a file whose vectors were made in int8 (identity all-MiniLM-L6-v2-int8:384), which keeps onnx-int8
    embed_runtime: str = "auto"
    cache_dir: str = ""  # built model files; "" = $XDG_CACHE_HOME/narrative or ~/.cache/narrative
    # how the SQLite store's in-process vector index holds vectors: float32 | float16 (half the memory; exact
    # scores of filtered searches good to ~1e-3).  See docs/scaling.md.
    vector_precision: str = "float32"
    # PostgreSQL: most memories and messages one process holds for its searches (keyword indexes, briefs); past
    # it, the least recently searched users are let go and read again on their next search.  0 = no bound
    held_rows: int = 1_000_000
    llm_provider: str = "none"  # none | ollama | openai
    llm_url: str = ""
    llm_model: str = ""
    llm_api_key: str = ""
    llm_timeout_s: float = 30.0
    llm_max_calls_per_turn: int = 4
    llm_max_tokens_per_turn: int = 4000
    # read path
    recency_half_life_days: float = 30.0
    rrf_k: int = 10  # small k sharpens the head of each list (measured on LoCoMo dev: see bench/)
    keyword_weight: float = 1.0  # a BM25 rank counts as much as a vector rank (docs/decisions.md, thirteenth session)
    vector_weight: float = 1.0
    # a match by meaning alone needs at least this cosine; -1 = the embedder's own calibrated floor (MiniLM 0.35)
    similarity_floor: float = -1.0
    summary_weight: float = 0.5  # a summary of many messages needs twice the match to outrank the words themselves
    stream_weights: dict[str, StreamWeights] = field(default_factory=default_stream_weights)
    record_uses: bool = True
    # write path
    exchange_turns: int = 2  # a conversation memory holds the turn and the one it answers (1 = the turn alone)
    exchange_vector: str = "embed"  # embed | compose: embed the exchange text, or compose its messages' vectors
    reflect_every: int = 10
    reflection_stream_threshold: int = 200
    routing_refresh_every: int = 5
    stale_after_days: int = 5
    idle_after_minutes: int = 30
    # storyline bindings, decisions and sources (issue 26)
    goal_stale_days: int = 7  # an ongoing goal untouched this long is a stale goal
    decision_audit_days: int = 30  # a decision is offered for review this long after it was made or last kept
    decision_revisit_days: int = 14  # ... a reversible one never revisited, already this long after it was made
    popularity_days: int = 30  # the default period of source popularity

    def __post_init__(self) -> None:
        if not self.db:  # no database named: the per-user data directory's file
            object.__setattr__(self, "db", default_db())

    @classmethod
    def resolve(cls, env: Mapping[str, str] | None = None, **explicit: Any) -> Settings:
        """Build settings from explicit values, then ``NARRATIVE_<FIELD>`` variables, then defaults."""
        env = os.environ if env is None else env
        known = {f.name: f for f in fields(cls)}
        unknown = set(explicit) - set(known)
        if unknown:
            raise ValidationError(f"unknown settings: {sorted(unknown)}", field=sorted(unknown)[0])
        values: dict[str, Any] = {}
        for name, spec in known.items():
            if name in explicit and explicit[name] is not None:
                values[name] = explicit[name]
                continue
            raw = env.get(ENV_PREFIX + name.upper())
            if raw is None or name == "stream_weights":
                continue
            values[name] = _coerce(name, raw, spec.type)
        if not values.get("db"):
            values["db"] = default_db(env)
        settings = cls(**values)
        settings.validate()
        return settings

    def validate(self) -> None:
        if not self.user.strip():
            raise ValidationError("user must not be empty", field="user")
        if self.embedder not in {"minilm", "hashing", "none"}:
            raise ValidationError(f"unknown embedder {self.embedder!r}", field="embedder")
        if self.embed_runtime not in {"auto", "onnx-int8", "onnx", "torch"}:
            raise ValidationError(
                f"unknown embed_runtime {self.embed_runtime!r}: auto, onnx-int8, onnx or torch", field="embed_runtime"
            )
        if self.vector_precision not in {"float32", "float16"}:
            raise ValidationError(
                f"unknown vector_precision {self.vector_precision!r}: float32 or float16", field="vector_precision"
            )
        if self.exchange_vector not in {"embed", "compose"}:
            raise ValidationError(f"unknown exchange_vector {self.exchange_vector!r}", field="exchange_vector")
        if self.held_rows < 0:
            raise ValidationError("held_rows must be 0 (no bound) or more", field="held_rows")
        if self.reflect_every < 1:
            raise ValidationError("reflect_every must be at least 1", field="reflect_every")

    def with_db(self, db: str | Path) -> Settings:
        return replace(self, db=str(db))


def default_db(env: Mapping[str, str] | None = None) -> str:
    """Where the memory lives when no ``--db``/``NARRATIVE_DB`` names it: one file in the user's data directory,
    ``$XDG_DATA_HOME/narrative/narrative.db``, else ``~/.local/share/narrative/narrative.db`` (``narrative path``
    prints it).  Created, with its folder, by the first write."""
    env = os.environ if env is None else env
    home = env.get("HOME") or os.path.expanduser("~")
    base = env.get("XDG_DATA_HOME") or os.path.join(home, ".local", "share")
    return os.path.join(base, "narrative", "narrative.db")


def _coerce(name: str, raw: str, kind: Any) -> Any:
    text = str(kind)
    try:
        if "float" in text:
            return float(raw)
        if "int" in text:
            return int(raw)
        if "bool" in text:
            lowered = raw.strip().lower()
            if lowered in {"1", "true", "yes", "on"}:
                return True
            if lowered in {"0", "false", "no", "off"}:
                return False
            raise ValueError(raw)
    except ValueError as error:
        raise ValidationError(f"{ENV_PREFIX}{name.upper()}={raw!r} is not a valid {text}", field=name) from error
    return raw
