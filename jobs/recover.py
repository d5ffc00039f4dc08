"""spark-submit entry point (jobs layer): verify log dirs with a Spark job, then recover them.

    spark-submit jobs/recover.py [--execute] [--salvage] [--quarantine DIR] [--json] LOG_DIR [...]

Step 1 runs :func:`kafkalog_spark.recovery.verify_job.verify_spark` over every segment in
parallel and prints the problems; step 2 runs :func:`kafkalog_spark.recovery.recover.recover`
on the driver (a dry run unless ``--execute``; ``--salvage`` keeps every valid batch after
damage) — repairs are sequential per partition by
nature, and each log dir's ``.lock`` is taken by one process. Step 3 (with ``--execute``)
verifies again. Exit code 1 for a dry run that would change something (as ``kafkalog
recover``) or when the dirs do not verify clean at the end (as ``kafkalog verify``), 2 on a
library error, else 0.
"""

from __future__ import annotations

import argparse
import json
import sys

from kafkalog_spark.recovery.recover import recover
from kafkalog_spark.recovery.verify_job import verify_spark
from kafkalog_spark.report import render_recovery, render_verify, run_job
from kafkalog_spark.spark import session


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("log_dirs", nargs="+")
    parser.add_argument("--execute", action="store_true", help="change the disk (default: plan)")
    parser.add_argument("--quarantine", default=None, help="quarantine root")
    parser.add_argument("--deep", action="store_true", help="also parse every record")
    parser.add_argument("--salvage", action="store_true",
                        help="keep every valid batch after damage instead of cutting there")
    parser.add_argument("--json", action="store_true", help="print JSON")
    args = parser.parse_args(argv)
    spark = session(app_name="kafkalog-recover")
    before = verify_spark(spark, args.log_dirs, deep=args.deep)
    result = recover(args.log_dirs, execute_plan=args.execute, quarantine_dir=args.quarantine,
                     salvage=args.salvage)
    after = verify_spark(spark, args.log_dirs, deep=args.deep) if args.execute else before
    if args.json:
        print(json.dumps({"before": before.to_dict(), "recovery": result.to_dict(),
                          "after": after.to_dict()}, indent=2))
    else:
        print(render_verify(before))
        print(render_recovery(result))
        if args.execute:
            print(render_verify(after))
    return 1 if (result.changed and not args.execute) or not after.ok else 0


if __name__ == "__main__":
    sys.exit(run_job(main))
