"""Migration planning (Delta layer): which offsets of which partitions go into which table.

The offset already migrated lives in the Delta table itself: one application transaction
(``txn`` action, ``appId = <prefix>:<topic>:<partition>``) per partition, whose ``version`` is
the next offset to migrate — the exclusive end offset of the last committed run. A run reads
``[that offset, log end offset)`` (or up to the last stable offset with ``read_committed``), and
commits the new files together with the new versions in one Delta commit, so the data and the
offsets reached move together or not at all.

Planning reads directory listings, the ``log-start-offset-checkpoint``, the entry headers of
each partition's last segment (its log end offset) and, for ``read_committed``, what
:func:`~kafkalog_spark.log.transactions.transaction_view` reads. It never decodes records. The
sources pass ``read_log``'s rules (:func:`~kafkalog_spark.log.selection.command_partitions`):
no Kafka data, loose segments, a topic that is not there and a last segment that does not
walk to its end are errors, never a run that migrates nothing.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

import pyarrow as pa

from ..codec.files.checkpoints import parse_offset_checkpoint
from ..codec.files.naming import LOG_START_OFFSET_CHECKPOINT
from ..datasource.options import STORAGE_PREFIX
from ..errors import KafkaLogError, Location
from ..log.discovery import discover
from ..log.history import found_with_remote_tier
from ..log.model import LogDirs, PartitionDir
from ..log.segment_info import log_tail
from ..log.selection import command_partitions
from ..log.transactions import transaction_view
from ..storage.atomic import read_checkpoint_file
from ..storage.paths import ObjectPath
from ..tiered.tier import as_remote_tier
from .columns import table_schema
from .options import MigrateOptions

PathLike = str | os.PathLike[str]


class DataLossError(KafkaLogError):
    """Records between the offset already migrated and the partition's log start offset are
    gone (retention or DeleteRecords ran), or the log ends before that offset (the partition
    was recreated or truncated). Set ``fail_on_data_loss=False`` to go on and record the gap."""


@dataclass(frozen=True)
class PartitionPlan:
    """One partition of one run: migrate offsets ``[start, end)``.

    ``migrated`` is the offset the table had reached (``None``: never migrated), ``log_start``
    and ``log_end`` what the log holds now.
    """

    topic: str
    partition: int
    path: str
    log_start: int
    log_end: int
    migrated: int | None
    start: int
    end: int
    segments: tuple[str, ...] = ()  # the .log files holding [start, end), as planned

    @property
    def pending(self) -> bool:
        """Whether this run moves the partition's offset forward."""
        return self.end > self.start


@dataclass
class TablePlan:
    """One Delta table of a run: where, which partitions, the schema of the rows this run adds,
    and the data-loss gaps found (with ``fail_on_data_loss=False``)."""

    path: Path
    topics: frozenset[str]
    schema: pa.Schema
    partitions: list[PartitionPlan] = field(default_factory=list)
    gaps: list[dict] = field(default_factory=list)
    source_storage: dict[str, str] = field(default_factory=dict)  # the sources' store options

    @property
    def pending(self) -> list[PartitionPlan]:
        """The partitions whose offset this run moves forward."""
        return [p for p in self.partitions if p.pending]

    def read_options(self, opts: MigrateOptions) -> dict[str, str]:
        """Options of the ``kafkalog`` data source that read exactly this run's records.

        The path names the pending partition dirs themselves, not the log dirs: each table's
        read then lists only its own partitions (listing whole log dirs once per table made a
        migration of many topics quadratic)."""
        import json

        pending = self.pending
        assign: dict[str, list[int]] = {}
        starting: dict[str, dict[str, int]] = {}
        ending: dict[str, dict[str, int]] = {}
        for p in pending:
            assign.setdefault(p.topic, []).append(p.partition)
            starting.setdefault(p.topic, {})[str(p.partition)] = p.start
            ending.setdefault(p.topic, {})[str(p.partition)] = p.end
        return {
            "path": ",".join(p.path for p in pending),
            "assign": json.dumps(assign), "startingOffsets": json.dumps(starting),
            "endingOffsets": json.dumps(ending),
            "includeHeaders": str(opts.include_headers).lower(),
            "includeMetadata": str(opts.include_metadata).lower(),
            "includeControl": str(opts.include_control).lower(),
            "kafka.isolation.level": "read_committed" if opts.read_committed
            else "read_uncommitted",
            **{STORAGE_PREFIX + k: v for k, v in self.source_storage.items()},
            **({} if opts.remote_tier is None else {"remoteTier": opts.remote_tier}),
            **({} if opts.remote_tier_layout is None
               else {"remoteTierLayout": opts.remote_tier_layout}),
            **({} if not opts.remote_tier_private_key
               else {"remoteTierPrivateKey": ",".join(opts.remote_tier_private_key)}),
        }


class SourcePartition(NamedTuple):
    """A live partition to migrate, with its log start and log end offsets; ``elsewhere``: the
    checkpointed log start when it lies below the first segment read (tiered storage without
    its remote tier: those offsets are in the tier); ``codec``: the codec id of its last entry
    (``None``: no entry)."""

    part: PartitionDir
    log_start: int
    log_end: int
    elsewhere: int | None = None
    codec: int | None = None


@dataclass(frozen=True)
class SourceListing:
    """What planning a run read of its sources, from which the tables' reads are planned
    without reading it again: the discovery (before the remote tier is added) and each
    partition's codec by partition dir (its last entry's: a topic's producers mostly use
    one), which weighs the work of its segments that are not local (local ones are weighed by
    their own codecs: :func:`~kafkalog_spark.datasource.plan.codec_weights`)."""

    found: LogDirs
    codecs: dict[str, int] = field(default_factory=dict)  # str(partition dir) -> codec id


