"""Reading a migrate table back for restore (Delta layer): each file streamed once, in the table's
file order, a bounded batch of rows at a time, and every row routed to its topic-partition.

:func:`survey` reads only the small columns (topic, partition, offset, flags, codec) to learn,
per partition, its rows from the restore's start offset, its batches, whether it holds
transactional batches and markers, whether the file order already gives its rows in offset
order — what ``migrate`` writes — and about how much work restoring it is (bytes, by codec);
it reads runs of consecutive files apart (a Spark task each) and puts them together in order.
:func:`stream` then reads every column once and yields each partition's rows in whole batches
(the rows of a batch that goes on in the next scanned batch are carried, one Kafka batch per
partition at most). A partition whose rows are not in file order is read by :func:`windows`
instead: offset windows, each a filtered scan (correct for any table, but each window reads
the table again). Memory is bounded by the scan batch, the
carried batches and one window — not by the table's size or its files' row groups.
"""

from __future__ import annotations

import functools
import operator
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .scan import SCAN_ROWS, data_files, table_schema
from .scan import scan as scan_rows

Tp = tuple[str, int]
NEEDED = ("topic", "partition", "offset", "key", "value", "timestamp", "timestampType",
          "headers", "leaderEpoch", "producerId", "producerEpoch", "sequence", "isTransactional",
          "isControl", "batchBaseOffset", "batchLastOffset", "magic", "compression")
WINDOW_ROWS = 1 << 18
"""Rows read at a time per partition by :func:`windows` (about: windows are offset ranges)."""
SURVEY_BYTES = 256 << 20
"""The least table bytes one task surveys (:func:`survey_tables`): a table's files are
surveyed in runs of at least this, or of a slot's share of all tables where that is more."""
_SURVEY = ["topic", "partition", "offset", "isTransactional", "isControl", "compression"]
CODEC_COST = {"none": 1.0, "lz4": 1.1, "snappy": 1.2, "zstd": 1.3, "gzip": 2.4}
"""Restore's work per table byte by the batch's codec, relative to uncompressed batches
(measured: restore tasks of the 4 GiB bench_scaling log, median ns per table byte per codec —
BENCHMARKS.md "restore sizes its ranges by codec"); another codec counts as uncompressed."""
_CODECS = pa.array(list(CODEC_COST))
_WEIGHTS = np.array([*CODEC_COST.values(), 1.0])  # the last: a codec not in the list


@dataclass
class Survey:
    """One partition of a table, as :func:`survey` found it."""

    start: int  # the offset restore starts at (rows below it are already in the log dir)
    rows: int = 0  # rows from ``start`` on
    first: int = -1  # lowest and highest offset from ``start`` on
    last: int = -1
    ordered: bool = True  # the file order gives its rows in offset order
    transactional: bool = False
    control: bool = False
    bytes: int = 0  # about the table bytes of those rows (at their files' bytes per row)
    cost: int = 0  # about restore's work for them: ``bytes`` weighted by :data:`CODEC_COST`

    def then(self, later: Survey) -> Survey:
        """This partition's survey of some files followed by ``later``'s of the next ones."""
        firsts = [s.first for s in (self, later) if s.rows]
        return Survey(self.start, self.rows + later.rows, min(firsts, default=-1),
                      max(self.last, later.last),
                      self.ordered and later.ordered
                      and (not self.rows or not later.rows or later.first > self.last),
                      self.transactional or later.transactional, self.control or later.control,
                      self.bytes + later.bytes, self.cost + later.cost)


def scan(table: Path, columns: Sequence[str], where: pc.Expression | None = None,
         files: Sequence[str] | None = None) -> Iterator[pa.RecordBatch]:
    """The table's rows (of ``files`` only, if given), file after file in the table's order,
    :data:`SCAN_ROWS` at a time (:func:`.scan.scan`: deletion vectors applied; ``where`` on
    integer columns only)."""
    return scan_rows(table, columns, where, SCAN_ROWS, files)


def groups(batch: pa.RecordBatch) -> Iterator[tuple[Tp, np.ndarray]]:
    """``((topic, partition), row indices in batch order)`` for each partition in ``batch``."""
    topics = pc.dictionary_encode(batch.column("topic"))
    codes = topics.indices.fill_null(-1).to_numpy(zero_copy_only=False)
    names = topics.dictionary.to_pylist()
    parts = batch.column("partition").fill_null(-1).to_numpy(zero_copy_only=False)
    order = np.lexsort((parts, codes))  # stable: rows keep their order within a partition
    key = codes[order].astype(np.int64) << 32 | (parts[order].astype(np.int64) & 0xFFFFFFFF)
    cuts = np.flatnonzero(np.diff(key)) + 1
    for idx in np.split(order, cuts):
        if len(idx) and codes[idx[0]] >= 0:
            yield (names[codes[idx[0]]], int(parts[idx[0]])), idx


