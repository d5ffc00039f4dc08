"""spark-submit entry point (jobs layer): migrate Kafka log dirs into Delta tables.

    spark-submit jobs/migrate_delta.py [options] SRC [SRC ...] DEST

Spark tasks decode the segments and write Parquet; the driver commits each table with delta-rs;
``--writer delta-spark`` (the Delta jars on the classpath: ``--jars`` or ``--packages
io.delta:delta-spark_4.2_2.13:4.4.0``) appends with ``format("delta")`` instead, which
``auto`` does only for a table delta-rs cannot write (docs/delta.md). Incremental and
exactly-once: run it again to add only what is new (see docs/delta.md). Written unless ``--dry-run`` (new output, as ``kafkalog migrate``).
Prints the run's metrics as JSON; exit code 0 on success (or everything up to date), 1 for a
dry run that would migrate something, 2 on a library error (no Kafka data, a topic that is not
there, data loss, corrupt input, a table another run holds).
"""

from __future__ import annotations

import argparse
import json
import sys

from kafkalog_spark.delta import migrate
from kafkalog_spark.delta.migrate import pending
from kafkalog_spark.report import run_job
from kafkalog_spark.spark import session, session_storage_options
from kafkalog_spark.storage.options import normalize_options


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("paths", nargs="+", help="log dirs, then the destination")
    parser.add_argument("--topics", default=None, help="comma-separated topics")
    parser.add_argument("--topic-pattern", default=None)
    parser.add_argument("--layout", default="per-topic", choices=["per-topic", "single"])
    parser.add_argument("--partition-by", default=None, help="topic,partition,date")
    parser.add_argument("--no-headers", action="store_true")
    parser.add_argument("--no-metadata", action="store_true")
    parser.add_argument("--isolation-level", default="read_uncommitted",
                        choices=["read_uncommitted", "read_committed"])
    parser.add_argument("--no-decode-internal", action="store_true")
    parser.add_argument("--no-fail-on-data-loss", action="store_true")
    parser.add_argument("--writer", default="auto", choices=["auto", "delta-rs", "delta-spark"])
    parser.add_argument("--dry-run", action="store_true")
    parser.add_argument("--single-writer", action="store_true",
                        help="accept one migration at a time on a store without conditional "
                             "writes")
    parser.add_argument("--remote-tier", default=None,
                        help="tiered storage: the remote tier's folder or bucket URI")
    parser.add_argument("--remote-tier-layout", default=None,
                        help="the remote tier's layout (default local-tiered-storage)")
    parser.add_argument("--storage-option", action="append", default=[], metavar="NAME=VALUE",
                        help="object-store option (over the session's spark.hadoop.fs.s3a.*)")
    args = parser.parse_args(argv)
    if len(args.paths) < 2:
        parser.error("give at least one SRC and a DEST")
    *sources, dest = args.paths
    spark = session(app_name="kafkalog-migrate-delta")
    storage = {**session_storage_options(spark),
               **normalize_options(dict(o.partition("=")[::2] for o in args.storage_option))}
    metrics = migrate(sources, dest, spark=spark, dry_run=args.dry_run, topics=args.topics,
                      topic_pattern=args.topic_pattern, layout=args.layout,
                      partition_by=args.partition_by, include_headers=not args.no_headers,
                      include_metadata=not args.no_metadata,
                      isolation_level=args.isolation_level,
                      decode_internal=not args.no_decode_internal,
                      fail_on_data_loss=not args.no_fail_on_data_loss, writer=args.writer,
                      engine="spark", single_writer=args.single_writer,
                      remote_tier=args.remote_tier, remote_tier_layout=args.remote_tier_layout,
                      storage_options=storage or None)
    print(json.dumps(metrics, indent=2))
    return 1 if args.dry_run and pending(metrics) else 0


if __name__ == "__main__":
    sys.exit(run_job(main))
