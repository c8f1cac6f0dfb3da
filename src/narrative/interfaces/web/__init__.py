"""The review page: templates/ (HTML) and static/ (hand-written JS and CSS), read with importlib.resources."""
