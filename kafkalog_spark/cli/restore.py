"""``kafkalog restore`` (entry-point layer): a table written by ``migrate`` back into partition
dirs a broker loads, with the original offsets, timestamps, producer state and batches.

Writes only DEST_LOG_DIR (new output: written unless ``--dry-run``; an existing partition is
continued from its end); the table is read-only. Exit code 0 when the run finished or
everything was up to date, 1 for a ``--dry-run`` that would restore something, 2 when it
failed (not a migrate table, a topic the table does not hold, a missing column, a log dir a
broker holds).
"""

from __future__ import annotations

import json
import sys

import click

from ..delta.restore import restore
from ..errors import InvalidOptionError
from ..log.staging import DEFAULT_SEGMENT_BYTES
from .options import PathOrURI, refuse_remote_tier


def render(result: dict) -> str:
    """One line per partition, then the totals."""
    verb = "restored" if result["executed"] else "would restore"
    lines = []
    for p in result["partitions"]:
        if p["records"] == 0:
            lines.append(f"{p['topic']}-{p['partition']}: up to date at offset {p['from_offset']}")
            continue
        lines.append(f"{p['topic']}-{p['partition']}: {verb} offsets [{p['from_offset']}, "
                     f"{p['log_end_offset']}): {p['records']:,} records in {p['batches']:,} "
                     "batches" + (f", {p['bytes']:,} bytes in {len(p['segments'])} segments"
                                  if result["executed"] else ""))
    total = sum(p["records"] for p in result["partitions"])
    if not total:
        lines.append(f"up to date: nothing new to restore ({len(result['partitions'])} "
                     "partitions)")
    else:
        lines.append(f"{'done' if result['executed'] else 'planned'}: {total:,} records, "
                     f"{len(result['partitions'])} partitions"
                     + ("" if result["executed"] else "; run again without --dry-run"))
    return "\n".join(lines)


def _topic_ids(values: tuple[str, ...]) -> dict[str, str]:
    out = {}
    for v in values:
        topic, sep, tid = v.partition("=")
        if not sep or not topic or not tid:
            raise InvalidOptionError(f"--topic-id takes TOPIC=ID (base64url); got {v!r}")
        out[topic] = tid
    return out


@click.command("restore")
@refuse_remote_tier("restore")
@click.argument("table", type=PathOrURI(exists=True, file_okay=False))
@click.argument("dest_log_dir", type=click.Path(file_okay=False))
@click.option("--topic", "topics", multiple=True, help="Restore only this topic (repeatable).")
@click.option("--segment-bytes", type=click.IntRange(1 << 14), default=DEFAULT_SEGMENT_BYTES,
              show_default=True, help="Largest segment written (segment.bytes).")
@click.option("--topic-id", "topic_ids", multiple=True, metavar="TOPIC=ID",
              help="Topic id for new partition.metadata files (the cluster's; default: the "
                   "id in DEST_LOG_DIR, else random).")
@click.option("--allow-open-transactions", is_flag=True,
              help="Restore transactional batches of a table migrated without --control.")
@click.option("--dry-run", is_flag=True, help="Only plan; write nothing.")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
def command(table: str, dest_log_dir: str, topics: tuple[str, ...], segment_bytes: int,
            topic_ids: tuple[str, ...], allow_open_transactions: bool, dry_run: bool,
            as_json: bool) -> None:
    """Restore the topics of a Delta table written by migrate into partition dirs under
    DEST_LOG_DIR: original offsets (gaps kept), timestamps and their type, keys, values,
    headers, leader epochs, producer id/epoch/sequence, transactional flags and markers, batch
    boundaries and codecs; indexes, producer snapshots and checkpoints rebuilt. Incremental: a
    partition already there is continued from its end.
    """
    result = restore(table, dest_log_dir, topics=list(topics) or None,
                     execute_plan=not dry_run, segment_bytes=segment_bytes,
                     topic_ids=_topic_ids(topic_ids),
                     allow_open_transactions=allow_open_transactions)
    click.echo(json.dumps(result, indent=2) if as_json else render(result))
    if dry_run and any(p["records"] for p in result["partitions"]):
        sys.exit(1)
