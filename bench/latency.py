"""Latency benchmark: ``python bench/latency.py --memories 10000,100000 [--json]``.

Ingest turns/s with embeddings, recall p50/p95 with and without the query embedding, peak RSS,
and ChromaDB on the same vectors in the same run (``pip install -e ".[bench]"`` for chromadb).
The harness lives in ``narrative.bench.latency`` so that ``narrative bench latency`` runs the same code.
"""

from __future__ import annotations

import sys

from narrative.interfaces.cli import main

if __name__ == "__main__":
    main(["bench", "latency", *sys.argv[1:]])
