"""Which partitions a read covers (log layer): the live partition dirs discovery found, loose
segment files given the topic-partition they belong to, and a clear error — never an empty
result — when a path holds no Kafka data or a requested topic is not there.

Shared by :func:`~kafkalog_spark.log.reader.read_log` and the Spark data source's planner, so
both accept and refuse the same paths:

* a log dir, or a partition dir named directly: read;
* **loose segments** — ``.log`` files named directly outside a ``<topic>-<partition>`` folder,
  or a folder of them — have no topic or partition on disk: read them as the topic-partition
  the caller names (``loose_topic`` / ``loose_partition``), else fail saying so;
* a folder that is neither a Kafka log dir (``meta.properties``, ``.lock``, checkpoint files)
  nor holds partition dirs or segments, and a loose ``.log`` that does not start with a Kafka
  entry (a stray file with a segment's name): fail, naming what was found there; a Kafka log
  dir without partitions (a broker that had no topics) reads as empty;
* requested topics (or a pattern, or assigned partitions) that are not there: fail, listing
  the topics that are.

Every command applies the same rules (:func:`command_partitions`): the maintenance commands
and ``migrate``/``erase`` refuse what ``read_log`` refuses, with the same messages.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Sequence
from dataclasses import replace

from ..codec import layout as L
from ..codec.files.naming import check_topic
from ..codec.records.scan import STOP_END, STOP_PARTIAL_ENTRY, scan_entries
from ..errors import InvalidOptionError, Location, LogDirError
from ..storage import storage_for
from .model import LogDir, LogDirs, PartitionDir, Segment

NO_DATA = ("expected a Kafka log dir (<topic>-<partition> folders), a partition dir or "
           "segment .log files")


def readable_partitions(found: LogDirs, *, loose_topic: str | None = None,
                        loose_partition: int | None = None) -> list[PartitionDir]:
    """The live partition dirs of ``found`` (log dirs first, then those named directly), loose
    segments as ``loose_topic``-``loose_partition``.

    Raises
    ------
    InvalidOptionError
        Loose segments and no topic-partition for them.
    LogDirError
        A named folder with no Kafka data; loose segments that overlap a partition dir of the
        same topic-partition, or each other.
    """
    require_kafka_data(found)
    return _live(found, loose_topic, loose_partition)


def command_partitions(found: LogDirs, *, topics: Iterable[str] | None = None,
                       pattern: str | None = None,
                       log_dirs_only: str | None = None) -> list[PartitionDir]:
    """The live partition dirs a command works on, after ``read_log``'s rules: no Kafka data,
    loose segments without a topic-partition and a requested topic (or pattern) that is not
    there are errors, never a run that does nothing.

    Parameters
    ----------
    found : LogDirs
        What :func:`~kafkalog_spark.log.discovery.discover` found at the command's paths.
    topics, pattern : optional
        The topics the command was asked for (checked by :func:`check_selection`).
    log_dirs_only : str, optional
        The command's name when it takes only log dirs (``log.dirs`` entries): a partition dir
        or ``.log`` file named directly is then refused.

    Raises
    ------
    LogDirError
        A path with no Kafka data.
    InvalidOptionError
        A partition dir or file given to a command that takes log dirs, loose segments, or
        a topic that is not there (the message lists the topics that are).
    """
    require_kafka_data(found)
    if log_dirs_only is not None and found.partitions:
        raise InvalidOptionError(f"{log_dirs_only} takes log dirs (log.dirs entries), not "
                                 "partition dirs or .log files: "
                                 + ", ".join(str(p.path) for p in found.partitions))
    live = _live(found, None, None, command=True)
    named = [d.path for d in found.log_dirs] + [p.path for p in found.partitions]
    check_selection(live, named, topics=topics, pattern=pattern)
    return live


def _live(found: LogDirs, loose_topic: str | None, loose_partition: int | None, *,
          command: bool = False) -> list[PartitionDir]:
    live = [p for d in found.log_dirs for p in d.partitions]
    live += [p for p in found.partitions if p.topic is not None]
    loose = [p for p in found.partitions if p.topic is None]
    if loose:
        live.append(_as_partition(loose, loose_topic, loose_partition, command))
    tps = [(p.topic, p.partition) for p in live if p.kind is None]
    if loose and tps.count((loose_topic, loose_partition)) > 1:
        raise LogDirError(f"the loose segments read as {loose_topic}-{loose_partition}, which "
                          "is also a partition dir here: name one or the other",
                          Location(str(loose[0].path)))
    return live


def check_selection(partitions: Sequence[PartitionDir], paths: Iterable[str | os.PathLike[str]],
                    *, topics: Iterable[str] | None = None, pattern: str | None = None,
                    assign: Iterable[tuple[str, int]] | None = None,
                    partition_numbers: Iterable[int] | None = None) -> None:
    """Raise :class:`InvalidOptionError` when a requested topic, pattern, assigned partition or
    partition number selects nothing that ``partitions`` holds (a typo reads nothing silently
    otherwise); the message lists what is there."""
    check_selected({(p.topic, p.partition) for p in partitions if p.topic is not None}, paths,
                   topics=topics, pattern=pattern, assign=assign,
                   partition_numbers=partition_numbers)


def check_selected(have: set[tuple[str, int]], paths: Iterable[str | os.PathLike[str]], *,
                   topics: Iterable[str] | None = None, pattern: str | None = None,
                   assign: Iterable[tuple[str, int]] | None = None,
                   partition_numbers: Iterable[int] | None = None) -> None:
    """:func:`check_selection` over the ``(topic, partition)`` pairs ``paths`` hold (a table's
    rows as much as partition dirs)."""
    names = sorted({t for t, _ in have})
    where = ", ".join(str(p) for p in paths)
    shown = ", ".join(names[:20]) + (f" (+{len(names) - 20} more)" if len(names) > 20 else "")
    there = f"topics there: {shown}" if names else "no topic there"
    if topics is not None:
        missing = sorted(set(topics) - set(names))
        if missing:
            raise InvalidOptionError(f"topic(s) {', '.join(missing)} not found in {where}; {there}")
    if pattern is not None and not any(re.fullmatch(pattern, t) for t in names):
        raise InvalidOptionError(f"no topic matches {pattern!r} in {where}; {there}")
    if assign is not None:
        missing_tp = sorted(set(assign) - have)
        if missing_tp:
            listed = ", ".join(f"{t}-{p}" for t, p in missing_tp)
            raise InvalidOptionError(f"partition(s) {listed} not found in {where}; {there}")
    if partition_numbers is not None and not {p for _, p in have} & set(partition_numbers):
        raise InvalidOptionError(f"no partition {sorted(set(partition_numbers))} in {where}")


def _as_partition(loose: list[PartitionDir], topic: str | None,
                  partition: int | None, command: bool = False) -> PartitionDir:
    files = sum(len(p.segments) for p in loose)
    where = ", ".join(str(p.path) for p in loose)
    if topic is None or partition is None:
        how = ("" if command else "name the topic and partition they belong to (read_log(..., "
               "loose_topic=, loose_partition=) or the looseTopic / loosePartition options), or ")
        raise InvalidOptionError(
            f"{files} segment .log file(s) outside a <topic>-<partition> folder ({where}): "
            f"{how}move them into a folder named <topic>-<partition>")
    check_topic(topic)
    if partition < 0:
        raise InvalidOptionError(f"loose_partition must be >= 0, got {partition}")
    by_base = {}
    for part in loose:
        for seg in part.segments:
            other = by_base.setdefault(seg.base_offset, seg)
            if other is not seg and other.log != seg.log:
                raise LogDirError(f"two loose segments have base offset {seg.base_offset} "
                                  f"({other.log} and {seg.log})", Location(str(seg.log)))
    segments = tuple(by_base[b] for b in sorted(by_base))
    return replace(loose[0], topic=topic, partition=partition, segments=segments)


def require_kafka_data(found: LogDirs) -> None:
    """Raise :class:`LogDirError` for a named folder that is neither a Kafka log dir nor holds
    partition dirs or segments, and for a loose segment file (outside a
    ``<topic>-<partition>`` folder) that does not start with a Kafka entry: nothing to do
    there is a wrong path, not success."""
    for log_dir in found.log_dirs:
        _require_kafka_data(log_dir)
    for part in found.partitions:
        if part.topic is None:
            for seg in part.segments:
                _require_entry_at_start(seg)


def _require_entry_at_start(seg: Segment) -> None:
    """A loose ``.log`` is a segment only if its first bytes are an entry header (size and
    magic): by name alone, any file called ``<digits>.log`` would be one. Reads one header."""
    head = storage_for(seg.log).read_bytes(seg.log, limit=L.RECORD_BATCH_OVERHEAD)
    walk = scan_entries(head, max_entries=1)
    if len(walk) or walk.stop_code in (STOP_END, STOP_PARTIAL_ENTRY):
        return  # an entry (whole or running past the bytes read), or an empty segment
    raise LogDirError(f"no Kafka data here: {seg.log.name} does not start with a Kafka record "
                      f"batch or message ({walk.stop_reason})", Location(str(seg.log), 0))


def _require_kafka_data(log_dir: LogDir) -> None:
    if (log_dir.partitions or log_dir.special or log_dir.metadata_log is not None
            or log_dir.meta_properties is not None or log_dir.meta_properties_error
            or log_dir.lock_file or log_dir.clean_shutdown or log_dir.checkpoints):
        return
    names = sorted(p.name for p in log_dir.unknown + log_dir.leftovers + log_dir.skipped)
    shown = ", ".join(names[:8]) + (f" (+{len(names) - 8} more)" if len(names) > 8 else "")
    found = f"found {len(names)} other entries: {shown}" if names else "it is empty"
    raise LogDirError(f"no Kafka data here: {NO_DATA}; {found}", Location(str(log_dir.path)))
