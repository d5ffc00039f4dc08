"""spark-submit entry point (jobs layer): erase a topic's records matching a key set or a SQL
predicate from log dirs (and migrate tables), one Spark task per segment.

    spark-submit jobs/erase.py --topic T (--keys FILE [--keys-encoding E] | --where SQL)
        [--table LAKE ...] [--execute | --dry-run | --check] [--report FILE] [--json] LOG_DIR [...]

Every executor must see the log dirs at the same paths (shared storage); the driver holds each
log dir's ``.lock`` and swaps the rewritten segments in
(:func:`kafkalog_spark.compaction.erase.erase` with ``spark=``), then deletes the same rows
from the ``--table`` migrate tables. A dry run unless ``--execute`` (``--dry-run``: the same
plan). Exit code 0 when the run finished or nothing matches, 1 for a plan (or ``--check``)
that finds matching records, 2 on a library error — as ``kafkalog erase``.
"""

from __future__ import annotations

import argparse
import json
import sys

from kafkalog_spark.compaction.erase_select import DEFAULT_MAX_KEYS, Selection, read_keys
from kafkalog_spark.delta.erase import erase_everywhere
from kafkalog_spark.report import anything_left, render_erase, run_job
from kafkalog_spark.spark import session


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("log_dirs", nargs="+")
    parser.add_argument("--topic", required=True)
    which = parser.add_mutually_exclusive_group(required=True)
    which.add_argument("--keys", help="file of keys, one per line")
    which.add_argument("--where", help="SQL predicate on the record columns")
    parser.add_argument("--keys-encoding", choices=["utf8", "hex", "base64"], default="utf8")
    parser.add_argument("--max-keys", type=int, default=DEFAULT_MAX_KEYS)
    parser.add_argument("--table", action="append", default=[], help="also this migrate table")
    look = parser.add_mutually_exclusive_group()
    look.add_argument("--execute", action="store_true", help="erase (default: plan)")
    look.add_argument("--dry-run", action="store_true", help="only plan (the default)")
    look.add_argument("--check", action="store_true", help="exit 1 if anything matching is left")
    parser.add_argument("--report", help="also write the audit report (JSON) here")
    parser.add_argument("--json", action="store_true", help="print JSON")
    args = parser.parse_args(argv)
    keys = read_keys(args.keys, args.keys_encoding) if args.keys else None
    selection = Selection(keys, args.where, args.max_keys)
    report = erase_everywhere(args.log_dirs, args.topic, selection, args.table,
                              execute_plan=args.execute, report_file=args.report,
                              spark=session(app_name="kafkalog-erase"))
    print(json.dumps(report, indent=2) if args.json else render_erase(report, args.check))
    return 1 if not args.execute and anything_left(report) else 0

if __name__ == "__main__":
    sys.exit(run_job(main))
