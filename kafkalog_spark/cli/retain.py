"""``kafkalog retain`` (entry-point layer): delete old segments by Kafka's retention rules.

A dry run unless ``--execute``. Exit code 0 when nothing was due (or everything planned was
done), 1 for a dry run that found segments to delete, 2 when the command failed.
"""

from __future__ import annotations

import json
import sys

import click

from ..report import parse_config_options, render_retention
from ..retention.retain import retain
from .options import maintenance_options, refuse_remote_tier


@click.command("retain")
@refuse_remote_tier("retain")
@maintenance_options("retention.ms=3600000")
@click.option("--delete-delay-ms", type=int, default=0, show_default=True,
              help="Leave .deleted files for a later run older than this (0: remove now).")
@click.option("--json", "as_json", is_flag=True, help="Print the plan and metrics as JSON.")
def command(log_dirs: tuple[str, ...], execute: bool, now_ms: int | None,
            configs: tuple[str, ...], config_file: str | None, topics: tuple[str, ...],
            high_watermark: str, delete_delay_ms: int, as_json: bool) -> None:
    """Delete segments below the log start offset, beyond retention.bytes or older than
    retention.ms (never above the high watermark; when every segment goes, the active one
    too, an empty segment is first rolled at the log end, as a broker does), updating
    log-start-offset-checkpoint first. Refuses a log dir a broker holds.

    The high watermark comes from replication-offset-checkpoint; a partition missing from it
    deletes nothing above its log start offset, as on a broker (its high watermark starts at
    the log start offset; a live leader would soon raise it, offline it stays there) — unless
    --high-watermark log-end, for a copied dir no broker will load again.
    """
    result = retain(list(log_dirs), execute=execute, now_ms=now_ms,
                    options=parse_config_options(configs), config_file=config_file,
                    topics=list(topics) or None, delete_delay_ms=delete_delay_ms,
                    high_watermark=high_watermark)
    click.echo(json.dumps(result.to_dict(), indent=2) if as_json else render_retention(result))
    if result.metrics["segments_deleted"] and not execute:
        sys.exit(1)
