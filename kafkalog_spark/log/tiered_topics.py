"""Which partitions of the log dirs are tiered (log layer): tiered storage is on for their topic,
or part of their history is in a remote tier — what the maintenance commands check first.

A live partition is tiered when any of these holds (each is a reason the refusal names):

* its topic's ``remote.storage.enable`` is true (the effective topic config: options, a config
  file, the KRaft metadata log — :mod:`.topic_config`);
* its log dir checkpoints a log start offset below its first local segment
  (``log-start-offset-checkpoint``): with tiered storage the broker checkpoints the start of the
  whole history, whose older offsets only the remote tier holds (a broker without it raises the
  log start to the first segment when it loads the log);
* ``__remote_log_metadata`` in the log dirs lists remote segments of it (by topic id) that are
  not deleted, its partition not deleted either.

With tiered storage the broker owns the log start offset, deletes a local segment only once its
RemoteLogManager has copied it (``local.retention.*``) and deletes remote segments by
``retention.*`` across both tiers; the remote copies are byte copies of local segments. So
``retain``, ``compact`` and ``erase`` refuse such a partition's local log
(:func:`refuse_tiered`); ``recover`` repairs it as the broker's loader does with remote storage
on (the checkpointed log start and the leader epochs of the remote offsets kept).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..codec.internal import remote_log_metadata as rlm
from ..errors import KafkaLogError, Location, TieredPartitionError
from ..storage import as_path
from ..tiered.metadata import RemoteLogMetadata, RemotePartitionLog
from .history import remote_log_metadata, topic_id
from .model import LogDirs, PartitionDir
from .partition_state import checkpointed_log_starts
from .topic_config import TopicConfig, effective_config, metadata_topic_configs

SHOWN = 3  # partitions named in a refusal; the rest are counted


@dataclass(frozen=True)
class TieredPartition:
    """A live partition whose history is (or will be) partly in a remote tier, and why."""

    name: str  # topic-partition
    path: Path
    topic: str
    config: TopicConfig
    reasons: tuple[str, ...]
    log_start: int | None  # the checkpointed log start offset
    remote_end: int | None  # the last offset of a remote segment __remote_log_metadata lists

    def describe(self) -> str:
        return f"{self.name}: " + "; ".join(self.reasons)


def tiered_partitions(found: LogDirs, parts: Iterable[PartitionDir], *,
                      options: Mapping[str, Any] | None = None,
                      config_file: str | os.PathLike[str] | None = None,
                      notes: list[str] | None = None) -> list[TieredPartition]:
    """The tiered ones of the live partition dirs ``parts`` (module docstring), in order.

    A metadata log (``__remote_log_metadata``, ``__cluster_metadata``) that does not decode is
    an error: which partitions it was about is unknown. With ``notes`` (``recover``, which may
    be about to repair that very log) it is said there instead, and the other signs decide.

    Raises
    ------
    TieredPartitionError
        A metadata log that does not decode, without ``notes``.
    InvalidOptionError
        A topic config that does not parse (naming its source).
    """
    parts = [p for p in parts
             if p.topic is not None and p.partition is not None and p.kind is None]
    if not parts:
        return []
    remote = _read(lambda: remote_log_metadata(found, parts), None, "__remote_log_metadata",
                   notes)
    log_starts = checkpointed_log_starts(parts)
    metadata: dict[Path, dict[str, dict[str, str]]] = {}
    configs: dict[tuple[Path, str], TopicConfig] = {}
    out = []
    for part in parts:
        log_dir = as_path(part.path).parent
        if log_dir not in metadata:
            metadata[log_dir] = _read(lambda: metadata_topic_configs(log_dir), {},
                                      "the KRaft metadata log's topic configs", notes)
        if (log_dir, part.topic) not in configs:
            configs[log_dir, part.topic] = effective_config(  # type: ignore[index]
                part.topic or "", options=options, config_file=config_file,
                metadata=metadata[log_dir])
        config = configs[log_dir, part.topic]  # type: ignore[index]
        log_start = log_starts.get(part.path)
        segments = _remote_segments(remote, part)
        reasons = _reasons(part, config, log_start, segments)
        if reasons:
            out.append(TieredPartition(part.name, part.path, part.topic or "", config,
                                       tuple(reasons), log_start,
                                       max((s.end_offset for s in segments), default=None)))
    return out


def _read(read: Callable[[], Any], empty: Any, what: str, notes: list[str] | None) -> Any:
    """``read()``; a :class:`KafkaLogError` becomes a :class:`TieredPartitionError`, or with
    ``notes`` a note and ``empty``."""
    try:
        return read()
    except KafkaLogError as exc:
        text = (f"cannot tell which partitions are tiered (tiered storage): {what} does not "
                f"decode: {exc.reason}")
        if notes is None:
            raise TieredPartitionError(text, exc.location) from exc
        notes.append(f"{text} ({exc.location.describe()}); tiered partitions known by the "
                     "other signs only")
        return empty


def _remote_segments(remote: RemoteLogMetadata | None, part: PartitionDir) -> list[Any]:
    """The segments ``__remote_log_metadata`` lists for the partition, not deleted (by topic id;
    by topic name when the partition dir has no ``partition.metadata``)."""
    if not remote:
        return []
    tid = topic_id(part)
    logs: list[RemotePartitionLog] = [
        log for (t, p), log in remote.items() if p == part.partition
        and (t == tid if tid is not None else log.topic == part.topic)]
    return [s for log in logs if not log.deleted for s in log.segments.values()
            if s.state != rlm.DELETE_SEGMENT_FINISHED]


def _reasons(part: PartitionDir, config: TopicConfig, log_start: int | None,
             segments: Sequence[Any]) -> list[str]:
    reasons = []
    if config.remote_storage_enable:
        reasons.append("remote.storage.enable=true (from the "
                       f"{config.sources.get('remote.storage.enable')})")
    first = part.segments[0].base_offset if part.segments else None
    if log_start is not None and first is not None and log_start < first:
        reasons.append(f"its checkpointed log start offset {log_start} lies below its first "
                       f"local segment {first}: offsets {log_start}..{first - 1} are in a "
                       "remote tier")
    if segments:
        lo = min(s.start_offset for s in segments)
        hi = max(s.end_offset for s in segments)
        reasons.append(f"__remote_log_metadata lists {len(segments)} remote segment(s) of it "
                       f"(offsets {lo}..{hi})")
    return reasons


def refuse_tiered(command: str, tiered: Sequence[TieredPartition], why: str) -> None:
    """Refuse ``command`` on the tiered partitions ``tiered`` (none: nothing to refuse), in one
    line: which partitions, why each is tiered (the first one's reasons), and ``why`` the
    command must not change them.

    Raises
    ------
    TieredPartitionError
        Located at the first partition dir.
    """
    if not tiered:
        return
    names = [t.name for t in tiered[:SHOWN]]
    more = f" and {len(tiered) - SHOWN} more" if len(tiered) > SHOWN else ""
    raise TieredPartitionError(
        f"{command} refuses tiered storage's partition(s) {', '.join(names)}{more} "
        f"({tiered[0].describe()}): {why}", Location(str(tiered[0].path)))
