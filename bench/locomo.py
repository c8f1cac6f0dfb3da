"""LoCoMo retrieval benchmark: ``python bench/locomo.py ../shared/data/locomo-dev.json [--json]``.

The harness lives in ``narrative.bench.locomo`` so that ``narrative bench locomo`` runs the same code.
"""

from __future__ import annotations

import sys

from narrative.interfaces.cli import main

if __name__ == "__main__":
    main(["bench", "locomo", *sys.argv[1:]])
