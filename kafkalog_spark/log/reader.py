"""Local, Spark-free reading (log layer): ``read_log`` over a log dir, a partition dir or a file.

Plans from the directory listing (:func:`~kafkalog_spark.log.discovery.discover`), prunes whole
segments by base offset, starts inside the first segment through its offset index
(:mod:`~kafkalog_spark.log.lookup`, validated against the log), and decodes with
:func:`~kafkalog_spark.codec.records.decode.decode_entries`. Output memory per step is bounded by the
decoder's ``max_rows``; rows come partition by partition, in offset order. ``columns=`` reads
any subset of the columns (the decoder then builds only those).
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass

import pyarrow as pa

from ..codec.records.decode import BadRange, DecodeOptions, DecodeResult, decode_entries
from ..codec.records.schema import record_schema
from ..errors import InvalidOptionError
from ..storage import user_paths
from ..tiered.tier import RemoteTier, as_remote_tier
from .discovery import discover
from .history import check_history, segment_max_offset, with_remote_tier
from .model import PartitionDir, Segment
from .partition_state import at_log_start, checkpointed_log_starts
from .selection import check_selection, readable_partitions
from .window import decode_window, read_window

PathLike = str | os.PathLike[str]
TierLike = RemoteTier | str | os.PathLike[str] | None
OffsetBound = int | Mapping[tuple[str, int], int] | None
BAD_RANGES_KEY = b"kafkalog.bad_ranges"  # schema metadata of a read_log table in skip mode


@dataclass(frozen=True)
class ReadPlan:
    """One segment to read, with the offset window that applies to it."""

    topic: str
    partition: int
    segment: Segment
    min_offset: int | None
    max_offset: int | None  # inclusive


def plan_read(paths: PathLike | Sequence[PathLike], *, topics: Iterable[str] | None = None,
              partitions: Iterable[int] | None = None, start_offset: OffsetBound = None,
              end_offset: OffsetBound = None, loose_topic: str | None = None,
              loose_partition: int | None = None,
              storage_options: Mapping[str, str] | None = None,
              remote_tier: TierLike = None, remote_tier_layout: str | None = None,
              remote_tier_private_key: str | Sequence[str] | None = None) -> list[ReadPlan]:
    """The segments :func:`read_log` would read, in output order (no file contents read).

    ``start_offset`` is inclusive, ``end_offset`` exclusive (like Spark's ``endingOffsets``);
    either may be one int for every partition or a mapping ``{(topic, partition): offset}``.
    Only live partition dirs are read: ``-delete``, ``-future`` and ``-stray`` copies and the
    KRaft metadata log are left out unless named directly. Reads start at the partition's log
    start offset, as a consumer's fetch does: records left below it by ``DeleteRecords`` (or a
    retention the broker had not finished) are deleted in Kafka's view. With a remote tier the
    remote segments come first (:mod:`.history`).
    """
    paths = user_paths(paths, storage_options)
    tier = as_remote_tier(remote_tier, remote_tier_layout, storage_options,
                          remote_tier_private_key)
    found = discover(paths)
    wanted_topics = None if topics is None else set(topics)
    wanted_parts = None if partitions is None else set(partitions)
    live = readable_partitions(found, loose_topic=loose_topic, loose_partition=loose_partition)
    check_selection(live, paths, topics=wanted_topics, partition_numbers=wanted_parts)
    live = [part for part in live
            if (wanted_topics is None or part.topic in wanted_topics)
            and (wanted_parts is None or part.partition in wanted_parts)]
    live = with_remote_tier(live, tier, found)
    plans: list[ReadPlan] = []
    log_starts = checkpointed_log_starts(live)
    for part in live:
        lo = at_log_start(_bound(start_offset, part, "start_offset"), log_starts.get(part.path))
        hi = _bound(end_offset, part, "end_offset")
        check_history(part, lo, None if hi is None else hi - 1)
        segs = part.segments
        for i, seg in enumerate(segs):
            next_base = segs[i + 1].base_offset if i + 1 < len(segs) else None
            if lo is not None and next_base is not None and next_base <= lo:
                continue  # every offset of this segment is below the start
            if hi is not None and seg.base_offset >= hi:
                break
            plans.append(ReadPlan(part.topic or "", part.partition or 0, seg, lo,
                                  segment_max_offset(seg, None if hi is None else hi - 1)))
    return plans


class LogReadResult(Iterator[pa.RecordBatch]):
    """What :func:`iter_log` returns: bounded ``RecordBatch``es, partition by partition in
    offset order, and (with ``on_error="skip"``) :attr:`bad_ranges`, the byte ranges left out,
    complete once the iterator is exhausted."""

    def __init__(self, plans: list[ReadPlan], options: DecodeOptions) -> None:
        self.schema = record_schema(columns=options.output_columns)
        self.bad_ranges: list[BadRange] = []
        self._batches = self._run(plans, options)

    def __iter__(self) -> "LogReadResult":
        return self

    def __next__(self) -> pa.RecordBatch:
        return next(self._batches)

    def _run(self, plans: list[ReadPlan], options: DecodeOptions) -> Iterator[pa.RecordBatch]:
        for plan in plans:
            window = read_window(plan.segment, min_offset=plan.min_offset,
                                 max_offset=plan.max_offset, next_offset=plan.segment.base_offset)
            with window as w:
                def decode(start: int, end: int | None, buf=w.buf, plan=plan) -> DecodeResult:
                    return decode_entries(buf, topic=plan.topic, partition=plan.partition,
                                          options=options, start=start, end=end,
                                          min_offset=plan.min_offset,
                                          max_offset=plan.max_offset, file=str(plan.segment.log))

                yield from decode_window(w, decode, _start_position(plan, w.buf), w.stop,
                                         self.bad_ranges)


def iter_log(paths: PathLike | Sequence[PathLike], *, topics: Iterable[str] | None = None,
             partitions: Iterable[int] | None = None, start_offset: OffsetBound = None,
             end_offset: OffsetBound = None, include_headers: bool = False,
             include_metadata: bool = False, include_control: bool = False,
             verify_crc: bool = True, on_error: str = "fail",
             max_rows: int = 65536, columns: Sequence[str] | None = None,
             loose_topic: str | None = None, loose_partition: int | None = None,
             storage_options: Mapping[str, str] | None = None, remote_tier: TierLike = None,
             remote_tier_layout: str | None = None,
             remote_tier_private_key: str | Sequence[str] | None = None) -> LogReadResult:
    """Like :func:`read_log`, yielding bounded ``pyarrow.RecordBatch``es instead of one table;
    the result's ``bad_ranges`` lists what ``on_error="skip"`` left out."""
    options = DecodeOptions(verify_crc=verify_crc, include_headers=include_headers,
                            include_metadata=include_metadata, include_control=include_control,
                            on_error=on_error, max_rows=max_rows,
                            columns=None if columns is None else tuple(columns))
    return LogReadResult(plan_read(paths, topics=topics, partitions=partitions,
                                   start_offset=start_offset, end_offset=end_offset,
                                   loose_topic=loose_topic, loose_partition=loose_partition,
                                   storage_options=storage_options, remote_tier=remote_tier,
                                   remote_tier_layout=remote_tier_layout,
                                   remote_tier_private_key=remote_tier_private_key),
                         options)


