"""``kafkalog recover`` (entry-point layer): repair stopped brokers' log dirs, losing nothing.

A dry run unless ``--execute``. Exit code 0 when nothing needed doing (or everything planned
was done), 1 for a dry run that found work to do, 2 when the command failed (a locked log dir,
a path that is not a log dir).
"""

from __future__ import annotations

import json
import sys

import click

from ..recovery.recover import recover
from ..report import render_recovery
from .options import PathOrURI, refuse_remote_tier
from .progress import Progress, progress_option, segment_files


@click.command("recover")
@refuse_remote_tier("recover")
@click.argument("log_dirs", nargs=-1, required=True,
                type=PathOrURI(exists=True, file_okay=False))
@click.option("--execute", is_flag=True, help="Change the disk (default: dry run, only plan).")
@click.option("--quarantine", "quarantine_dir", type=click.Path(file_okay=False),
              help="Quarantine root (default: <log dir>.kafkalog-quarantine next to the log dir).")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@click.option("--salvage", is_flag=True,
              help="Keep every valid batch after damage: drop only the damaged byte ranges "
                   "(into the quarantine) instead of cutting the partition there.")
@progress_option
def command(log_dirs: tuple[str, ...], execute: bool, quarantine_dir: str | None,
            as_json: bool, salvage: bool, progress: bool | None) -> None:
    """Finish interrupted swaps, split segments whose offsets overflow their base offset's int32
    range (as Kafka's loader does, nothing cut), cut each partition at its first invalid batch
    (the cut bytes and later segments go to a quarantine with a SHA-256 manifest), rebuild
    indexes, producer snapshots, leader-epoch and offset checkpoints — all as a broker's load
    does, in the segments it recovers (without a clean shutdown the one holding the recovery
    point and every later one). The other segments are left as it leaves them; what is wrong
    in them is listed ("left:") with the command that repairs it (`kafkalog rebuild-index`,
    `--salvage`). Refuses a log dir a broker holds.

    With --salvage, damaged ranges are dropped and every valid batch after them kept (an
    offset gap where each was); a default run reports what --salvage would keep.
    """
    with Progress("recover", enabled=progress, files=lambda: segment_files(list(log_dirs))):
        report = recover(list(log_dirs), execute_plan=execute, quarantine_dir=quarantine_dir,
                         step=None, salvage=salvage)
    click.echo(json.dumps(report.to_dict(), indent=2) if as_json else render_recovery(report))
    if report.changed and not execute:
        sys.exit(1)
