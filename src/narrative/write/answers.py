"""Checking what an LLM wrote before anything stores it.

A prose step asks for a given number of sentences about given material (the
running link: one sentence about the latest exchange; the closing memory: two
to four sentences about what the conversation produced).  An answer that is not
that — data instead of prose, more or fewer sentences than asked, longer than
the step allows, or prose that names nothing of the material it was given (a
chatty "this is not json", a refusal, a preamble) — is refused here with a
logged warning; the caller then keeps the heuristic's text, so such an answer
is never stored.
"""

from __future__ import annotations

import logging

from narrative.text import patterns as P

log = logging.getLogger("narrative.write")


def content_keys(text: str) -> set[str]:
    """The content words of ``text`` (singular, lowercase): what a summary of it could share with it."""
    return {key for w in P.words(text.lower()) if (key := P.tag_key(w)) is not None}


def prose(
    text: str | None,
    step: str,
    *,
    sentences: tuple[int, int],
    max_chars: int,
    material: str,
) -> str | None:
    """``text`` with its whitespace collapsed when it is the prose ``step`` asked for, else ``None``."""
    if text is None:
        return None
    answer = " ".join(text.split())
    problem = refusal(answer, sentences=sentences, max_chars=max_chars, material=material)
    if problem is None:
        return answer
    log.warning("%s: the model's answer is not what was asked (%s): %.80r; heuristic used", step, problem, answer)
    return None


def refusal(answer: str, *, sentences: tuple[int, int], max_chars: int, material: str) -> str | None:
    """Why ``answer`` is not the asked-for prose, or ``None`` when it is."""
    if not answer:
        return "empty"
    if answer[:1] in "{[<" or "```" in answer:
        return "data or markup instead of prose"
    if len(answer) > max_chars:
        return f"{len(answer)} characters, more than {max_chars}"
    count = len(P.split_sentences(answer))
    low, high = sentences
    if not low <= count <= high:
        asked = str(low) if low == high else f"{low}–{high}"
        return f"{count} sentences where {asked} were asked"
    if material.strip() and not content_keys(answer) & content_keys(material):
        return "it names nothing of what it was asked to summarise"
    return None
