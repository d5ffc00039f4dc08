"""Compaction with engine="spark": same bytes as the local path (key shuffle + group rewrites)."""

from __future__ import annotations

import shutil

import pytest

from kafkalog_spark import verify
from kafkalog_spark.compaction.compact import compact

from test_compaction import T, batches, build_partition, rec, rows, txn_log

pytestmark = pytest.mark.spark


def test_spark_engine_matches_local(spark, tmp_path):
    log_dir = tmp_path / "local"
    build_partition(log_dir, txn_log(), topic="a")
    segs = [[rec(i, f"k{i % 7}".encode(), None if i % 11 == 0 else b"v%d" % i) for i in range(j, j + 10)]
            for j in range(0, 40, 10)] + [[]]
    build_partition(log_dir, segs, topic="b", partition=3)
    other = tmp_path / "spark"
    shutil.copytree(log_dir, other)
    opts = {"cleanup.policy": "compact", "segment.bytes": 1500}
    local = compact(log_dir, now_ms=T, execute=True, force=True, options=opts)
    dist = compact(other, now_ms=T, execute=True, force=True, options=opts, engine="spark",
                   spark=spark)
    assert rows(other) == rows(log_dir)
    for name in ("a-0", "b-3"):
        assert batches(other / name) == batches(log_dir / name)
        for f in sorted((log_dir / name).iterdir()):
            if f.suffix in (".log", ".index", ".timeindex", ".txnindex"):
                assert (other / name / f.name).read_bytes() == f.read_bytes(), f.name
    assert verify(other, deep=True).ok
    assert dist.metrics["records_kept"] == local.metrics["records_kept"]
    assert dist.metrics["shuffle_seconds"] >= 0 and dist.metrics["rewrite_seconds"] >= 0
    assert not list(tmp_path.glob("*kafkalog-compact*"))
