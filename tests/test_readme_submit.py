"""The README's spark-submit lines run as written, in a fresh shell: no venv activated, no
``SPARK_HOME``, nothing on ``PATH`` from the venv — as a user types them after ``./dev``.

The lines are the ``.venv/bin/spark-submit`` lines of the fenced block after the README's
``MARKER`` comment. They run in a stand-in for the clone (``.venv`` and ``jobs`` linked to this
checkout's), where the log dir they name is a small generated changelog topic."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pytest

import kafkalog_spark as kl

REPO = Path(__file__).resolve().parents[1]
MARKER = "<!-- spark-submit lines: run as written by tests/test_readme_submit.py -->"
VENV_BIN = Path(sys.executable).parent
# what a fresh login shell has besides PATH (Java is found on PATH or by JAVA_HOME)
KEPT = ("HOME", "USER", "LOGNAME", "LANG", "LC_ALL", "TMPDIR", "JAVA_HOME", "TERM")


def submit_lines() -> list[str]:
    readme = (REPO / "README.md").read_text()
    assert MARKER in readme, f"README.md lost the marker {MARKER!r} before its spark-submit block"
    block = re.match(r"\s*```bash\n(.*?)```", readme.split(MARKER, 1)[1], re.S)
    assert block is not None, "no ```bash block right after the README's spark-submit marker"
    return [line.split("  #", 1)[0].strip() for line in block.group(1).splitlines()
            if line.startswith(".venv/bin/spark-submit ")]


def fresh_shell_env() -> dict[str, str]:
    """This environment as a new login shell would have it: PATH without the venv (nor any
    folder holding a ``spark-submit``), no SPARK_*, PYSPARK_*, VIRTUAL_ENV or PYTHONPATH."""
    path = [d for d in os.environ.get("PATH", "/usr/bin:/bin").split(os.pathsep)
            if d and Path(d).resolve() != VENV_BIN.resolve()
            and not (Path(d) / "spark-submit").exists()]
    env = {k: os.environ[k] for k in KEPT if k in os.environ}
    env["PATH"] = os.pathsep.join(path)
    return env


def changelog(log_dir: Path) -> dict[bytes, bytes | None]:
    """3,000 updates of 50 keys (every 61st a tombstone) in several segments; returns the
    latest value per key, what compaction must keep."""
    n = 3000
    keys = [f"customer-{i % 50}".encode() for i in range(n)]
    values = [None if i % 61 == 60 else f'{{"version": {i}}}'.encode() for i in range(n)]
    kl.write_log(pa.table({"key": keys, "value": values}), log_dir, topic="customers",
                 partition=0, segment_bytes=16 * 1024, max_batch_records=20)
    return dict(zip(keys, values))


@pytest.mark.spark
def test_the_readmes_spark_submit_lines_run_as_written_without_an_activated_venv(tmp_path):
    lines = submit_lines()
    assert len(lines) == 1 and " jobs/compact.py --execute " in lines[0], (
        f"this test checks one compaction line; the README's block now says {lines}")
    clone = tmp_path / "clone"
    clone.mkdir()
    for name in (".venv", "jobs"):
        (clone / name).symlink_to(REPO / name)
    log_dir = clone / shlex.split(lines[0])[-1]
    latest = changelog(log_dir)
    before = kl.read_log(log_dir).num_rows

    done = subprocess.run(["bash", "-c", lines[0]], cwd=clone, env=fresh_shell_env(),
                          capture_output=True, text=True, timeout=600)

    assert done.returncode == 0, (
        f"`{lines[0]}` exited {done.returncode} (it needs .venv/spark-home, linked by ./dev's "
        f"setup: run ./dev once):\n{done.stdout[-2000:]}\n{done.stderr[-4000:]}")
    assert "cleaned 1 partitions" in done.stdout, done.stdout
    after = kl.read_log(log_dir)
    assert 50 <= after.num_rows < before
    assert dict(zip(after["key"].to_pylist(), after["value"].to_pylist())) == latest
    assert kl.verify(log_dir).ok
