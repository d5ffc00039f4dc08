"""Task-side reading of the ``kafkalog`` data source and its Spark ``DataSourceReader``
(datasource layer); the driver-side planning is :mod:`kafkalog_spark.datasource.plan`.

Each split (:func:`read_split`) maps one segment read-only, finds where to start and stop through
the (validated) offset index, and decodes ``[start, end)`` with
:func:`~kafkalog_spark.codec.records.decode.decode_entries`, yielding Arrow batches of at most
``maxRowsPerBatch`` rows in offset order. Aborted transactions are hidden from those batches
(``read_committed``). Only the columns asked for (a user schema: :mod:`.columns`) are decoded,
plus those that filter reads, dropped after filtering.

Spark's filters are not pushed into the scan (:meth:`KafkaLogReader.pushFilters`): the read is
a function of the options alone, which is what keeps every query of one DataFrame right.

Corruption with ``onCorruption=skip``: each skipped byte range is logged (logger
``kafkalog_spark.datasource``, on the executor) and can be listed Spark-free with
:func:`bad_ranges`, which runs the same plan and tasks locally.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import replace

import numpy as np
import pyarrow as pa
from pyspark.sql.datasource import DataSourceReader, InputPartition

from ..codec.records.decode import BadRange, DecodeOptions, DecodeResult, decode_entries
from ..codec.records.scan import scan_entries
from ..codec.records.schema import default_columns
from ..log.lookup import position_for_offset
from ..log.transactions import aborted_mask
from ..log.window import decode_window, read_window
from .columns import decode_columns
from .executors import planned_files
from .kafka_source import null_empty_headers
from .options import ReadOptions, parse_read_options
from .plan import SCAN_CODEC_COST, codec_weights, pack_splits, plan_scan
from .splits import KafkaLogSplit, KafkaLogTask

log = logging.getLogger("kafkalog_spark.datasource")


def read_split(split: KafkaLogSplit, opts: ReadOptions, bad: list[BadRange] | None = None,
               columns: Sequence[str] | None = None) -> Iterator[pa.RecordBatch]:
    """Decode one split into Arrow batches (schema ``record_schema(columns=columns)``; by
    default the columns ``includeHeaders`` / ``includeMetadata`` choose), rows in offset
    order, at most ``maxRowsPerBatch`` each.

    Bad byte ranges skipped with ``onCorruption=skip`` are logged and appended to ``bad``.
    """
    names = (default_columns(opts.include_headers, opts.include_metadata) if columns is None
             else tuple(columns))
    decoded = decode_columns(names, split)
    options = DecodeOptions(verify_crc=opts.verify_crc, on_error=opts.on_corruption,
                            max_rows=opts.max_rows_per_batch, columns=decoded,
                            include_control=opts.include_control)
    seg = split.segment
    # a split by offsets is found by the lookups of its offset window, not at its byte range
    begin, stop = (0, None) if split.by_offset else (split.start_position, split.end_position)
    window = read_window(seg, start=begin, end=stop,
                         min_offset=split.min_offset, max_offset=split.max_offset,
                         first_offset=split.first_offset, next_offset=split.next_offset)
    found: list[BadRange] = []
    with planned_files(seg.dir), window as w:
        start, end = _byte_range(split, w.buf, begin, stop)
        end = w.stop if end is None else end if w.stop is None else min(end, w.stop)
        if end is not None and start >= end:
            return

        def decode(lo: int, hi: int | None) -> DecodeResult:
            return decode_entries(w.buf, topic=split.topic, partition=split.partition,
                                  options=options, start=lo, end=hi,
                                  min_offset=split.min_offset, max_offset=split.max_offset,
                                  file=str(seg.log))

        for batch in decode_window(w, decode, start, end, found):
            batch = _hide_aborted(batch, split)
            if decoded != names:
                batch = batch.select(list(names))
            if batch.num_rows:
                yield batch
        for r in found:
            log.warning("skipped bytes [%d, %d) of %s (base offset %s): %s", r.start, r.end,
                        r.file, r.base_offset, r.reason)
            if bad is not None:
                bad.append(r)


def _byte_range(split: KafkaLogSplit, buf: np.ndarray, start: int, end: int | None
                ) -> tuple[int, int | None]:
    """Start and end inside bytes ``[start, end)`` through the validated offset index."""
    if split.min_offset is not None and split.min_offset > split.first_offset:
        start = max(start, position_for_offset(split.segment, split.min_offset, log_buffer=buf))
    hi = split.max_offset
    if hi is not None and (split.next_offset is None or hi < split.next_offset - 1):
        # stop after the entry holding max_offset (a batch may straddle it)
        p = position_for_offset(split.segment, hi, log_buffer=buf)
        entry = scan_entries(buf, start=p, max_entries=1)
        stop = p + int(entry.entry_size[0]) if len(entry) else p
        end = stop if end is None else min(end, stop)
    return start, end


def _hide_aborted(batch: pa.RecordBatch, split: KafkaLogSplit) -> pa.RecordBatch:
    """``batch`` without the records of the split's aborted transactions."""
    if not split.aborted:
        return batch
    hidden = aborted_mask(batch.column("producerId").to_numpy(),
                          batch.column("offset").to_numpy(),
                          batch.column("isTransactional").to_numpy(zero_copy_only=False),
                          split.aborted)
    return batch.filter(pa.array(~hidden)) if hidden.any() else batch


