"""spark-submit entry point (jobs layer): reconcile a partition's replicas from several brokers'
log dirs into one new log dir, one Spark task per partition.

    spark-submit jobs/reconcile.py --dest OUT [--execute] [--quarantine DIR] [--json] DIR1 DIR2 [...]

Every executor must see the source log dirs and ``OUT`` at the same paths (shared storage).
The driver checks the inputs, writes the offset checkpoints and rebuilds the derived files
(:func:`kafkalog_spark.recovery.reconcile.reconcile`). A dry run unless ``--execute``. Exit
code 0 when ``OUT`` was written and verifies clean, 1 for a dry run that would write
partitions or an ``OUT`` that does not verify clean, 2 on a library error — as ``kafkalog
reconcile``.
"""

from __future__ import annotations

import argparse
import json
import sys

from kafkalog_spark.recovery.reconcile import reconcile
from kafkalog_spark.recovery.verify_job import verify_spark
from kafkalog_spark.report import render_reconcile, run_job
from kafkalog_spark.spark import session


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("log_dirs", nargs="+")
    parser.add_argument("--dest", required=True, help="the new log dir")
    parser.add_argument("--execute", action="store_true", help="write --dest (default: plan)")
    parser.add_argument("--quarantine", default=None, help="quarantine root")
    parser.add_argument("--segment-bytes", type=int, default=None, help="largest segment")
    parser.add_argument("--json", action="store_true", help="print JSON")
    args = parser.parse_args(argv)
    spark = session(app_name="kafkalog-reconcile")
    report = reconcile(args.log_dirs, args.dest, execute_plan=args.execute,
                       quarantine_dir=args.quarantine, segment_bytes=args.segment_bytes,
                       spark=spark)
    ok = verify_spark(spark, [args.dest]).ok if args.execute else not report.partitions
    if args.json:
        print(json.dumps({"reconcile": report.to_dict(),
                          **({"verified": ok} if args.execute else {})}, indent=2))
    else:
        print(render_reconcile(report))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(run_job(main))
