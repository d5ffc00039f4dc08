"""Erase from Delta (Delta layer): the rows of a topic that an erase selection matches (a key set
or a ``--where`` predicate), deleted from the tables ``migrate`` wrote, so one ``kafkalog
erase`` run covers the log dirs and the lake.

The table is scanned a batch at a time with the same matchers as the log dirs
(:mod:`kafkalog_spark.compaction.erase_select`: one SQL engine, DataFusion, for both copies),
collecting the ``(partition, offset)`` of each matching row; one delta-rs MERGE then deletes
exactly those rows in a single commit, rewriting only the files that hold them. A table with a
feature delta-rs cannot write (deletion vectors, :mod:`.features`) is read with its vectors
applied (:mod:`.scan`) and the same MERGE runs through delta-spark instead, on the run's Spark
session with the Delta jars (``jobs/erase.py``, ``kafkalog erase --spark``); without one it is
refused before any log dir or table changes. The table's
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
from ..errors import InvalidOptionError
from ..storage.atomic import atomic_write_text
from .commit import delta_table
from .features import refusal, unwritable
from .restore import migrate_tables
from .scan import scan, table_schema

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
    found = [migrate_tables(Path(t), _needed(selection), "erase") for t in tables]
    if execute_plan:  # refused before anything changes: a table no writer here can change
        for path in (p for paths in found for p in paths):
            _writer(path, spark)
    report = erase_selected(list(log_dirs), topic, selection, execute_plan=execute_plan,
                            spark=spark)
    report["tables"] = [t for path in tables
                        for t in erase_table(path, topic, selection, execute_plan=execute_plan,
                                             spark=spark)]
    if report_file:
        atomic_write_text(report_file, json.dumps(report, indent=2) + "\n")
    return report


def erase_table(table: str | os.PathLike[str], topic: str, selection: Selection, *,
                execute_plan: bool = False, spark: Any = None) -> list[dict]:
    """Delete ``topic``'s rows that ``selection`` matches from the migrate table(s) at
    ``table`` (a single-layout table, or the folder of per-topic tables). Returns per table the
    rows matching before (``execute_plan=False``: what is left) and, when executed, the new
    version.

    Raises
    ------
    InvalidOptionError
        Not a table written by ``migrate`` (:func:`~.restore.migrate_tables`), or (executing)
        a table delta-rs cannot write and no ``spark`` session with the Delta jars.
    KafkaLogError
        The predicate names a column the table does not have, or fails on its rows.
    """
    out = []
    for path in migrate_tables(Path(table), _needed(selection), "erase"):
        writer = _writer(path, spark) if execute_plan else None
        matches = _matching_rows(path, topic, selection)
        entry = {"table": str(path), "rows_matching": matches.num_rows}
        if writer is not None and matches.num_rows:
            on = f"t.topic = '{topic}' AND t.partition = s.partition AND t.offset = s.offset"
            if writer == "delta-spark":
                _delete_with_spark(spark, path, matches, on)
            else:
                (delta_table(path).merge(matches, predicate=on, source_alias="s",
                                         target_alias="t").when_matched_delete().execute())
            entry["version"] = delta_table(path).version()
            entry["vacuum"] = VACUUM_HINT
        out.append(entry)
    return out


def _needed(selection: Selection) -> tuple[str, ...]:
    return ("topic", "partition", "offset") + (("key",) if selection.keys is not None else ())


def _writer(path: Path, spark: Any) -> str:
    """Who deletes from the table: delta-rs, or delta-spark for a table delta-rs cannot write
    (refused without a session that has the Delta jars)."""
    features = unwritable(path)
    if not features:
        return "delta-rs"
    from .spark_job import delta_jars_available

    if spark is None or not delta_jars_available(spark):
        raise InvalidOptionError(refusal(path, features, "write", "run kafkalog erase "
                                         "--spark (or jobs/erase.py) with the Delta jars on "
                                         "the classpath (docs/delta.md)"))
    return "delta-spark"


def _delete_with_spark(spark: Any, path: Path, matches: pa.Table, on: str) -> None:
    """The rows ``matches`` names deleted from the table by one delta-spark MERGE (it writes
    deletion vectors where the table has them on)."""
    from delta.tables import DeltaTable

    # one chunk: pyspark 4.2 drops rows of a multi-chunk table with empty chunks
    source = spark.createDataFrame(matches.combine_chunks())
    (DeltaTable.forPath(spark, str(path)).alias("t").merge(source.alias("s"), on)
     .whenMatchedDelete().execute())


def _matching_rows(path: Path, topic: str, selection: Selection) -> pa.Table:
    """``(partition, offset)`` of the rows of ``topic`` in the table at ``path`` that the
    selection matches, read a batch at a time."""
    schema = table_schema(path)
    have = set(schema.names)
    found: list[pa.Table] = []
    for matcher in selection.matchers():
        need = ["topic", "partition", "offset"] + [c for c in matcher.options.columns or ()
                                                   if c in have and c not in ("partition",
                                                                              "offset")]
        matcher.select(schema.empty_table().select(need), str(path))  # columns there?
        for batch in scan(path, need):
            rows = pa.Table.from_batches([batch])
            rows = rows.filter(pc.fill_null(pc.equal(rows.column("topic"), topic), False))
            if rows.num_rows:
                hit = matcher.select(rows, str(path))
                found.append(rows.select(["partition", "offset"]).take(pa.array(hit, pa.int64())))
    schema = pa.schema([("partition", pa.int32()), ("offset", pa.int64())])
    return pa.concat_tables(found).cast(schema) if found else schema.empty_table()
