"""How the command line shows stored text: whole words only, and multi-line content kept under its header."""

from __future__ import annotations

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


def counted(count: int, word: str, plural: str | None = None) -> str:
    """``1 message``, ``2 messages`` (``plural`` when adding an s is wrong: memory → memories)."""
    return f"{count} {word if count == 1 else plural or word + 's'}"
