"""Token counters: the offline estimate and the tokenizer.json counter."""

from __future__ import annotations

import random
import socket
import subprocess
import sys

import pytest

from narrative.errors import ProviderError
from narrative.providers.tokens import ApproxTokenCounter, TokenCounter, TokenizerJsonCounter

PROSE = (
    "The village elder warned of goblin raids, and nobody listened. Three nights later the "
    "watchtower burned; Marcus swore he had seen lanterns moving between the trees. We met at "
    "the tavern to decide what to do about it, but the argument went on until dawn."
)


@pytest.fixture
def no_network(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*_args: object, **_kwargs: object) -> None:
        raise AssertionError("network access attempted")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)


def test_both_counters_satisfy_the_protocol() -> None:
    assert isinstance(ApproxTokenCounter(), TokenCounter)
    assert isinstance(TokenizerJsonCounter("/nowhere"), TokenCounter)
    assert ApproxTokenCounter().identity == "approx-bpe:1"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", 0),
        ("hello world", 2),
        ("village", 1),  # up to 7 letters: one token
        ("betrayed", 2),  # 8–11 letters: two
        ("determination", 3),  # 12–15: three
        ("12345", 2),  # digits in groups of three
        ("...", 1),  # punctuation runs of up to three
        ("Hi, you!", 4),
        ("[★★★]", 5),  # brackets 1 each, each BMP symbol 1
        ("💔", 2),  # outside the BMP: 2
        ("a\n\nb", 3),  # a newline run costs 1
        ("    ⤷ x", 3),  # indentation costs 1
    ],
)
def test_approx_rule(text: str, expected: int) -> None:
    assert ApproxTokenCounter().count(text) == expected


def test_approx_is_deterministic() -> None:
    assert ApproxTokenCounter().count(PROSE) == ApproxTokenCounter().count(PROSE) == 55


def test_approx_is_monotone_in_text_length() -> None:
    rng = random.Random(7)
    alphabet = "abcdefghij XYZ0123.,;!?'\n\t★💔é中-_"
    counter = ApproxTokenCounter()
    for _ in range(200):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(1, 80)))
        counts = [counter.count(text[:i]) for i in range(len(text) + 1)]
        assert counts == sorted(counts), text


def test_approx_is_close_to_a_real_subword_tokenizer(no_network: None) -> None:
    exact = TokenizerJsonCounter.from_minilm().count(PROSE)
    approx = ApproxTokenCounter().count(PROSE)
    assert abs(approx - exact) / exact < 0.15, (approx, exact)


def test_tokenizer_json_counts_text_only(no_network: None) -> None:
    counter = TokenizerJsonCounter.from_minilm()
    assert counter.identity == "tokenizer.json:all-MiniLM-L6-v2"
    assert counter.count("") == 0
    assert counter.count("hello world") == 2  # no [CLS]/[SEP], no padding to 128
    assert counter.count(PROSE * 20) > 512  # no truncation


def test_tokenizer_json_loads_lazily_and_fails_as_provider_error(tmp_path: object) -> None:
    counter = TokenizerJsonCounter(f"{tmp_path}/missing/tokenizer.json")  # nothing read yet
    with pytest.raises(ProviderError):
        counter.count("hello")


def test_importing_the_module_does_not_load_tokenizers() -> None:
    code = "import sys, narrative.providers.tokens; print('tokenizers' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
