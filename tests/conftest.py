"""Shared test fixtures: the real broker data (``$KAFKALOG_REAL_FIXTURES``, else
../shared/fixtures/real next to the clone: tests/real_fixtures.py), Spark sessions and clusters,
a lock holder."""

from __future__ import annotations

from pathlib import Path

import pytest
from real_fixtures import ENV, named, real_fixtures_dir, where_looked

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="session")
def shared_fixtures() -> Path:
    """The real-broker fixture folder; tests using it skip (saying why and where they looked)
    when it is absent — and fail when ``$KAFKALOG_REAL_FIXTURES`` names a folder that is not
    there (a typo must not turn into skips)."""
    folder = real_fixtures_dir()
    if not folder.is_dir():
        if named() is not None:
            pytest.fail(f"${ENV} names {folder}, which is not a folder", pytrace=False)
        pytest.skip(f"real broker fixtures not found at {where_looked()}")
    return folder.resolve()


@pytest.fixture(scope="session")
def spark():
    """One local Spark session for the whole test run (a cold start costs ~15 s).

    Tests that use it are marked ``spark``; they still run in CI."""
    from kafkalog_spark.spark import session

    s = session("local[2]", app_name="kafkalog-tests", driver_memory="2g")
    yield s
    s.stop()


class LockHolder:
    """Another process holding ``<log_dir>/.lock`` exactly as a running broker does (a POSIX
    record lock, what the JVM's ``FileChannel.tryLock`` takes on Linux)."""

    SCRIPT = ("import fcntl, sys\n"
              "f = open(sys.argv[1], 'a+b')\n"
              "fcntl.lockf(f, fcntl.LOCK_EX | fcntl.LOCK_NB)\n"
              "print('locked', flush=True)\n"
              "sys.stdin.read()\n")

    def __init__(self, log_dir: Path) -> None:
        import subprocess
        import sys

        log_dir.mkdir(parents=True, exist_ok=True)
        self.proc = subprocess.Popen([sys.executable, "-c", self.SCRIPT, str(log_dir / ".lock")],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        assert self.proc.stdout is not None and self.proc.stdout.readline().strip() == "locked"
        self.pid = self.proc.pid

    def release(self) -> None:
        if self.proc.poll() is None:
            assert self.proc.stdin is not None
            self.proc.stdin.close()
            self.proc.wait(timeout=30)


@pytest.fixture
def lock_holder():
    """``lock_holder(log_dir) -> LockHolder``: lock a log dir from another process for the rest
    of the test (released at teardown)."""
    holders: list[LockHolder] = []

    def hold(log_dir: Path) -> LockHolder:
        holders.append(LockHolder(log_dir))
        return holders[-1]

    yield hold
    for h in holders:
        h.release()


@pytest.fixture(scope="session")
def spark_cluster(tmp_path_factory):
    """A Spark standalone cluster (master + 2 workers of 1 core, 2 GiB) for the whole test run,
    from the installed pyspark, on loopback; every process stopped by its pid at the end
    (``tests/cluster.py``). Tests that use it are marked ``cluster``; they run in CI."""
    from cluster import StandaloneCluster

    root = tmp_path_factory.mktemp("spark-cluster")
    cluster = StandaloneCluster(root, workers=2, hidden=root / "driver-only")
    try:
        cluster.start()
    except BaseException:
        cluster.stop()
        raise
    yield cluster
    cluster.stop()
