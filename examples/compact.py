"""Compact a topic offline: Kafka's log cleaner on a stopped broker's log dir.

``.venv/bin/python examples/compact.py [WORK_DIR]`` writes a changelog-style topic (many updates
of few keys, some deletes) in several segments, then:

1. plans a cleaning round (a dry run: which segments, how many records would stay);
2. executes it: segments rewritten keeping the latest record per key, swapped in Kafka's
   crash-safe order, cleaner checkpoint written;
3. checks the result: the latest value of every key is unchanged, far fewer records remain, and
   the log still verifies.

The same from the command line: ``kafkalog compact DIR --topic customers`` (dry run) and with
``--execute``. Pass ``engine="spark"`` to rewrite groups with Spark tasks.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import pyarrow as pa

import kafkalog_spark as kl
from kafkalog_spark.compaction.compact import compact

TOPIC_CONFIG = {"cleanup.policy": "compact", "segment.bytes": 16 * 1024}


def changelog(root: Path) -> Path:
    """5,000 updates of 100 customer keys; every 97th record is a tombstone."""
    n = 5000
    table = pa.table({"key": [f"customer-{i % 100}".encode() for i in range(n)],
                      "value": [None if i % 97 == 96 else f'{{"version": {i}}}'.encode()
                                for i in range(n)]})
    kl.write_log(table, root, topic="customers", partition=0, segment_bytes=16 * 1024,
                 max_batch_records=20)
    return root


def latest_per_key(log_dir: Path) -> dict[bytes, bytes | None]:
    """The value a consumer of the whole topic ends with, per key (tombstones as None: they
    stay within delete.retention.ms, a day by default)."""
    t = kl.read_log(log_dir)
    return dict(zip(t["key"].to_pylist(), t["value"].to_pylist()))


def main(argv: list[str] | None = None) -> dict:
    args = sys.argv[1:] if argv is None else argv
    work = Path(args[0]) if args else Path(tempfile.mkdtemp())
    log_dir = changelog(work / "logs")
    before = kl.read_log(log_dir).num_rows

    plan = compact(log_dir, options=TOPIC_CONFIG, topics=["customers"], force=True)
    print("dry run:", plan.metrics)
    assert not plan.executed and plan.plans
    for p in plan.plans:
        d = p.to_dict()
        print(f"  {d['partition']}: clean [{d['first_dirty_offset']}, "
              f"{d['first_uncleanable_offset']}) in {len(d['groups'])} segment groups")
    expected = latest_per_key(log_dir)

    done = compact(log_dir, execute=True, options=TOPIC_CONFIG, topics=["customers"], force=True)
    after = kl.read_log(log_dir).num_rows
    print("executed:", done.metrics)
    print(f"records: {before} -> {after}")
    assert after < before
    assert latest_per_key(log_dir) == expected  # compaction keeps the latest per key
    assert kl.verify(log_dir).ok
    return {"before": before, "after": after, "segments_rewritten":
            done.metrics["segments_rewritten"]}


if __name__ == "__main__":
    print(main())
