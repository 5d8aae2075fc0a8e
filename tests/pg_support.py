"""What the PostgreSQL test files share: the marks that run them only where pgserver is installed.

In CI (`MEMLAB_REQUIRE_POSTGRES` set) a missing pgserver is a failure, not a skip.
"""

from __future__ import annotations

import os
import warnings

import pytest


def pgserver_importable() -> bool:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            import pgserver  # noqa: F401
        except ImportError:
            return False
    return True


POSTGRES_MARKS = [
    pytest.mark.postgres,
    pytest.mark.skipif(not pgserver_importable() and not os.environ.get("MEMLAB_REQUIRE_POSTGRES"),
                       reason="pgserver is not installed: pip install 'memlab[postgres]'"),
]
