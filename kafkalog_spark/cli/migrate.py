"""``kafkalog migrate`` (entry-point layer): Kafka log dirs into Delta tables, incrementally.

Writes only DEST (new output: written unless ``--dry-run``); the log dirs are read-only. Run
it again to add what is new: every record lands exactly once. Exit code 0 when the run
finished or everything was up to date, 1 for a ``--dry-run`` that would migrate something, 2
when it failed (no Kafka data, a topic that is not there, data loss with
``--fail-on-data-loss``, corrupt input, a table another run holds). By default the run is local
(no JVM); ``--spark`` runs Spark tasks.
"""

from __future__ import annotations

import json
import sys

import click

from ..delta.migrate import migrate, pending
from ..storage import user_paths
from .options import PathOrURI, parse_storage_options, remote_tier_options, storage_option
from .progress import Progress, progress_option, segment_files


def render(metrics: dict) -> str:
    """The run's metrics as text: one line per table, then the totals."""
    verb = "would migrate" if metrics["dry_run"] else "migrated"
    lines = []
    for t in metrics["tables"]:
        windows = t["partitions"]
        n = sum(end - start for start, end in windows.values())
        if not windows:
            lines.append(f"{t['path']}: up to date")
            continue
        head = f"{t['path']}: {verb} offsets of {len(windows)} partitions (span {n:,})"
        if not metrics["dry_run"]:
            head += f", {t['records']:,} records in {t['files']} files, version {t['version']}"
        lines.append(head)
    for gap in metrics["data_loss"]:
        lines.append(f"DATA LOSS {gap['topic']}-{gap['partition']} [{gap['from']}, {gap['to']}): "
                     f"{gap['reason']}")
    for f in metrics["cleaned"]:
        lines.append(f"deleted uncommitted file of a killed run: {f}")
    run = f"(engine {metrics['engine']}, writer {metrics['writer']}, run {metrics['run_id']})"
    n = pending(metrics)
    if not n:
        lines.append(f"up to date: nothing new to migrate {run}")
    elif metrics["dry_run"]:
        lines.append(f"would migrate {n} partitions into {len(metrics['tables'])} tables {run}; "
                     "run again without --dry-run")
    else:
        lines.append(f"done: {metrics['records']:,} records, {metrics['files']} files, "
                     f"{metrics['commits']} commits {run}")
    return "\n".join(lines)


@click.command("migrate")
@click.argument("src", nargs=-1, required=True, type=PathOrURI(exists=True))
@click.argument("dest", type=PathOrURI(file_okay=False))
@click.option("--topic", "topics", multiple=True, help="Migrate this topic (repeatable).")
@click.option("--topic-pattern", default=None, help="Regular expression topics must match.")
@click.option("--layout", type=click.Choice(["per-topic", "single"]), default="per-topic",
              show_default=True, help="One table per topic (DEST/<topic>) or one table at DEST.")
@click.option("--partition-by", default=None,
              help="Comma-separated Delta partition columns among topic, partition, date.")
@click.option("--headers/--no-headers", default=True, show_default=True,
              help="Keep the headers column.")
@click.option("--metadata/--no-metadata", default=True, show_default=True,
              help="Keep the Kafka metadata columns.")
@click.option("--control/--no-control", default=False, show_default=True,
              help="Keep transaction markers (isControl rows): what restore needs.")
@click.option("--isolation-level", type=click.Choice(["read_uncommitted", "read_committed"]),
              default="read_uncommitted", show_default=True,
              help="read_committed leaves out aborted transactions' records and markers.")
@click.option("--decode-internal/--no-decode-internal", default=True, show_default=True,
              help="Typed columns for __consumer_offsets / __transaction_state / "
                   "__remote_log_metadata.")
@click.option("--fail-on-data-loss/--no-fail-on-data-loss", default=True, show_default=True,
              help="Stop when retention deleted records not yet migrated.")
@click.option("--app-id-prefix", default="kafkalog", show_default=True,
              help="Prefix of the Delta application-transaction ids.")
@click.option("--spark", "use_spark", is_flag=True, help="Run Spark tasks (default: local).")
@click.option("--writer", type=click.Choice(["auto", "delta-rs", "delta-spark"]), default="auto",
              show_default=True,
              help="Who commits: delta-rs, or delta-spark (needs --spark and the Delta jars); "
                   "auto: delta-rs, delta-spark for a table delta-rs cannot write.")
@click.option("--master", default=None, help="Spark master for --spark (default local[*]).")
@click.option("--dry-run", is_flag=True, help="Only plan; write nothing.")
@click.option("--json", "as_json", is_flag=True, help="Print the metrics as JSON.")
@click.option("--single-writer", is_flag=True,
              help="DEST is on an object store whose writes are not conditional: accept that "
                   "one migration at a time writes each table (refused otherwise).")
@storage_option
@click.option("--source-storage-option", "source_storage_options", multiple=True,
              metavar="NAME=VALUE", callback=parse_storage_options,
              help="Store option for the SRC log dirs when they differ from DEST's.")
@remote_tier_options
@progress_option
def command(src: tuple[str, ...], dest: str, topics: tuple[str, ...], topic_pattern: str | None,
            layout: str, partition_by: str | None, headers: bool, metadata: bool, control: bool,
            isolation_level: str, decode_internal: bool, fail_on_data_loss: bool,
            app_id_prefix: str, use_spark: bool, writer: str, master: str | None, dry_run: bool,
            as_json: bool, single_writer: bool, storage_options: dict[str, str] | None,
            source_storage_options: dict[str, str] | None, remote_tier: str | None,
            remote_tier_layout: str | None, remote_tier_private_key: tuple[str, ...],
            progress: bool | None) -> None:
    """Migrate the records of Kafka log dirs SRC... into Delta tables under DEST.

    Each run continues where the last stopped (offsets recorded in the tables as Delta
    application transactions); a killed run leaves nothing visible and the next run completes
    it.
    """
    spark = None
    if use_spark:
        from ..spark import session

        spark = session(master, app_name="kafkalog-migrate")
    # with --spark the tasks read the files in other processes: the line shows elapsed time
    sources = user_paths(src, source_storage_options or storage_options)
    files = (lambda: []) if use_spark else (lambda: segment_files(sources))
    with Progress("migrate", enabled=progress, files=files):
        metrics = migrate(sources, dest, spark=spark, dry_run=dry_run,
                          storage_options=storage_options, single_writer=single_writer,
                          topics=list(topics) or None, topic_pattern=topic_pattern,
                          layout=layout, partition_by=partition_by, include_headers=headers,
                          include_metadata=metadata, include_control=control,
                          isolation_level=isolation_level,
                          decode_internal=decode_internal, fail_on_data_loss=fail_on_data_loss,
                          app_id_prefix=app_id_prefix, remote_tier=remote_tier,
                          remote_tier_layout=remote_tier_layout,
                          remote_tier_private_key=list(remote_tier_private_key) or None,
                          engine="spark" if use_spark else "local", writer=writer)
    click.echo(json.dumps(metrics, indent=2) if as_json else render(metrics))
    if dry_run and pending(metrics):
        sys.exit(1)