def bad_ranges(options: Mapping[str, str]) -> list[BadRange]:
    """Spark-free report of what ``onCorruption=skip`` skips: plan and read every split locally
    and return the bad byte ranges (file, ``[start, end)``, base offset, reason)."""
    opts = replace(parse_read_options(options), on_corruption="skip")
    out: list[BadRange] = []
    for split in plan_scan(opts).splits:
        for _ in read_split(split, opts, out):
            pass
    return out


class KafkaLogReader(DataSourceReader):
    """Spark's reader: partitions are the splits the options plan, packed into tasks
    (:func:`pack_splits`); ``read`` runs :func:`read_split` on each.

    It takes no filters (no ``pushFilters``: every filter stays with Spark). PySpark 4.1 to
    4.3.0 keep the partitions and read function planned after a filter pushdown on the
    relation (``PythonDataSourceV2.setReadInfo``) and reuse them for every later query of the
    same DataFrame that pushes no filter, so a pruned scan answered ``df.count()`` after
    ``df.where("offset >= 2490").count()`` with 20 rows. Spark's main branch keeps that plan
    per scan (SPARK-58551, in no release yet); until then pruning comes from the read options
    (``subscribe``, ``assign``, ``startingOffsets``, ``startingTimestamp``...), which belong to
    one DataFrame. (A reader with ``pushFilters`` also fails every query of a session where
    ``spark.sql.python.filterPushdown.enabled`` is off.)

    ``columns`` (from :func:`~kafkalog_spark.datasource.columns.requested_columns`; ``None``:
    the options' columns) are the only ones decoded and shipped. Given ``arrow_schema`` (the
    schema Spark reads: the source's or a user schema as Spark converts it, which may be more
    nullable) the batches are Spark's rows: labelled with it, ``headers`` null where a record
    has none (:func:`~.kafka_source.null_empty_headers`); without it (a migration's reader)
    they are ``read_log``'s."""

    def __init__(self, options: ReadOptions, columns: Sequence[str] | None = None,
                 arrow_schema: pa.Schema | None = None) -> None:
        self.options = options
        self.columns = None if columns is None else tuple(columns)
        self.output = arrow_schema

    # A future PySpark pruneColumns(requiredSchema) hook is this one line (see .columns):
    #     self.columns, self.output = scan_columns(requiredSchema, self.options)

    def partitions(self) -> list[InputPartition]:
        splits = plan_scan(self.options).splits
        return list(pack_splits(splits, self.options.max_bytes_per_partition,
                                min_tasks=self.options.min_partitions,
                                cost=codec_weights(splits, SCAN_CODEC_COST)))

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        if isinstance(partition, KafkaLogTask):
            splits: Iterable[KafkaLogSplit] = partition.splits
        elif isinstance(partition, KafkaLogSplit):
            splits = (partition,)
        else:
            return iter(())  # Spark's single placeholder partition when nothing is planned
        batches = (b for split in splits
                   for b in read_split(split, self.options, columns=self.columns))
        if self.output is None:
            return batches
        return (_relabel(null_empty_headers(b), self.output) for b in batches)


def _relabel(batch: pa.RecordBatch, schema: pa.Schema) -> pa.RecordBatch:
    """``batch`` under ``schema`` (same columns; fields and nested fields at least as
    nullable): no copy but for a nested type that differs only in nullability (a cast)."""
    if batch.schema.equals(schema):
        return batch
    arrays = [col if col.type == f.type else col.cast(f.type)
              for col, f in zip(batch.columns, schema)]
    return pa.RecordBatch.from_arrays(arrays, schema=schema)
