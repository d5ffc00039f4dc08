"""``kafkalog erase`` (entry-point layer): remove every record with one of a set of keys, or
matching a SQL predicate, from a stopped broker's log dirs (and migrate tables), and prove it.

It changes log dirs and tables in place, so it only plans unless ``--execute`` (``--dry-run``,
from before that rule, is the same plan). Exit code 0 when nothing matches (or everything
planned was erased), 1 for a plan (or ``--check``) that finds matching records, 2 when the
command failed (a missing or empty keys file, a predicate that does not parse, a topic that is
not there, a log dir a broker holds).
"""

from __future__ import annotations

import json
import sys

import click

from ..compaction.erase_select import DEFAULT_MAX_KEYS, Selection, read_keys
from ..delta.erase import erase_everywhere
from ..errors import InvalidOptionError
from ..report import anything_left, render_erase
from .options import PathOrURI, refuse_remote_tier


@click.command("erase")
@refuse_remote_tier("erase")
@click.argument("log_dirs", nargs=-1, required=True,
                type=PathOrURI(exists=True, file_okay=False))
@click.option("--topic", required=True, help="The topic to erase records from.")
@click.option("--keys", "keys_file", type=click.Path(dir_okay=False),
              help="File of keys, one per line.")
@click.option("--where", help="Instead of --keys: a SQL predicate (DataFusion's dialect) on "
                              "the record columns, e.g. \"key = X'6b37'\" or \"timestamp < "
                              "'2024-01-01T00:00:00Z'\".")
@click.option("--keys-encoding", type=click.Choice(["utf8", "hex", "base64"]), default="utf8",
              show_default=True, help="How each line of --keys spells its key.")
@click.option("--max-keys", type=click.IntRange(1), default=DEFAULT_MAX_KEYS, show_default=True,
              help="Keys held at a time (more keys: one more pass per chunk).")
@click.option("--table", "tables", multiple=True, type=PathOrURI(exists=True, file_okay=False),
              help="Also delete the rows from this migrate table (or folder of per-topic "
                   "tables); repeatable.")
@click.option("--execute", is_flag=True,
              help="Erase: rewrite the segments and tables (default: dry run, only plan).")
@click.option("--dry-run", is_flag=True,
              help="Only plan: the default (accepted for scripts written before --execute).")
@click.option("--check", is_flag=True,
              help="Only report what is left: exit 1 if any matching record or row is.")
@click.option("--spark", "use_spark", is_flag=True,
              help="Run Spark tasks; with the Delta jars on the classpath, tables delta-rs "
                   "cannot write (deletion vectors) are changed through delta-spark.")
@click.option("--master", default=None, help="Spark master for --spark (default local[*]).")
@click.option("--report", "report_file", type=click.Path(dir_okay=False),
              help="Also write the audit report (JSON) to this file.")
@click.option("--json", "as_json", is_flag=True, help="Print the audit report as JSON.")
def command(log_dirs: tuple[str, ...], topic: str, keys_file: str | None, where: str | None,
            keys_encoding: str, max_keys: int, tables: tuple[str, ...], execute: bool,
            dry_run: bool, check: bool, use_spark: bool, master: str | None,
            report_file: str | None, as_json: bool) -> None:
    """Erase every record of TOPIC whose key is in the --keys file (or that --where selects)
    from the log dirs: affected segments are rewritten without those records (other offsets,
    batches and producer state kept) through the crash-safe .cleaned/.swap replacement;
    untouched segments are not rewritten. With --table, the same rows are deleted from the
    migrate tables (one Delta MERGE per table; vacuum instructions printed). The audit report names counts, offset ranges and a SHA-256
    of the key set (or predicate), never a key or a value.
    """
    if (keys_file is None) == (where is None):
        raise InvalidOptionError("give exactly one of --keys FILE and --where PREDICATE")
    if execute and (dry_run or check):
        raise click.UsageError("--execute erases; --dry-run and --check only look: give one")
    keys = read_keys(keys_file, keys_encoding) if keys_file is not None else None
    spark = None
    if use_spark:
        from ..spark import session

        spark = session(master, app_name="kafkalog-erase")
    report = erase_everywhere(log_dirs, topic, Selection(keys, where, max_keys), tables,
                              execute_plan=execute, report_file=report_file, spark=spark)
    click.echo(json.dumps(report, indent=2) if as_json else render_erase(report, check))
    if not execute and anything_left(report):
        sys.exit(1)
