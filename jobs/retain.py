"""spark-submit entry point (jobs layer): Kafka retention over stopped brokers' log dirs.

    spark-submit jobs/retain.py [--execute] [--now MS] [--config NAME=VALUE ...]
                                [--config-file FILE] [--delete-delay-ms MS] [--json] LOG_DIR ...

Retention is planning over directory listings and time indexes plus a few renames per
partition under each log dir's ``.lock``, so it runs on the driver (no Spark session is
started); it is a job here so clusters schedule it next to ``jobs/compact.py``. A dry run
unless ``--execute``. Prints the plan and the metrics; exit code 0 when nothing was due (or all
of it was done), 1 for a dry run that found segments to delete, 2 on a library error — as
``kafkalog retain``.
"""

from __future__ import annotations

import argparse
import json
import sys

from kafkalog_spark.report import parse_config_options, render_retention, run_job
from kafkalog_spark.retention.retain import retain


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("log_dirs", nargs="+")
    parser.add_argument("--execute", action="store_true", help="change the disk (default: plan)")
    parser.add_argument("--now", type=int, default=None, help="current time in ms")
    parser.add_argument("--config", action="append", default=[], help="NAME=VALUE override")
    parser.add_argument("--config-file", default=None, help="JSON/.properties topic configs")
    parser.add_argument("--delete-delay-ms", type=int, default=0)
    parser.add_argument("--high-watermark", default="checkpoint", choices=["checkpoint", "log-end"],
                        help="log-end: treat the log end as the high watermark (a copied dir "
                             "no broker will load again)")
    parser.add_argument("--json", action="store_true", help="print JSON")
    args = parser.parse_args(argv)
    result = retain(args.log_dirs, execute=args.execute, now_ms=args.now,
                    options=parse_config_options(tuple(args.config)),
                    config_file=args.config_file, delete_delay_ms=args.delete_delay_ms,
                    high_watermark=args.high_watermark)
    print(json.dumps(result.to_dict(), indent=2) if args.json else render_retention(result))
    return 1 if result.metrics["segments_deleted"] and not args.execute else 0


if __name__ == "__main__":
    sys.exit(run_job(main))
