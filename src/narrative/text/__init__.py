"""The neutral text layer: what both pipelines (``write/`` and ``read/``) know about words and lines.

* :mod:`narrative.text.patterns` — lexicons (stopwords, pronouns, emotion words …), compiled patterns and the
  lexical detectors (sentences, questions, small talk, people, topic tags);
* :mod:`narrative.text.words` — word keys (content words, lowercase, singular: the unit of overlap) and past forms;
* :mod:`narrative.text.lines` — how a turn, an exchange and an open item read as text.

It imports only :mod:`narrative.model`; it never touches a store, a provider or the environment.
"""
