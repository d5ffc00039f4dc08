"""Shared test fixtures: paths to the real broker data under ../shared/fixtures/real."""

from __future__ import annotations

from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED_FIXTURES = REPO.parent / "shared" / "fixtures" / "real"


@pytest.fixture(scope="session")
def shared_fixtures() -> Path:
    """The real-broker fixture folder; tests using it skip (saying why) only when it is absent."""
    if not SHARED_FIXTURES.is_dir():
        pytest.skip(f"real broker fixtures not found at {SHARED_FIXTURES} (../shared is absent)")
    return SHARED_FIXTURES


@pytest.fixture(scope="session")
def spark():
    """One local Spark session for the whole test run (a cold start costs ~15 s).

    Tests that use it are marked ``spark``; they still run in CI."""
    from kafkalog_spark.spark import session

    s = session("local[2]", app_name="kafkalog-tests", driver_memory="2g")
    yield s
    s.stop()
