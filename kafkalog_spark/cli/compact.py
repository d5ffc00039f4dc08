"""``kafkalog compact`` (entry-point layer): one log-cleaner round with Kafka's rules.

A dry run unless ``--execute``. Exit code 0 when nothing was due (or everything planned was
done), 1 for a dry run that found partitions to clean, 2 when the command failed.
"""

from __future__ import annotations

import json
import sys

import click

from ..compaction.compact import ENGINES, compact
from ..compaction.key_map import DEFAULT_MEMORY, MIN_MEMORY
from ..report import parse_config_options, render_compaction
from .options import maintenance_options, refuse_remote_tier
from .progress import Progress, progress_option, segment_files


@click.command("compact")
@refuse_remote_tier("compact")
@maintenance_options("delete.retention.ms=0")
@click.option("--force", is_flag=True, help="Ignore min.cleanable.dirty.ratio.")
@click.option("--engine", type=click.Choice(ENGINES), default="local", show_default=True,
              help="Plan and rewrite in this process, or plan, shuffle keys and rewrite with "
                   "Spark.")
@click.option("--exact-keys", is_flag=True,
              help="Compare full key bytes instead of 128-bit key digests (slower; for keys an "
                   "adversary may choose to collide).")
@click.option("--dedupe-buffer-size", "dedupe_bytes", type=click.IntRange(min=MIN_MEMORY),
              default=DEFAULT_MEMORY, show_default=True, metavar="BYTES",
              help="Local engine: memory for the key map (Kafka's log.cleaner.dedupe.buffer."
                   "size); a partition with more dirty keys than it holds is cleaned in "
                   "several passes.")
@click.option("--json", "as_json", is_flag=True, help="Print the plan and metrics as JSON.")
@progress_option
def command(log_dirs: tuple[str, ...], execute: bool, now_ms: int | None,
            configs: tuple[str, ...], config_file: str | None, topics: tuple[str, ...],
            high_watermark: str, force: bool, engine: str, exact_keys: bool, dedupe_bytes: int,
            as_json: bool, progress: bool | None) -> None:
    """Compact topics whose cleanup.policy includes compact: keep the latest record per key,
    drop aborted data, tombstones and markers past their delete horizon, keep every surviving
    record's offset; swap segments in Kafka's crash-safe order and update
    cleaner-offset-checkpoint. Refuses a log dir a broker holds.
    """
    # local: segments are read partition by partition in listing order, so the furthest one
    # open tells how far the round is; Spark tasks read them elsewhere: elapsed time only
    files = (lambda: segment_files(list(log_dirs))) if engine == "local" else ()
    with Progress("compact", enabled=progress, files=files):
        result = compact(list(log_dirs), execute=execute, now_ms=now_ms,
                         options=parse_config_options(configs), config_file=config_file,
                         topics=list(topics) or None, force=force, engine=engine,
                         high_watermark=high_watermark, exact_keys=exact_keys,
                         dedupe_buffer_bytes=dedupe_bytes)
    click.echo(json.dumps(result.to_dict(), indent=2) if as_json else render_compaction(result))
    if result.plans and not execute:
        sys.exit(1)
