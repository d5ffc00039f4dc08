"""``kafkalog verify`` (entry-point layer): check log dirs and report every problem located.

Read-only. Exit code 0 when nothing is wrong (warnings allowed), 1 when any error was found,
2 when the command itself failed (a path that does not exist or holds no Kafka data, an
unreadable directory).

Local or Spark: the check runs in this process unless ``--spark`` is given or the ``.log``
files total at least ``--spark-threshold`` bytes (default
:data:`~kafkalog_spark.recovery.verify_job.SPARK_THRESHOLD_BYTES`, 16 GiB — below that one core
at ~1 GB/s beats a Spark start-up); ``--local`` forces this process. Both paths call the same
per-segment function and print the same report.
"""

from __future__ import annotations

import json
import sys

import click

from ..inspect.verify import verify
from ..log.discovery import discover
from ..log.history import found_with_remote_tier
from ..log.selection import require_kafka_data
from ..report import render_verify
from ..storage import user_paths
from ..tiered.tier import as_remote_tier
from .options import PathOrURI, refuse_symlinked_files, remote_tier_options, storage_option
from .progress import Progress, progress_option, segment_files


@click.command("verify")
@click.argument("paths", nargs=-1, required=True, type=PathOrURI(exists=True))
@click.option("--deep", is_flag=True, help="Also decompress every batch and parse every record.")
@click.option("--no-indexes", is_flag=True, help="Skip the .index/.timeindex/.txnindex checks.")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@click.option("--spark", "use_spark", is_flag=True, help="Run as a Spark job (segments in parallel).")
@click.option("--local", "use_local", is_flag=True, help="Never use Spark.")
@click.option("--master", default=None, help="Spark master for --spark (default local[*]).")
@click.option("--spark-threshold", type=int, default=None,
              help="Use Spark from this many bytes of .log files on (default 16 GiB).")
@storage_option
@remote_tier_options
@progress_option
def command(paths: tuple[str, ...], deep: bool, no_indexes: bool, as_json: bool, use_spark: bool,
            use_local: bool, master: str | None, spark_threshold: int | None,
            storage_options: dict[str, str] | None, remote_tier: str | None,
            remote_tier_layout: str | None, remote_tier_private_key: tuple[str, ...],
            progress: bool | None) -> None:
    """Check CRCs, structure, offsets, indexes, transaction indexes, producer snapshots and
    checkpoints of log dirs, partition dirs or .log files.

    Every problem names its file, byte position and base offset. Exits 1 if any error was
    found. Changes nothing on disk. With --remote-tier the remote segments are checked too
    (gaps and overlaps in a partition's history are errors).
    """
    if use_spark and use_local:
        raise click.UsageError("--spark and --local exclude each other")
    refuse_symlinked_files(paths)
    tier = as_remote_tier(remote_tier, remote_tier_layout, storage_options,
                          remote_tier_private_key)
    paths = user_paths(paths, storage_options)
    found = discover(list(paths))
    require_kafka_data(found)  # nothing to check is a wrong path, not "OK"
    if not use_local and not use_spark:
        from ..recovery.verify_job import SPARK_THRESHOLD_BYTES

        limit = SPARK_THRESHOLD_BYTES if spark_threshold is None else spark_threshold
        found = found_with_remote_tier(found, tier)
        use_spark = sum(p.size for p in found.all_partition_dirs()) >= limit
    if use_spark:
        from ..recovery.verify_job import verify_spark
        from ..spark import session

        # Spark tasks read the files in other processes: the line shows the elapsed time
        with Progress("verify (spark)", enabled=progress):
            report = verify_spark(session(master), list(paths), deep=deep,
                                  check_indexes=not no_indexes, remote_tier=tier)
    else:
        with Progress("verify", enabled=progress, files=lambda: segment_files(list(paths))):
            report = verify(list(paths), deep=deep, check_indexes=not no_indexes,
                            remote_tier=tier)
    if as_json:
        click.echo(json.dumps(report.to_dict(), indent=2))
    else:
        click.echo(render_verify(report))
    if not report.ok:
        sys.exit(1)
