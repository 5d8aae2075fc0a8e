"""Crash worker started by exec: runs turns on a file DB and SIGKILLs itself at MEMLAB_CRASH_AT.

    MEMLAB_CRASH_AT=mid_write python tests/crash_worker.py --db X.db --acks X.jsonl --turns 6

The kill points and the acknowledgement file are described in benchmarks.harness.crash.crash_worker_main;
tests/test_crash.py drives this script through benchmarks.harness.crash.run_crash(worker=[...]).
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.harness.crash import crash_worker_main  # noqa: E402

if __name__ == "__main__":
    sys.exit(crash_worker_main(sys.argv[1:]))
