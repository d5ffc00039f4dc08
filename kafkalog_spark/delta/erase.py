"""Erase from Delta (Delta layer): the rows of a topic that an erase selection matches (a key set
or a ``--where`` predicate), deleted from the tables ``migrate`` wrote, so one ``kafkalog
erase`` run covers the log dirs and the lake.

The table is scanned a batch at a time with the same matchers as the log dirs
(:mod:`kafkalog_spark.compaction.erase_select`: one SQL engine, DataFusion, for both copies),
collecting the ``(partition, offset)`` of each matching row; one delta-rs MERGE then deletes
exactly those rows in a single commit, rewriting only the files that hold them. The table's
current version no longer holds them, but older versions' files still do until they are
vacuumed — the report says how. Without ``execute_plan`` (the default: a dry run) the matching
rows are only counted.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from ..compaction.erase import erase_selected
from ..compaction.erase_select import Selection
from ..storage.atomic import atomic_write_text
from .commit import delta_table
from .restore import migrate_tables

VACUUM_HINT = ("deleted rows stay in the files of earlier table versions until those are "
               "vacuumed: DeltaTable(path).vacuum(retention_hours=0, "
               "enforce_retention_duration=False, dry_run=False) (delta-rs), or VACUUM path "
               "RETAIN 0 HOURS (Spark with spark.databricks.delta.retentionDurationCheck."
               "enabled=false) — this also ends time travel to those versions")


def erase_everywhere(log_dirs: Sequence[str | os.PathLike[str]], topic: str,
                     selection: Selection, tables: Sequence[str | os.PathLike[str]] = (), *,
                     execute_plan: bool = False, report_file: str | None = None,
                     spark: Any = None) -> dict:
    """One erase run over the log dirs and the migrate ``tables`` (what ``kafkalog erase`` and
    ``jobs/erase.py`` run): the log dirs' audit report with a ``tables`` entry, also written
    to ``report_file`` (JSON) when given."""
    report = erase_selected(list(log_dirs), topic, selection, execute_plan=execute_plan,
                            spark=spark)
    report["tables"] = [t for path in tables
                        for t in erase_table(path, topic, selection, execute_plan=execute_plan)]
    if report_file:
        atomic_write_text(report_file, json.dumps(report, indent=2) + "\n")
    return report


def erase_table(table: str | os.PathLike[str], topic: str, selection: Selection, *,
                execute_plan: bool = False) -> list[dict]:
    """Delete ``topic``'s rows that ``selection`` matches from the migrate table(s) at
    ``table`` (a single-layout table, or the folder of per-topic tables). Returns per table the
    rows matching before (``execute_plan=False``: what is left) and, when executed, the new
    version.

    Raises
    ------
    InvalidOptionError
        Not a table written by ``migrate`` (:func:`~.restore.migrate_tables`).
    KafkaLogError
        The predicate names a column the table does not have, or fails on its rows.
    """
    out = []
    needed = ("topic", "partition", "offset") + (("key",) if selection.keys is not None else ())
    for path in migrate_tables(Path(table), needed, "erase"):
        matches = _matching_rows(path, topic, selection)
        entry = {"table": str(path), "rows_matching": matches.num_rows}
        if execute_plan and matches.num_rows:
            (delta_table(path).merge(matches, predicate=f"t.topic = '{topic}' AND t.partition = "
                                     "s.partition AND t.offset = s.offset",
                                     source_alias="s", target_alias="t")
             .when_matched_delete().execute())
            entry["version"] = delta_table(path).version()
            entry["vacuum"] = VACUUM_HINT
        out.append(entry)
    return out


def _matching_rows(path: Path, topic: str, selection: Selection) -> pa.Table:
    """``(partition, offset)`` of the rows of ``topic`` in the table at ``path`` that the
    selection matches, read a batch at a time."""
    dataset = delta_table(path).to_pyarrow_dataset()
    have = set(dataset.schema.names)
    found: list[pa.Table] = []
    for matcher in selection.matchers():
        need = ["topic", "partition", "offset"] + [c for c in matcher.options.columns or ()
                                                   if c in have and c not in ("partition",
                                                                              "offset")]
        matcher.select(dataset.schema.empty_table().select(need), str(path))  # columns there?
        for batch in dataset.to_batches(columns=need):
            rows = pa.Table.from_batches([batch])
            rows = rows.filter(pc.fill_null(pc.equal(rows.column("topic"), topic), False))
            if rows.num_rows:
                hit = matcher.select(rows, str(path))
                found.append(rows.select(["partition", "offset"]).take(pa.array(hit, pa.int64())))
    schema = pa.schema([("partition", pa.int32()), ("offset", pa.int64())])
    return pa.concat_tables(found).cast(schema) if found else schema.empty_table()