def source_partitions(sources: Sequence[PathLike], opts: MigrateOptions
                      ) -> tuple[dict[str, list[SourcePartition]], SourceListing]:
    """The live partitions the options select, grouped by table name (the topic, or ``""`` for
    the single layout), and what was read to find them (:class:`SourceListing`). Their log
    ends are read here, before a run writes anything: a last segment that does not walk to
    its end fails the run with nothing created."""
    listed = discover(list(sources))
    command_partitions(listed, topics=opts.topics, pattern=opts.topic_pattern)
    first = sources[0] if sources else None
    found = found_with_remote_tier(listed, as_remote_tier(
        opts.remote_tier, opts.remote_tier_layout,
        first.options if isinstance(first, ObjectPath) else None, opts.remote_tier_private_key))
    out: dict[str, list[SourcePartition]] = {}
    for log_dir in found.log_dirs:
        starts = read_checkpoint_file(log_dir.path / LOG_START_OFFSET_CHECKPOINT,
                                      parse_offset_checkpoint)
        for part in log_dir.partitions:
            _add(out, part, starts.get((part.topic, part.partition)), opts)
    for part in found.partitions:
        _add(out, part, None, opts)
    codecs = {str(s.part.path): s.codec for table in out.values() for s in table
              if s.codec is not None}
    return out, SourceListing(listed, codecs)


def _add(out: dict, part: PartitionDir, checkpointed: int | None, opts: MigrateOptions) -> None:
    if part.topic is None or part.partition is None or not opts.wants(part.topic):
        return
    first = part.segments[0].base_offset if part.segments else 0
    log_start = first if checkpointed is None else max(first, checkpointed)
    # its last segment's tail must walk cleanly to its end (log_tail: from its offset index's
    # last entry, as Kafka finds it)
    tail = log_tail(part.segments[-1]) if part.segments else None
    log_end = log_start if tail is None else tail.next_offset
    elsewhere = checkpointed if checkpointed is not None and checkpointed < first else None
    out.setdefault(part.topic if opts.layout == "per-topic" else "", []).append(
        SourcePartition(part, log_start, log_end, elsewhere, tail and tail.codec))


def plan_table(path: Path, parts: list[SourcePartition], opts: MigrateOptions,
               migrated: dict[str, int]) -> TablePlan:
    """Plan one table from its source partitions and the offsets it has reached.

    Parameters
    ----------
    path : Path
        The table's location.
    parts : list
        The table's partitions from :func:`source_partitions`.
    opts : MigrateOptions
    migrated : dict
        ``{app id: next offset}`` as recorded in the table (empty for a new table).

    Raises
    ------
    DataLossError
        With ``fail_on_data_loss``: a partition whose log start passed the offset migrated, or
        whose log end is below it.
    """
    topics = frozenset(s.part.topic for s in parts if s.part.topic is not None)
    plan = TablePlan(path, topics, table_schema(opts, topics))
    first = parts[0].part.path if parts else None
    if isinstance(first, ObjectPath):
        plan.source_storage = dict(first.options)
    for part, log_start, log_end, elsewhere, _ in sorted(
            parts, key=lambda s: (s.part.topic or "", s.part.partition or 0)):
        topic, partition = part.topic or "", part.partition or 0
        end = log_end
        if opts.read_committed and part.segments:
            lso = transaction_view(part).last_stable_offset
            end = log_end if lso is None else min(log_end, lso)
        done = migrated.get(opts.app_id(topic, partition))
        start = log_start if done is None else done
        if done is None and elsewhere is not None:
            _data_loss(plan, part, opts, elsewhere, log_start,
                       f"records [{elsewhere}, {log_start}) of {topic}-{partition} are not in "
                       f"the log dir: its log start offset is {elsewhere} "
                       "(log-start-offset-checkpoint); with tiered storage they are in the "
                       "remote tier: pass remote_tier (--remote-tier)")
        if done is not None and done < log_start:
            _data_loss(plan, part, opts, done, log_start,
                       f"records [{done}, {log_start}) of {topic}-{partition} were deleted "
                       f"before they were migrated: the log start offset is {log_start}, the "
                       f"table has reached {done}")
            start = log_start
        if done is not None and log_end < done:
            _data_loss(plan, part, opts, log_end, done,
                       f"the log of {topic}-{partition} ends at {log_end}, below the offset "
                       f"{done} the table has reached (the partition was recreated or "
                       f"truncated); its new records cannot be told apart")
            start = end = done
        end = max(start, end)
        plan.partitions.append(PartitionPlan(topic, partition, str(part.path), log_start, log_end,
                                             done, start, end, _window(part, start, end)))
    return plan


def _window(part: PartitionDir, start: int, end: int) -> tuple[str, ...]:
    """The ``.log`` files of ``part`` that hold offsets in ``[start, end)``."""
    segs = part.segments
    return tuple(str(s.log) for i, s in enumerate(segs)
                 if s.base_offset < end and (i + 1 == len(segs) or segs[i + 1].base_offset > start))


def _data_loss(plan: TablePlan, part: PartitionDir, opts: MigrateOptions, lo: int, hi: int,
               message: str) -> None:
    if opts.fail_on_data_loss:
        raise DataLossError(message + "; set fail_on_data_loss=False (--no-fail-on-data-loss) "
                            "to migrate what is left and record the gap",
                            Location(str(part.path), None, hi))
    plan.gaps.append({"topic": part.topic, "partition": part.partition, "from": lo, "to": hi,
                      "reason": message})
