"""Where the tests, the fuzz harness and the benchmarks find the real broker fixtures (test
harness): the folder ``$KAFKALOG_REAL_FIXTURES`` names, else ``../shared/fixtures/real`` next
to the clone."""

from __future__ import annotations

import os
from pathlib import Path

ENV = "KAFKALOG_REAL_FIXTURES"
NEXT_TO_CLONE = Path(__file__).resolve().parents[1].parent / "shared" / "fixtures" / "real"


def named() -> Path | None:
    """The folder ``$KAFKALOG_REAL_FIXTURES`` names (an empty value names none)."""
    value = os.environ.get(ENV)
    return Path(value).expanduser().absolute() if value else None


def real_fixtures_dir() -> Path:
    """The folder to look in; it may not exist."""
    return named() or NEXT_TO_CLONE


def where_looked() -> str:
    """Where :func:`real_fixtures_dir` looks and why, for skip and error messages."""
    if named() is not None:
        return f"{named()} (${ENV})"
    return f"{NEXT_TO_CLONE} (../shared/fixtures/real next to the clone; set ${ENV} to look elsewhere)"
