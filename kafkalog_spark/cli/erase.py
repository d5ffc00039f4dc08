"""``kafkalog erase`` (entry-point layer): remove every record with one of a set of keys from a
stopped broker's log dirs, and prove it.

Exit code 0 when the run finished (``--check``: no matching record is left), 1 when ``--check``
finds matching records, 2 when the command failed (a missing or empty keys file, a log dir a
broker holds).
"""

from __future__ import annotations

import json
import sys

import click

from ..compaction.erase import DEFAULT_MAX_KEYS, erase, read_keys
from ..delta.erase import erase_table
from ..log.atomic import atomic_write_text
from .options import PathOrURI


def render(report: dict, check: bool) -> str:
    """The audit report as text: per partition, per table, then the key set's totals."""
    state = "left" if check else "erased" if report["executed"] else "to erase"
    rows = "left" if check else "deleted" if report["executed"] else "to delete"
    lines = [f"{p['partition']}: {p['records_removed']:,} records {state} in "
             f"{len(p['segments_rewritten'])} of {p['segments_scanned']} segments"
             + (f", offsets {p['offset_ranges']}" if p["offset_ranges"] else "")
             for p in report["partitions"]]
    for t in report.get("tables", []):
        lines.append(f"{t['table']}: {t['rows_matching']:,} rows {rows}"
                     + (f" (version {t['version']})" if "version" in t else ""))
        if "vacuum" in t:
            lines.append(f"  note: {t['vacuum']}")
    lines.append(f"{report['topic']}: {report['records_removed']:,} records {state}; key set "
                 f"{report['keys']:,} keys, sha256 {report['key_set_sha256']}")
    return "\n".join(lines)


@click.command("erase")
@click.argument("log_dirs", nargs=-1, required=True,
                type=PathOrURI(exists=True, file_okay=False))
@click.option("--topic", required=True, help="The topic to erase records from.")
@click.option("--keys", "keys_file", required=True, type=click.Path(dir_okay=False),
              help="File of keys, one per line.")
@click.option("--keys-encoding", type=click.Choice(["utf8", "hex", "base64"]), default="utf8",
              show_default=True, help="How each line of --keys spells its key.")
@click.option("--max-keys", type=click.IntRange(1), default=DEFAULT_MAX_KEYS, show_default=True,
              help="Keys held at a time (more keys: one more pass per chunk).")
@click.option("--table", "tables", multiple=True, type=PathOrURI(exists=True, file_okay=False),
              help="Also delete the rows from this migrate table (or folder of per-topic "
                   "tables); repeatable.")
@click.option("--dry-run", is_flag=True, help="Report what would be erased; change nothing.")
@click.option("--check", is_flag=True, help="Exit 1 if any matching record is left.")
@click.option("--report", "report_file", type=click.Path(dir_okay=False),
              help="Also write the audit report (JSON) to this file.")
@click.option("--json", "as_json", is_flag=True, help="Print the audit report as JSON.")
def command(log_dirs: tuple[str, ...], topic: str, keys_file: str, keys_encoding: str,
            max_keys: int, tables: tuple[str, ...], dry_run: bool, check: bool,
            report_file: str | None, as_json: bool) -> None:
    """Erase every record of TOPIC whose key is in the --keys file from the log dirs: affected
    segments are rewritten without those records (other offsets, batches and producer state
    kept) through the crash-safe .cleaned/.swap replacement; untouched segments are not
    rewritten. With --table, the same rows are deleted from the migrate tables (Delta DELETE;
    vacuum instructions printed). The audit report names counts, offset ranges and a SHA-256
    of the key set, never a key or a value.
    """
    keys = read_keys(keys_file, keys_encoding)
    execute = not (dry_run or check)
    report = erase(list(log_dirs), topic, keys, execute_plan=execute, max_keys=max_keys)
    report["tables"] = [t for path in tables
                        for t in erase_table(path, topic, keys, execute_plan=execute)]
    if report_file:
        atomic_write_text(report_file, json.dumps(report, indent=2) + "\n")
    click.echo(json.dumps(report, indent=2) if as_json else render(report, check))
    if check and (report["records_removed"] or any(t["rows_matching"] for t in report["tables"])):
        sys.exit(1)
