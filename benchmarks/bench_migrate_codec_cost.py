"""A migration task's work per ``.log`` byte by codec (benchmarks): the source of
``delta.spark_job.LOG_CODEC_COST``, which packs migrate's tasks by work rather than bytes.

Reads a ``bench_scaling.py --jobs migrate`` run: its log dir and the Spark event log of the
migrate job. The tasks are planned again exactly as that run planned them (the same code,
listing and ``--parallelism``), each task's ``.log`` bytes are split by the codec of each split's
first batch, and each task whose bytes are mostly one codec gives that codec a sample: the
task's executor run time per byte. Printed per codec: tasks, median, min and max ns per byte,
and the median relative to uncompressed batches::

    PYTHONPATH=$PWD .venv/bin/python benchmarks/bench_scaling.py --size-mb 4096 \\
        --partitions 64 --work W --masters 'local[1]' --jobs migrate
    PYTHONPATH=$PWD .venv/bin/python benchmarks/bench_migrate_codec_cost.py \\
        --log-dir W/data/kafka-logs-0 --events W/events-1-...

Plan with the commit that ran the job (the task indexes must match). Nothing is asserted.
"""

from __future__ import annotations

import argparse
import json
import statistics
from collections import Counter, defaultdict
from pathlib import Path

from kafkalog_spark.codec import layout as L
from kafkalog_spark.datasource.splits import split_bytes
from kafkalog_spark.delta.options import parse_migrate_options
from kafkalog_spark.delta.plan import plan_table, source_partitions
from kafkalog_spark.delta.spark_job import TableWrite, plan_tasks

MOSTLY = 0.8  # a task counts for a codec when at least this share of its bytes has it


def first_codec(log: Path, position: int) -> str:
    """The codec of the batch (or legacy wrapper) starting at ``position`` of ``log``."""
    with open(log, "rb") as f:
        f.seek(position)
        head = f.read(L.ATTRIBUTES_OFFSET + 2)
    if head[L.MAGIC_OFFSET] >= 2:
        attributes = int.from_bytes(head[L.ATTRIBUTES_OFFSET:L.ATTRIBUTES_OFFSET + 2], "big")
    else:
        attributes = head[L.LEGACY_ATTRIBUTES_OFFSET]
    return L.CODEC_NAMES.get(attributes & L.CODEC_MASK, "?")


def task_times(events: Path) -> dict[int, int]:
    """Executor run time (ms) per task index of the event log's last stage."""
    ends = []
    for file in sorted(events.iterdir()):
        for line in file.open():
            e = json.loads(line)
            if e.get("Event") == "SparkListenerTaskEnd":
                ends.append((e["Stage ID"], e["Task Info"]["Index"],
                             e["Task Metrics"]["Executor Run Time"]))
    last = max(stage for stage, _, _ in ends)
    return {index: ms for stage, index, ms in ends if stage == last}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--log-dir", required=True, type=Path)
    ap.add_argument("--events", required=True, type=Path, help="the migrate job's event log dir")
    ap.add_argument("--parallelism", type=int, default=128)
    args = ap.parse_args()
    opts = parse_migrate_options({})
    tables, listing = source_partitions([str(args.log_dir)], opts)
    jobs = []
    for name, parts in sorted(tables.items()):
        plan = plan_table(Path("/nonexistent") / name, parts, opts, {})
        jobs.append(TableWrite(str(plan.path), "", plan.schema, plan.read_options(opts)))
    tasks = plan_tasks(jobs, args.parallelism, listing)
    times = task_times(args.events)
    assert len(times) == len(tasks), (len(times), len(tasks))
    per_codec: dict[str, list[float]] = defaultdict(list)
    for index, task in enumerate(tasks):
        by_codec: Counter[str] = Counter()
        for _, split in task.items:
            by_codec[first_codec(split.segment.log, split.start_position)] += split_bytes(split)
        codec, most = by_codec.most_common(1)[0]
        total = sum(by_codec.values())
        if most >= MOSTLY * total:
            per_codec[codec].append(times[index] * 1e6 / total)
    base = statistics.median(per_codec["none"]) if per_codec.get("none") else None
    print("| codec | tasks | median ns/byte | min | max | relative to none |")
    print("|---|---:|---:|---:|---:|---:|")
    for codec, ns in sorted(per_codec.items(), key=lambda kv: statistics.median(kv[1])):
        rel = f"{statistics.median(ns) / base:.2f}" if base else "-"
        print(f"| {codec} | {len(ns)} | {statistics.median(ns):.1f} | {min(ns):.1f} | "
              f"{max(ns):.1f} | {rel} |")


if __name__ == "__main__":
    main()
