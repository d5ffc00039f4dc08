"""A Spark job's work per ``.log`` byte by codec (benchmarks): the source of the tables that
pack tasks by work rather than bytes — ``datasource.plan.SCAN_CODEC_COST`` (scans, and the
read of ``df.write.format("kafkalog")``) and ``delta.spark_job.LOG_CODEC_COST`` (migrate).

Reads a ``bench_scaling.py`` run of ``--job`` from its ``--work`` folder: the log dir and the
job's stage in the Spark event log. The job's tasks are planned again exactly as that run
planned them (the same code, listing and ``--parallelism``), each task's ``.log`` bytes are
split by the codec of each split's segment (:func:`~kafkalog_spark.log.segment_info.first_codec`,
read for every segment), and each task whose bytes are mostly one codec gives that codec a
sample: the task's executor run time per byte. Printed per codec: tasks, median, min and max ns
per byte, and the median relative to uncompressed batches::

    PYTHONPATH=$PWD .venv/bin/python benchmarks/bench_scaling.py --size-mb 4096 \\
        --partitions 64 --work W --masters 'local[1]' --jobs scan-all,write,migrate
    PYTHONPATH=$PWD .venv/bin/python benchmarks/bench_task_codec_cost.py --work W --job write

Plan with the commit that ran the job (the task indexes must match). Nothing is asserted.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from collections import Counter, defaultdict
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from scaling_replay import event_log_file, read_traces  # noqa: E402

from kafkalog_spark.codec.layout import CODEC_NAMES  # noqa: E402
from kafkalog_spark.datasource.options import parse_read_options  # noqa: E402
from kafkalog_spark.datasource.reader import KafkaLogReader  # noqa: E402
from kafkalog_spark.datasource.splits import split_bytes  # noqa: E402
from kafkalog_spark.delta.options import parse_migrate_options  # noqa: E402
from kafkalog_spark.delta.plan import plan_table, source_partitions  # noqa: E402
from kafkalog_spark.delta.spark_job import TableWrite, plan_tasks  # noqa: E402
from kafkalog_spark.log.segment_info import first_codec  # noqa: E402

MOSTLY = 0.8  # a task counts for a codec when at least this share of its bytes has it


def planned_tasks(job: str, log_dir: Path, parallelism: int) -> list[list]:
    """The splits of each task of ``job``, in task index order, planned as the run planned
    them (bench_scaling's scans pass ``minPartitions`` = ``--parallelism``)."""
    if job == "migrate":
        opts = parse_migrate_options({})
        tables, listing = source_partitions([str(log_dir)], opts)
        jobs = []
        for name, parts in sorted(tables.items()):
            plan = plan_table(Path("/nonexistent") / name, parts, opts, {})
            jobs.append(TableWrite(str(plan.path), "", plan.schema, plan.read_options(opts)))
        return [[s for _, s in t.items] for t in plan_tasks(jobs, parallelism, listing)]
    opts = parse_read_options({"path": str(log_dir), "minPartitions": str(parallelism)})
    return [list(t.splits) for t in KafkaLogReader(opts).partitions()]


def task_times(work: Path, job: str, tasks: int, events: Path | None) -> dict[int, int]:
    """Executor run time (ms) per task index of the job's stage of ``tasks`` tasks, from
    ``events`` (an event log folder) or else the job's last run in ``work``."""
    if events is None:
        events = Path(json.loads((work / "result-local[1].json").read_text())[job]["events"])
    trace = read_traces(event_log_file(events), {job: (0.0, 0.0)})[job]
    stages = [s for s in trace.stages if len(s.tasks) == tasks]
    if len(stages) != 1:
        raise SystemExit(f"{job}: {len(stages)} stages of {tasks} tasks; plan with the commit "
                         f"that ran it")
    return {t.index: t.run_ms for t in stages[0].tasks}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--work", required=True, type=Path, help="a bench_scaling --work folder")
    ap.add_argument("--job", required=True, choices=("scan-all", "scan-2col", "write", "migrate"))
    ap.add_argument("--parallelism", type=int, default=128)
    ap.add_argument("--events", type=Path, help="an event log folder of the work folder's "
                    "runs (default: the job's last run)")
    args = ap.parse_args()
    tasks = planned_tasks(args.job, args.work / "data" / "kafka-logs-0", args.parallelism)
    times = task_times(args.work, args.job, len(tasks), args.events)
    per_codec: dict[str, list[float]] = defaultdict(list)
    codec_of: dict[Path, str] = {}
    for index, splits in enumerate(tasks):
        by_codec: Counter[str] = Counter()
        for split in splits:
            log = split.segment.log
            if log not in codec_of:
                codec_of[log] = CODEC_NAMES.get(first_codec(split.segment), "?")
            by_codec[codec_of[log]] += split_bytes(split)
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
