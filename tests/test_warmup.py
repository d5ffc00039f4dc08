"""The numba warm-up ``./dev`` runs at setup: it goes through every command it names and leaves
nothing behind."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.jit_only  # processes and files, not what kernels compute


def test_warm_up_runs_every_step_and_cleans_up(tmp_path: Path) -> None:
    env = {**os.environ, "TMPDIR": str(tmp_path)}
    out = subprocess.run([sys.executable, "-m", "kafkalog_spark.warmup", "-v"], env=env,
                         capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    steps = [line.split(":")[0].strip() for line in out.stderr.splitlines()
             if line.startswith("  ")]
    assert steps == ["write_log none", "write_log gzip", "write_log snappy", "write_log lz4",
                     "write_log zstd", "read_log", "info", "verify --deep", "dump",
                     "dump jsonl", "rebuild-index", "recover", "retain", "compact",
                     "compact --execute", "Spark compaction's key combining"]
    assert out.stderr.splitlines()[-1].startswith("numba kernels compiled and cached in")
    assert not [p for p in tmp_path.iterdir() if p.name.startswith("kafkalog-warmup-")]
