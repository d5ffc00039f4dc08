"""spark-submit entry point (jobs layer): one Kafka log-cleaner round as a Spark job.

    spark-submit jobs/compact.py [--execute] [--now MS] [--force] [--config NAME=VALUE ...]
                                 [--config-file FILE] [--topic T ...] [--exact-keys] [--json]
                                 LOG_DIR ...

Keys of the dirty ranges go through a Spark shuffle, segment groups are rewritten by tasks,
and the driver swaps each partition in Kafka's crash-safe order under the log dir's ``.lock``
(:func:`kafkalog_spark.compaction.compact.compact` with ``engine="spark"``). A dry run
unless ``--execute``. Prints the plan and metrics; exit code 0 when nothing was due (or all
of it was done), 1 for a dry run that found partitions to clean, 2 on a library error (no Kafka
data, a --topic that is not there, corrupt data, a locked log dir) — as ``kafkalog compact``.
"""

from __future__ import annotations

import argparse
import json
import sys

from kafkalog_spark.compaction.compact import compact
from kafkalog_spark.report import parse_config_options, render_compaction, run_job
from kafkalog_spark.spark import session


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("log_dirs", nargs="+")
    parser.add_argument("--execute", action="store_true", help="change the disk (default: plan)")
    parser.add_argument("--now", type=int, default=None, help="current time in ms")
    parser.add_argument("--force", action="store_true", help="ignore the dirty ratio")
    parser.add_argument("--config", action="append", default=[], help="NAME=VALUE override")
    parser.add_argument("--config-file", default=None, help="JSON/.properties topic configs")
    parser.add_argument("--topic", action="append", default=None, help="only this topic")
    parser.add_argument("--high-watermark", default="checkpoint", choices=["checkpoint", "log-end"],
                        help="log-end: treat the log end as the high watermark (a copied dir "
                             "no broker will load again)")
    parser.add_argument("--exact-keys", action="store_true",
                        help="shuffle full key bytes instead of 128-bit key digests")
    parser.add_argument("--json", action="store_true", help="print JSON")
    args = parser.parse_args(argv)
    spark = session(app_name="kafkalog-compact") if args.execute else None
    result = compact(args.log_dirs, execute=args.execute, now_ms=args.now, force=args.force,
                     options=parse_config_options(tuple(args.config)),
                     config_file=args.config_file, topics=args.topic,
                     engine="spark", spark=spark, high_watermark=args.high_watermark,
                     exact_keys=args.exact_keys)
    print(json.dumps(result.to_dict(), indent=2) if args.json else render_compaction(result))
    return 1 if result.plans and not args.execute else 0


if __name__ == "__main__":
    sys.exit(run_job(main))
