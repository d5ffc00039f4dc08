"""The picklable units of a ``kafkalog`` scan (datasource layer): a split (a byte range of one
segment) and a task (consecutive splits), planned on the driver by :mod:`.plan` and read in
the Spark tasks by :mod:`.reader`."""

from __future__ import annotations

from dataclasses import dataclass

from pyspark.sql.datasource import InputPartition

from ..log.model import Segment
from ..log.transactions import AbortedTxn


@dataclass(frozen=True)
class KafkaLogSplit(InputPartition):
    """One task: a byte range of one segment with the offset window and the aborted
    transactions that apply.

    ``first_offset`` / ``next_offset`` bound the offsets held by the byte range (from the
    entries at its cut points); ``min_offset`` / ``max_offset`` are the inclusive read window.
    ``by_offset``: the split is the offsets ``[min_offset, max_offset]`` of its segment, and its
    byte range only says where they lie (cut from the offset index without reading the log,
    as a tier's chunked segments are): the reader finds them by validated index lookups.
    """

    topic: str
    partition: int
    segment: Segment
    start_position: int
    end_position: int | None
    first_offset: int
    next_offset: int | None
    min_offset: int | None = None
    max_offset: int | None = None
    aborted: tuple[AbortedTxn, ...] = ()
    by_offset: bool = False


@dataclass(frozen=True)
class KafkaLogTask(InputPartition):
    """One Spark task: consecutive splits read one after the other (see
    :func:`~kafkalog_spark.datasource.plan.pack_splits`)."""

    splits: tuple[KafkaLogSplit, ...]

    @property
    def bytes(self) -> int:
        return sum(split_bytes(s) for s in self.splits)


def split_bytes(split: KafkaLogSplit) -> int:
    """``.log`` bytes a split covers."""
    end = split.segment.log_size if split.end_position is None else split.end_position
    return max(0, end - split.start_position)

