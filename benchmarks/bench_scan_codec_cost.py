"""A scan's work per ``.log`` byte by codec (benchmarks): single splits read alone, in-process.

The scans pack their tasks by work (:func:`~kafkalog_spark.datasource.plan.codec_weights`,
``SCAN_CODEC_COST``, measured from Spark's scan tasks by ``bench_task_codec_cost.py``); this
measures a byte's work by codec without Spark: a random sample of the splits of ``--log-dir``,
each split read alone by the data source's reader with every column, after a warm-up; each
split's codec is its segment's (:func:`~kafkalog_spark.log.segment_info.first_codec`). Printed per
codec: splits, mean ms a split, mean MB and thousand records a split, ms per MB and its ratio
to uncompressed batches::

    PYTHONPATH=$PWD .venv/bin/python benchmarks/bench_scan_codec_cost.py \\
        --log-dir W/data/kafka-logs-0          # W: a bench_scaling.py --work folder

Nothing is asserted; run it on a quiet machine.
"""

from __future__ import annotations

import argparse
import random
import time
from collections import defaultdict

from kafkalog_spark.codec.layout import CODEC_NAMES
from kafkalog_spark.datasource.options import parse_read_options
from kafkalog_spark.datasource.plan import plan_scan
from kafkalog_spark.datasource.reader import KafkaLogReader
from kafkalog_spark.datasource.splits import KafkaLogTask, split_bytes
from kafkalog_spark.log.segment_info import first_codec


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--log-dir", required=True)
    ap.add_argument("--sample", type=int, default=400, help="splits timed")
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    opts = parse_read_options({"path": args.log_dir})
    splits = plan_scan(opts).splits
    sample = random.Random(args.seed).sample(splits, min(args.sample, len(splits)))
    reader = KafkaLogReader(opts)

    def read(split) -> tuple[int, float]:
        t0, rows = time.perf_counter(), 0
        for batch in reader.read(KafkaLogTask((split,))):
            rows += batch.num_rows
        return rows, time.perf_counter() - t0

    for split in sample[:20]:  # warm-up: imports, kernels, page cache
        read(split)
    by_codec: dict[str, list[tuple[int, int, float]]] = defaultdict(list)
    for split in sample:
        rows, seconds = read(split)
        codec = CODEC_NAMES.get(first_codec(split.segment), "none")
        by_codec[codec].append((split_bytes(split), rows, seconds))
    print("| codec | splits | ms a split | MB a split | k records a split | ms per MB | "
          "relative to none |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    per_mb = {c: sum(s for _, _, s in v) * 1e3 / (sum(b for b, _, _ in v) / 1e6)
              for c, v in by_codec.items()}
    for codec in sorted(by_codec, key=lambda c: per_mb[c]):
        v = by_codec[codec]
        n = len(v)
        base = per_mb.get("none")
        rel = f"{per_mb[codec] / base:.2f}" if base else "-"
        ms = sum(s for _, _, s in v) * 1e3 / n
        mb = sum(b for b, _, _ in v) / 1e6 / n
        k_records = sum(r for _, r, _ in v) / 1e3 / n
        print(f"| {codec} | {n} | {ms:.2f} | {mb:.2f} | {k_records:.2f} | {per_mb[codec]:.2f} | "
              f"{rel} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