def read_log(paths: PathLike | Sequence[PathLike], *, topics: Iterable[str] | None = None,
             partitions: Iterable[int] | None = None, start_offset: OffsetBound = None,
             end_offset: OffsetBound = None, include_headers: bool = False,
             include_metadata: bool = False, include_control: bool = False,
             verify_crc: bool = True, on_error: str = "fail",
             columns: Sequence[str] | None = None, loose_topic: str | None = None,
             loose_partition: int | None = None,
             storage_options: Mapping[str, str] | None = None, remote_tier: TierLike = None,
             remote_tier_layout: str | None = None,
             remote_tier_private_key: str | Sequence[str] | None = None) -> pa.Table:
    """Read the records of a log dir (or several), a partition dir or one ``.log`` file.

    Parameters
    ----------
    paths : path or sequence of paths
        Log dirs (JBOD), partition dirs or ``.log`` files.
    topics, partitions : iterable, optional
        Keep only these topics / partition numbers.
    start_offset, end_offset : int or mapping, optional
        Offset window, start inclusive and end exclusive; an int applies to every partition, a
        mapping ``{(topic, partition): offset}`` to the partitions it names.
    include_headers, include_metadata : bool
        Add the ``headers`` column / the Kafka metadata columns (see ``codec.records.schema``).
    include_control : bool
        Also return control records (transaction markers, KRaft control records).
    verify_crc : bool
        Check every batch's CRC (the default); a mismatch raises ``CorruptRecordError``.
    on_error : {"fail", "skip"}
        ``fail`` raises at the first bad entry; ``skip`` returns every valid record and lists
        the bad byte ranges in the table's schema metadata under ``kafkalog.bad_ranges``
        (JSON: file, start, end, base_offset, reason), also available from :func:`iter_log`.
    columns : sequence of str, optional
        Return only these columns, in this order: any subset of the base, ``headers`` and
        metadata columns (``codec.records.schema.ALL_COLUMNS``), whatever the include flags say. Key,
        value and header bytes not asked for are not copied.
    loose_topic, loose_partition : optional
        The topic-partition of *loose segments*: ``.log`` files named directly outside a
        ``<topic>-<partition>`` folder, or a folder of them. Without these such files are an
        error, never an empty read (:mod:`kafkalog_spark.log.selection`).
    storage_options : mapping, optional
        For ``s3://``, ``gs://`` and ``abfs[s]://`` paths: endpoint, region, credentials
        (``log.object_options``, the names delta-rs takes); unset ones come from the store's
        provider chain (environment, profile, instance role / application default credentials).
    remote_tier, remote_tier_layout, remote_tier_private_key : optional
        Tiered storage: the remote tier's root folder or bucket URI (the same
        ``storage_options`` reach it), its layout (``local-tiered-storage``, the default, or
        ``aiven``) and, for encrypted aiven segments, the PEM files of the RSA private keys.
        Each partition's history is then its remote segments followed by its local ones, each
        offset read once; which remote segments count comes from ``__remote_log_metadata``
        when its log is in the log dirs read, else from listing the tier. Overlapping remote
        segments and gaps in the history are errors, never merged or skipped
        (:mod:`kafkalog_spark.log.history`).

    Returns
    -------
    pyarrow.Table
        Records partition by partition in offset order, with the schema of
        ``record_schema(include_headers, include_metadata, columns)``.

    Raises
    ------
    KafkaLogError
        Any corruption, naming the file, byte position and base offset;
        :class:`InvalidOptionError` for a column that does not exist (listing the valid ones)
        or a topic or partition that is not there (listing the topics that are);
        :class:`LogDirError` for a path with no Kafka data.
    """
    result = iter_log(paths, topics=topics, partitions=partitions, start_offset=start_offset,
                      end_offset=end_offset, include_headers=include_headers,
                      include_metadata=include_metadata, include_control=include_control,
                      verify_crc=verify_crc, on_error=on_error, columns=columns,
                      loose_topic=loose_topic, loose_partition=loose_partition,
                      storage_options=storage_options, remote_tier=remote_tier,
                      remote_tier_layout=remote_tier_layout,
                      remote_tier_private_key=remote_tier_private_key)
    table = pa.Table.from_batches(list(result), schema=result.schema)
    if result.bad_ranges:
        report = json.dumps([dataclasses.asdict(b) for b in result.bad_ranges])
        table = table.replace_schema_metadata({**(table.schema.metadata or {}),
                                               BAD_RANGES_KEY: report.encode()})
    return table


def _start_position(plan: ReadPlan, buf) -> int:
    """Byte position to start decoding: through the offset index when the window starts inside
    the segment (the lookup validates the index entry against the log), else 0."""
    if plan.min_offset is None or plan.min_offset <= plan.segment.base_offset:
        return 0
    from .lookup import position_for_offset

    return position_for_offset(plan.segment, plan.min_offset, log_buffer=buf)


def _bound(bound: OffsetBound, part: PartitionDir, name: str) -> int | None:
    if bound is None:
        return None
    if isinstance(bound, int):
        return bound
    if isinstance(bound, Mapping):
        return bound.get((part.topic, part.partition))
    raise InvalidOptionError(f"{name} must be an int or a mapping {{(topic, partition): offset}}, "
                             f"got {type(bound).__name__}")
