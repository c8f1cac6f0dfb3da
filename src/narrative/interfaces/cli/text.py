"""How the command line shows stored text: whole words only, and multi-line content kept under its header."""

from __future__ import annotations

from collections.abc import Mapping

ELLIPSIS = "…"


def clip(text: str, width: int) -> str:
    """One line of at most ``width`` characters, cut at a word boundary (``…`` marks the cut).

    The lines of a multi-line text (an exchange: "Maya: …" then "Rook: …") are joined with " / ".
    """
    one = " / ".join(line.strip() for line in text.splitlines() if line.strip())
    if len(one) <= width:
        return one
    cut = one[: max(1, width - 1)]
    if not one[len(cut)].isspace() and " " in cut:
        cut = cut[: cut.rindex(" ")]
    return cut.rstrip(" /,;:") + ELLIPSIS


def indented(text: str, indent: str) -> str:
    """``text`` with every line after the first indented, so it stays under the line it starts on."""
    lines = [line for line in text.splitlines() if line.strip()] or [""]
    return "\n".join([lines[0], *(indent + line.strip() for line in lines[1:])])


def verbatim(text: str, indent: str) -> str:
    """``text`` as it was written, every line after the first indented: blank lines and each line's own
    indentation kept (a long message's paragraphs and code read as they were written)."""
    lines = text.strip("\n").splitlines() or [""]
    return "\n".join([lines[0].rstrip(), *(indent + line.rstrip() if line.strip() else "" for line in lines[1:])])


def counted(count: int, word: str, plural: str | None = None) -> str:
    """``1 message``, ``2 messages`` (``plural`` when adding an s is wrong: memory → memories)."""
    return f"{count} {word if count == 1 else plural or word + 's'}"


#: How a delete's counts read, in this order (the keys the engine returns; others are left out).
_DELETED = (
    ("memories", "memory", "memories"),
    ("messages", "message", None),
    ("conversations", "conversation", None),
    ("storylines", "storyline", None),
    ("narratives", "narrative link", None),
    ("entities", "entity", "entities"),
    ("uses", "recorded use", None),
    ("reopened_entities", "reopened thread", None),
    ("restored", "memory it had superseded made current again", "memories it had superseded made current again"),
    ("moved_memories", "memory moved to Your Story", "memories moved to Your Story"),
)


def deleted_counts(counts: Mapping[str, object]) -> str:
    """What a delete took, in words: ``2 memories, 1 narrative link`` (never a raw dict; ``nothing`` when 0)."""
    parts = [
        counted(int(value), word, plural)
        for key, word, plural in _DELETED
        if isinstance(value := counts.get(key), int) and not isinstance(value, bool) and value
    ]
    return ", ".join(parts) or "nothing"
