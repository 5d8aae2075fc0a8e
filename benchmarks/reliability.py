"""Reliability report: concurrency, crash kills, faults, hostile input, the frozen wall clock and
the soak (see benchmarks/harness/).

    python benchmarks/reliability.py --quick            # CI size, under a minute
    python benchmarks/reliability.py --full --json out.json
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.harness.report import reliability_main  # noqa: E402

if __name__ == "__main__":
    sys.exit(reliability_main(sys.argv[1:]))
