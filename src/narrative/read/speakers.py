"""A query's vector when the query names a person who speaks in the chats: the name weighs no more than what is
asked.

Every message's vector is made from its speaker and its words ("Caroline: been a long road"), as the turn reads.
In a short message the name is a large part of what the model reads, so a query that names a speaker ("What
career path has Caroline decided to pursue?") lands close to everything that person said — greetings and
thanks as much as the answer — and those fill the head of the vector list.  Left out, the name no longer says
whose words are wanted ("What inspired Caroline's painting?" finds Melanie's paintings as well).  So the
query's vector is the mean of the two directions, the query as asked and the query without the speakers'
names: both halves count the same, and no constant is fitted.  The keyword list matches the name as before.

A query that is nothing but the names and question words ("Who is Caroline?") is embedded as asked: there is
nothing else for its vector to mean.
"""

from __future__ import annotations

import re
from collections.abc import Callable

import numpy as np

from narrative.store.keyword_index import QUERY_STOPWORDS, words
from narrative.store.protocol import Store

_WORD = re.compile(r"\S+")


def query_vector_of(
    query: str, names: frozenset[str], embed: Callable[[str], tuple[np.ndarray, str]]
) -> tuple[np.ndarray, str]:
    """The vector to search with (and the model's name): ``query``'s, or, when it names a speaker, the unit mean of
    its vector and the vector of the query without the speakers' names."""
    vector, model = embed(query)
    bare = without_speakers(query, names)
    if bare == query:
        return vector, model
    other, _ = embed(bare)
    mean = _unit(np.asarray(vector, dtype=np.float32)) + _unit(np.asarray(other, dtype=np.float32))
    return _unit(mean), model


def _unit(vector: np.ndarray) -> np.ndarray:
    return vector / max(float(np.linalg.norm(vector)), 1e-12)


def speaker_names(store: Store, user_id: str) -> frozenset[str]:
    """The words of the names of the people who speak in a user's chats (each storyline's participants), folded
    as keyword search folds them ("Mary Ann" gives "mary" and "ann"; a question word is never a name)."""
    names = store.participant_names(user_id)
    return frozenset(w for name in names for w in words(name) if w not in QUERY_STOPWORDS)


def without_speakers(query: str, names: frozenset[str]) -> str:
    """``query`` without the words that name a speaker (one-word names and each word's possessive: "Mel's"),
    or ``query`` itself when no word other than a question word would be left."""
    if not names:
        return query
    kept = [token for token in _WORD.findall(query) if not _names_speaker(token, names)]
    content = [w for token in kept for w in words(token) if w not in QUERY_STOPWORDS]
    return " ".join(kept) if content and len(kept) < len(_WORD.findall(query)) else query


def _names_speaker(token: str, names: frozenset[str]) -> bool:
    said = words(token)
    if not said:
        return False
    if len(said) == 2 and said[1] == "s":  # a possessive: "Caroline's"
        said = said[:1]
    return len(said) == 1 and said[0] in names
