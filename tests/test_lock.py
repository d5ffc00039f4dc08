"""The log dir .lock: detection with a real holder process, stale files, hold_lock."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from kafkalog_spark.errors import LogDirError, LogDirLockedError
from kafkalog_spark.storage.lock import ensure_not_locked, hold_lock, lock_holder

# Locks the file exactly like the JVM's FileChannel.tryLock on Linux: a POSIX record lock.
HOLDER = (
    "import fcntl, sys, time\n"
    "f = open(sys.argv[1], 'r+b')\n"
    "fcntl.lockf(f, fcntl.LOCK_EX | fcntl.LOCK_NB)\n"
    "print('locked', flush=True)\n"
    "sys.stdin.read()\n"
)


@pytest.fixture
def log_dir(tmp_path: Path) -> Path:
    d = tmp_path / "kafka-logs"
    d.mkdir()
    return d


@pytest.fixture
def held(log_dir: Path) -> Iterator[subprocess.Popen[str]]:
    (log_dir / ".lock").touch()
    proc = subprocess.Popen([sys.executable, "-c", HOLDER, str(log_dir / ".lock")],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "locked"
    yield proc
    assert proc.stdin is not None
    proc.stdin.close()  # the holder exits at end of input, releasing the lock
    proc.wait(timeout=30)


def _fingerprint(path: Path) -> tuple[bytes, int, int]:
    st = path.stat()
    return hashlib.sha256(path.read_bytes()).digest(), st.st_mtime_ns, st.st_size


def test_no_lock_file_is_unlocked_and_not_created(log_dir: Path) -> None:
    assert lock_holder(log_dir) is None
    ensure_not_locked(log_dir)
    assert not (log_dir / ".lock").exists()


def test_stale_lock_file_is_fine(log_dir: Path) -> None:
    (log_dir / ".lock").touch()
    before = _fingerprint(log_dir / ".lock")
    assert lock_holder(log_dir) is None
    ensure_not_locked(log_dir)
    assert _fingerprint(log_dir / ".lock") == before


def test_held_lock_names_the_holder_and_changes_nothing(
        log_dir: Path, held: subprocess.Popen[str]) -> None:
    before = _fingerprint(log_dir / ".lock")
    assert lock_holder(log_dir) == held.pid
    with pytest.raises(LogDirLockedError) as info:
        ensure_not_locked(log_dir)
    assert str(held.pid) in str(info.value)
    assert info.value.file == str(log_dir / ".lock")
    with pytest.raises(LogDirLockedError):
        with hold_lock(log_dir):
            pass
    assert _fingerprint(log_dir / ".lock") == before


def test_read_only_lock_file_can_be_tested(log_dir: Path, held: subprocess.Popen[str]) -> None:
    (log_dir / ".lock").chmod(0o444)
    assert lock_holder(log_dir) == held.pid


def test_lock_released_when_holder_exits(log_dir: Path) -> None:
    (log_dir / ".lock").touch()
    proc = subprocess.Popen([sys.executable, "-c", HOLDER, str(log_dir / ".lock")],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "locked"
    assert lock_holder(log_dir) == proc.pid
    proc.kill()
    proc.wait(timeout=30)
    assert lock_holder(log_dir) is None


def test_hold_lock_creates_file_and_blocks_other_processes(log_dir: Path) -> None:
    with hold_lock(log_dir) as path:
        assert path == log_dir / ".lock" and path.is_file()
        assert lock_holder(log_dir) == os.getpid()
        ensure_not_locked(log_dir)  # our own lock is not a conflict
        probe = subprocess.run(
            [sys.executable, "-c",
             "import sys; from kafkalog_spark.storage.lock import lock_holder;"
             "print(lock_holder(sys.argv[1]))", str(log_dir)],
            capture_output=True, text=True, check=True)
        assert probe.stdout.strip() == str(os.getpid())
        with pytest.raises(LogDirError, match="already holds"):
            with hold_lock(log_dir):
                pass
        # the lock must survive the nested attempt (POSIX locks drop on any close)
        again = subprocess.run(
            [sys.executable, "-c",
             "import sys; from kafkalog_spark.storage.lock import lock_holder;"
             "print(lock_holder(sys.argv[1]))", str(log_dir)],
            capture_output=True, text=True, check=True)
        assert again.stdout.strip() == str(os.getpid())
    assert (log_dir / ".lock").is_file()  # left in place, as Kafka leaves it
    assert lock_holder(log_dir) is None


def test_hold_lock_needs_an_existing_dir(tmp_path: Path) -> None:
    with pytest.raises(LogDirError, match="does not exist"):
        with hold_lock(tmp_path / "missing"):
            pass


def test_symlinked_lock_file_is_refused(log_dir: Path, tmp_path: Path) -> None:
    outside = tmp_path / "elsewhere"
    outside.touch()
    (log_dir / ".lock").symlink_to(outside)
    with pytest.raises(LogDirError):
        lock_holder(log_dir)
