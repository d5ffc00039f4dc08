"""``kafkalog rebuild-index`` (entry-point layer): ``.index``/``.timeindex``/``.txnindex`` rebuilt
as Kafka's segment recovery builds them; a dry run unless ``--execute``.

Exit code 0 when nothing needed rewriting (or it was rewritten), 1 for a dry run with work to
do, 2 when the command failed.
"""

from __future__ import annotations

import json
import sys

import click

from ..recovery.rebuild import INDEX_KINDS, RebuildReport, rebuild_indexes
from .options import PathOrURI, refuse_symlinked_files
from .progress import Progress, progress_option, segment_files


def render(report: RebuildReport) -> str:
    """The plan (or what was written) as text, one line per index file."""
    lines = [a.describe() for a in report.actions]
    lines.extend(f"note: {n}" for n in report.notes)
    if report.quarantine:
        lines.append(f"replaced files kept in: {report.quarantine}")
    n = len(report.actions)
    verb = "wrote" if report.executed else "would write"
    lines.append(f"{report.segments} segments, {report.bytes:,} bytes: "
                 + ("nothing to rebuild" if not n else f"{verb} {n} index files")
                 + ("" if report.executed or not n else "; run again with --execute"))
    return "\n".join(lines)


@click.command("rebuild-index")
@click.argument("paths", nargs=-1, required=True, type=PathOrURI(exists=True))
@click.option("--execute", is_flag=True, help="Write the files (default: dry run).")
@click.option("--force", is_flag=True,
              help="Rewrite every index that differs from recovery's, even a consistent one.")
@click.option("--kind", "kinds", multiple=True, type=click.Choice(INDEX_KINDS),
              help="Only these index kinds (repeatable; default all three).")
@click.option("--quarantine", "quarantine_dir", type=click.Path(file_okay=False),
              help="Where replaced index contents are kept.")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@progress_option
def command(paths: tuple[str, ...], execute: bool, force: bool, kinds: tuple[str, ...],
            quarantine_dir: str | None, as_json: bool, progress: bool | None) -> None:
    """Rebuild missing, inconsistent (or with --force, all) index files of log dirs, partition
    dirs or .log files. Replaced files are kept in the quarantine. Refuses a locked log dir."""
    refuse_symlinked_files(paths)
    with Progress("rebuild-index", enabled=progress, files=lambda: segment_files(list(paths))):
        report = rebuild_indexes(list(paths), execute_plan=execute, force=force,
                                 kinds=kinds or INDEX_KINDS, quarantine_dir=quarantine_dir)
    click.echo(json.dumps(report.to_dict(), indent=2) if as_json else render(report))
    if report.actions and not execute:
        sys.exit(1)
