"""``kafkalog retain`` (entry-point layer): delete old segments by Kafka's retention rules.

A dry run unless ``--execute``. Exit code 0 when nothing was due (or everything planned was
done), 1 for a dry run that found segments to delete, 2 when the command failed.
"""

from __future__ import annotations

import json
import sys

import click

from ..retention.retain import RetentionResult, retain
from .options import maintenance_options, parse_config_options


def render(result: RetentionResult) -> str:
    """The plan (or what was done) as text, one line per deleted segment."""
    verb = "deleted" if result.executed else "would delete"
    lines = []
    for p in result.plans:
        for note in p.notes:
            lines.append(f"{p.topic}-{p.partition}: note: {note}")
        if p.deletions:
            lines.append(f"{p.topic}-{p.partition}: log start offset {p.log_start_offset} -> "
                         f"{p.new_log_start_offset}")
            lines.extend(f"  {verb} segment {d.base_offset} ({d.size} bytes): {d.reason}"
                         for d in p.deletions)
    m = result.metrics
    lines.append(f"{verb} {m['segments_deleted']} segments, {m['bytes_deleted']} bytes "
                 f"({m['partitions_checked']} partitions checked, now={m['now_ms']})"
                 + ("" if result.executed or not m["segments_deleted"]
                    else "; run again with --execute"))
    return "\n".join(lines)


@click.command("retain")
@maintenance_options("retention.ms=3600000")
@click.option("--delete-delay-ms", type=int, default=0, show_default=True,
              help="Leave .deleted files for a later run older than this (0: remove now).")
@click.option("--json", "as_json", is_flag=True, help="Print the plan and metrics as JSON.")
def command(log_dirs: tuple[str, ...], execute: bool, now_ms: int | None,
            configs: tuple[str, ...], config_file: str | None, topics: tuple[str, ...],
            delete_delay_ms: int, as_json: bool) -> None:
    """Delete segments below the log start offset, beyond retention.bytes or older than
    retention.ms (never above the high watermark, never the active segment), updating
    log-start-offset-checkpoint first. Refuses a log dir a broker holds.

    The high watermark comes from replication-offset-checkpoint; a partition missing from it
    deletes nothing above its log start offset, as on a broker (its high watermark starts at
    the log start offset; a live leader would soon raise it, offline it stays there).
    """
    result = retain(list(log_dirs), execute=execute, now_ms=now_ms,
                    options=parse_config_options(configs), config_file=config_file,
                    topics=list(topics) or None, delete_delay_ms=delete_delay_ms)
    click.echo(json.dumps(result.to_dict(), indent=2) if as_json else render(result))
    if result.metrics["segments_deleted"] and not execute:
        sys.exit(1)
