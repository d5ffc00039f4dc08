"""``kafkalog reconcile`` (entry-point layer): one log per partition from several brokers' disks.

A dry run unless ``--execute`` (a repair command: it plans first, like ``recover``). Exit code
0 when the log dir was written (or a dry run found no partition to write), 1 for a dry run
that would write partitions, 2 when the command failed (a locked log dir, a path that is not a
log dir, a destination that is not empty).
"""

from __future__ import annotations

import json
import sys

import click

from ..recovery.reconcile import reconcile
from ..report import render_reconcile
from .options import PathOrURI


@click.command("reconcile")
@click.argument("log_dirs", nargs=-1, required=True,
                type=PathOrURI(exists=True, file_okay=False))
@click.option("--dest", required=True, type=click.Path(file_okay=False),
              help="The new log dir to write (must not exist or be empty).")
@click.option("--execute", is_flag=True, help="Write --dest (default: dry run, only plan).")
@click.option("--quarantine", "quarantine_dir", type=click.Path(file_okay=False),
              help="Where divergent batches are copied (default: <dest>.kafkalog-quarantine).")
@click.option("--segment-bytes", type=click.IntRange(1 << 10), default=None,
              help="Largest segment written (default: the reference replica's largest).")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
def command(log_dirs: tuple[str, ...], dest: str, execute: bool, quarantine_dir: str | None,
            segment_bytes: int | None, as_json: bool) -> None:
    """Reconcile the same partitions from several brokers' log dirs (disks saved after losing a
    cluster) into one broker-loadable log dir: per partition the replica Kafka would have kept
    (highest leader epoch, then longest), each other replica cut where a follower would have
    truncated (leader epochs, then byte comparison), and the reference's damage, missing
    segments and shorter end filled with the others' identical batches. Divergent batches are
    copied to a quarantine; the sources are never changed.
    """
    report = reconcile(list(log_dirs), dest, execute_plan=execute, quarantine_dir=quarantine_dir,
                       segment_bytes=segment_bytes)
    click.echo(json.dumps(report.to_dict(), indent=2) if as_json else render_reconcile(report))
    if not execute and report.partitions:
        sys.exit(1)