def survey_tables(tables: Sequence[Path], start_of: Callable[[Tp], int], spark: Any = None
                  ) -> dict[Path, dict[Tp, Survey]]:
    """Each table's :func:`survey`, in runs of its files; with Spark, a task per run (read on
    the driver, the small columns of every row were restore's serial time; a task per table
    left most slots waiting on the biggest tables: issue 33)."""
    files = {t: data_files(t) for t in tables}
    slots = 1 if spark is None else max(1, spark.sparkContext.defaultParallelism)
    share = -(-sum(n for listed in files.values() for _, n in listed) // slots)
    work = [(t, names, n) for t in tables for names, n in _runs(files[t], share)]
    if spark is None or len(work) < 2:
        done = [survey_files(t, names, n, start_of) for t, names, n in work]
    else:
        todo = sorted(enumerate(work), key=lambda w: -w[1][2])  # the biggest first
        got = dict(spark.sparkContext.parallelize(todo, len(todo))
                   .map(lambda w: (w[0], survey_files(*w[1], start_of))).collect())
        done = [got[i] for i in range(len(work))]
    runs: dict[Path, list[dict[Tp, Survey]]] = {t: [] for t in tables}
    for (t, _, _), found in zip(work, done):  # in the table's file order
        runs[t].append(found)
    return {t: _in_file_order(runs[t]) for t in tables}


def _runs(files: list[tuple[str, int]], size: int) -> Iterator[tuple[list[str], int]]:
    """``files`` in runs of consecutive files of at least ``size`` and :data:`SURVEY_BYTES`
    bytes (the last run may hold less): ``(names, bytes)``."""
    names, total = [], 0
    for name, n in files:
        names.append(name)
        total += n
        if total >= max(size, SURVEY_BYTES):
            yield names, total
            names, total = [], 0
    if names:
        yield names, total


def survey(table: Path, start_of: Callable[[Tp], int]) -> dict[Tp, Survey]:
    """Every partition in the table, read from the small columns only (module docstring)."""
    return survey_tables([table], start_of)[table]


def _in_file_order(parts: list[dict[Tp, Survey]]) -> dict[Tp, Survey]:
    """The table's survey from its files' (in the table's file order)."""
    out: dict[Tp, Survey] = {}
    for part in parts:
        for tp, s in part.items():
            out[tp] = out[tp].then(s) if tp in out else s
    return out


def survey_files(table: Path, names: list[str], size: int, start_of: Callable[[Tp], int]
                 ) -> dict[Tp, Survey]:
    """Every partition in some consecutive data files of the table (``size``: their bytes)."""
    found: dict[Tp, Survey] = {}
    weighted: dict[Tp, float] = {}  # rows from the start, each weighted by its codec's cost
    seen = 0
    for batch in scan(table, _SURVEY, files=names):
        seen += batch.num_rows
        costs = _row_costs(batch.column("compression"))
        for tp, idx in groups(batch):
            s = found.get(tp)
            if s is None:
                s = found[tp] = Survey(start_of(tp))
            off = batch.column("offset").take(idx).to_numpy(zero_copy_only=False)
            s.transactional |= bool(pc.any(batch.column("isTransactional").take(idx)).as_py())
            s.control |= bool(pc.any(batch.column("isControl").take(idx)).as_py())
            later = off >= s.start
            kept = off[later]  # only their order matters: restore reads no other
            weighted[tp] = weighted.get(tp, 0.0) + float(costs[idx[later]].sum())
            if len(kept):
                s.ordered = s.ordered and kept[0] > s.last and bool(np.all(np.diff(kept) > 0))
                s.rows += len(kept)
                s.first = int(kept.min()) if s.first < 0 else min(s.first, int(kept.min()))
                s.last = max(s.last, int(kept.max()))
    row_bytes = size / max(1, seen)
    for tp, s in found.items():
        s.bytes, s.cost = int(s.rows * row_bytes), int(weighted[tp] * row_bytes)
    return found


def _row_costs(codecs: pa.Array) -> np.ndarray:
    """Each row's :data:`CODEC_COST` (from the ``compression`` column)."""
    known = pc.index_in(codecs, value_set=_CODECS).fill_null(len(_CODECS))
    return _WEIGHTS[known.to_numpy(zero_copy_only=False)]


def stream(table: Path, starts: Mapping[Tp, int], where: pc.Expression | None = None
           ) -> Iterator[tuple[Tp, pa.Table]]:
    """``(partition, rows)`` of the ``starts`` partitions (from their start offsets), whole
    batches per yield, in offset order — for partitions :func:`survey` found ordered."""
    carry: dict[Tp, pa.Table] = {}
    for batch in scan(table, NEEDED, where):
        for tp, idx in groups(batch):
            if tp not in starts:
                continue
            rows = pa.Table.from_batches([batch]).take(pa.array(idx))
            rows = rows.filter(pc.greater_equal(rows["offset"], starts[tp]))
            if not rows.num_rows:
                continue
            if tp in carry:
                rows = pa.concat_tables([carry.pop(tp), rows])
            whole, carry[tp] = split_last_batch(rows)  # the last batch may go on
            if whole.num_rows:
                yield tp, whole
    yield from carry.items()


def split_last_batch(rows: pa.Table) -> tuple[pa.Table, pa.Table]:
    """``rows`` (whole batches but maybe the last, in offset order) as the rows before its last
    batch and that batch's rows."""
    bases = rows["batchBaseOffset"].to_numpy()
    cut = int(np.searchsorted(bases, bases[-1]))
    return rows.slice(0, cut), rows.slice(cut)


def windows(table: Path, tp: Tp, found: Survey, lo: int | None = None, hi: int | None = None
            ) -> Iterator[pa.Table]:
    """The partition's rows from ``found.start`` on, in offset order, whole batches per yield
    (a batch cut by the window end is carried into the next one), for any row order in the
    table: windows of about :data:`WINDOW_ROWS` rows (from the partition's offset density).
    ``lo``/``hi``: only the batches whose base offset is in ``[lo, hi)`` (:func:`base_range`)."""
    if not found.rows:
        return
    span = max(1, int(WINDOW_ROWS * (found.last - found.first + 1) / found.rows))
    carry = None
    at, last = found.first if lo is None else max(found.first, lo), found.last
    bases = base_range(lo, hi)
    while at <= last and (hi is None or at < hi or carry is not None):
        window = (pc.field("offset") >= at) & (pc.field("offset") < at + span)
        w = select(table, tp, list(NEEDED), all_of(window, bases)).sort_by("offset")
        if carry is not None:
            w = pa.concat_tables([carry, w.cast(carry.schema)])
        at += span
        carry = None
        if w.num_rows and at <= last and w["batchLastOffset"][-1].as_py() >= at:
            w, carry = split_last_batch(w)  # the last batch goes on: carry it
        if w.num_rows:
            yield w


def base_range(lo: int | None, hi: int | None) -> pc.Expression | None:
    """The condition keeping the rows of batches whose base offset is in ``[lo, hi)`` (None:
    unbounded)."""
    return all_of(None if lo is None else pc.field("batchBaseOffset") >= lo,
                  None if hi is None else pc.field("batchBaseOffset") < hi)


def all_of(*conds: pc.Expression | None) -> pc.Expression | None:
    """The conditions that are given, joined by AND (None: none given)."""
    given = [c for c in conds if c is not None]
    return functools.reduce(operator.and_, given) if given else None


def feed(table: Path, sinks: dict, found: Mapping[Tp, Survey], partition: int | None = None,
         lo: int | None = None, hi: int | None = None) -> list:
    """Feed each partition's rows of ``table`` to its sink: the partitions whose rows are in
    file order in one pass over the table, the others window by window. ``partition``: the
    sinks' partition number, pushed down; ``lo``/``hi``: only batches whose base offset is in
    ``[lo, hi)``."""
    ordered = {tp: found[tp].start for tp in sinks if found[tp].ordered}
    where = all_of(None if partition is None else pc.field("partition") == partition,
                   base_range(lo, hi))
    for tp, rows in stream(table, ordered, where):
        sinks[tp].take(rows)
    for tp in sinks:
        if not found[tp].ordered:
            for rows in windows(table, tp, found[tp], lo, hi):
                sinks[tp].take(rows)
    return list(sinks.values())


def select(table: Path, tp: Tp, columns: list[str], where: pc.Expression | None = None
           ) -> pa.Table:
    """The rows of one topic-partition matching ``where`` (integer conditions)."""
    cond = all_of(pc.field("partition") == tp[1], where)
    found = [b.filter(pc.equal(b.column("topic"), tp[0]))
             for b in scan(table, list(dict.fromkeys([*columns, "topic"])), cond)]
    schema = table_schema(table)
    rows = pa.Table.from_batches(found) if found else pa.Table.from_batches(
        [], pa.schema([schema.field(c) for c in dict.fromkeys([*columns, "topic"])]))
    return rows.select(columns)
