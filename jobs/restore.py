"""spark-submit entry point (jobs layer): restore a Delta table written by ``migrate`` into a
log dir, one Spark task per topic-partition.

    spark-submit jobs/restore.py [--dry-run] [--topic T ...] [--segment-bytes N] [--json] TABLE DEST_LOG_DIR

Every executor must see the table and ``DEST_LOG_DIR`` at the same paths (shared storage). The
driver plans, writes the offset checkpoints and rebuilds the derived files
(:func:`kafkalog_spark.delta.restore.restore`); the restored log dir is then verified with a
Spark job. Written unless ``--dry-run`` (new output, as ``kafkalog restore``). Exit code 0
when it verifies clean (or a dry run finds everything up to date), 1 for a dry run that would
restore records or a restored log dir that does not verify clean, 2 on a library error.
"""

from __future__ import annotations

import argparse
import json
import sys

from kafkalog_spark.delta.restore import restore
from kafkalog_spark.log.staging import DEFAULT_SEGMENT_BYTES
from kafkalog_spark.recovery.verify_job import verify_spark
from kafkalog_spark.report import run_job
from kafkalog_spark.spark import session


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("table")
    parser.add_argument("dest")
    parser.add_argument("--topic", action="append", default=None, help="only this topic")
    parser.add_argument("--segment-bytes", type=int, default=DEFAULT_SEGMENT_BYTES)
    parser.add_argument("--allow-open-transactions", action="store_true")
    parser.add_argument("--dry-run", action="store_true", help="only plan")
    parser.add_argument("--json", action="store_true", help="print JSON")
    args = parser.parse_args(argv)
    spark = session(app_name="kafkalog-restore")
    result = restore(args.table, args.dest, topics=args.topic, execute_plan=not args.dry_run,
                     segment_bytes=args.segment_bytes,
                     allow_open_transactions=args.allow_open_transactions, spark=spark)
    if args.dry_run:
        would = any(p["records"] for p in result["partitions"])
        ok, verdict = not would, ("planned; run again without --dry-run" if would
                                  else "up to date: nothing new to restore")
    else:
        ok = verify_spark(spark, [args.dest]).ok
        verdict = "verified clean" if ok else "FAILED verification"
    if args.json:
        print(json.dumps({"restore": result, **({} if args.dry_run else {"verified": ok})},
                         indent=2))
    else:
        for p in result["partitions"]:
            print(f"{p['topic']}-{p['partition']}: offsets [{p['from_offset']}, "
                  f"{p['log_end_offset']}), {p['records']:,} records")
        print(verdict)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(run_job(main))
