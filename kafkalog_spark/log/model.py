"""The on-disk model's value types (log layer): segments, partition dirs, log dirs and
duplicate replicas, as :mod:`.discovery` finds them (from listings and ``stat`` only)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from ..codec.files import naming as N


@dataclass(frozen=True, slots=True)
class Segment:
    """One segment: its ``.log`` and whichever index files exist, from ``stat`` only.

    Paths are derived from the partition folder (one object shared by its segments) and the
    ``.log`` name, and index sizes are ``None`` for an absent file: a listing of tens of
    thousands of segments then costs a few hundred bytes each instead of four path objects.
    """

    base_offset: int
    dir: Path
    name: str  # the .log's file name; the index files share its stem
    log_size: int
    mtime: float  # the .log's modification time (Kafka falls back to it for retention)
    index_size: int | None = None
    timeindex_size: int | None = None
    txnindex_size: int | None = None
    # a segment of a remote tier (tiered storage): its id there, and the last offset read from
    # it when the local log holds the offsets after (log.history); None for a local segment
    remote_id: str | None = None
    last_offset: int | None = None

    @property
    def log(self) -> Path:
        """The ``.log`` file."""
        return self.dir / self.name

    @property
    def index(self) -> Path | None:
        """The ``.index`` file, when present."""
        return self._sibling(N.INDEX, self.index_size)

    @property
    def timeindex(self) -> Path | None:
        """The ``.timeindex`` file, when present."""
        return self._sibling(N.TIME_INDEX, self.timeindex_size)

    @property
    def txnindex(self) -> Path | None:
        """The ``.txnindex`` file, when present."""
        return self._sibling(N.TXN_INDEX, self.txnindex_size)

    def _sibling(self, kind: str, size: int | None) -> Path | None:
        if size is None:
            return None
        return self.dir / sibling_name(self.name, kind)


def sibling_name(log_name: str, kind: str) -> str:
    """The name of a segment file of ``kind`` next to the ``.log`` named ``log_name``."""
    return f"{log_name.rpartition('.')[0]}.{kind}"


@dataclass(frozen=True)
class RemoteHistory:
    """How a partition's remote segments (tiered storage) join its local ones, as
    :mod:`.history` found it; its ``segments`` then start with the remote ones read."""

    tier: str  # the tier, as the user named it
    source: str  # "__remote_log_metadata" or "tier listing"
    topic_id: str | None
    remote_segments: int  # remote segments read
    not_read: tuple[str, ...] = ()  # remote segments left out (copy not finished, deleted...)
    held_locally: tuple[str, ...] = ()  # remote segments the local log holds too: read there
    overlaps: tuple[str, ...] = ()  # a remote segment running into the local log: read once
    conflicts: tuple[str, ...] = ()  # remote segments overlapping each other: reads refuse
    gaps: tuple[tuple[int, int], ...] = ()  # offsets (first, last) in no segment


@dataclass(frozen=True)
class PartitionDir:
    """One partition directory (live, or ``-delete``/``-future``/``-stray`` per ``kind``).

    ``topic``/``partition`` are ``None`` only for the folder of a lone ``.log`` file named
    directly whose folder is not named ``<topic>-<partition>``.
    """

    path: Path
    topic: str | None
    partition: int | None
    kind: str | None = None
    uuid: str | None = None
    segments: tuple[Segment, ...] = ()
    leftovers: tuple[Path, ...] = ()  # .deleted / .cleaned / .swap / .tmp
    orphan_indexes: tuple[Path, ...] = ()  # index files whose .log is missing
    snapshots: tuple[Path, ...] = ()  # producer-state <offset>.snapshot
    kraft_snapshots: tuple[Path, ...] = ()  # <end offset>-<epoch>.checkpoint (metadata log)
    unknown: tuple[Path, ...] = ()  # anything else
    partition_metadata: bool = False
    leader_epoch_checkpoint: bool = False
    remote: RemoteHistory | None = None  # with a remote tier: its segments come first

    @property
    def name(self) -> str:
        """``topic-partition`` (the folder name when those are unknown)."""
        if self.topic is None:
            return self.path.name
        return f"{self.topic}-{self.partition}"

    @property
    def size(self) -> int:
        """Total bytes of the ``.log`` files."""
        return sum(s.log_size for s in self.segments)


@dataclass(frozen=True)
class LogDir:
    """One broker log directory (one entry of ``log.dirs``)."""

    path: Path
    meta_properties: dict[str, str] | None = None
    meta_properties_error: str | None = None  # why meta.properties did not parse
    lock_file: bool = False
    lock_holder: int | None = None  # pid of a live process holding .lock
    clean_shutdown: bool = False  # .kafka_cleanshutdown present
    checkpoints: tuple[str, ...] = ()  # names of the offset checkpoint files present
    partitions: tuple[PartitionDir, ...] = ()  # live logs LogManager loads
    special: tuple[PartitionDir, ...] = ()  # -delete / -future / -stray
    metadata_log: PartitionDir | None = None  # __cluster_metadata-0 (KRaft)
    skipped: tuple[Path, ...] = ()  # remote-log-index-cache
    leftovers: tuple[Path, ...] = ()  # *.tmp of the atomic write protocol
    unknown: tuple[Path, ...] = ()  # files and folders a broker would not recognise

    def all_partition_dirs(self) -> tuple[PartitionDir, ...]:
        """Live, special and metadata-log partition dirs, in order."""
        meta = (self.metadata_log,) if self.metadata_log is not None else ()
        return self.partitions + self.special + meta


@dataclass(frozen=True)
class DuplicateReplica:
    """One topic-partition present in more than one place (JBOD).

    A live log plus one ``-future`` replica is a replica move in progress; anything else
    (two live copies) makes a broker refuse to start.
    """

    topic: str
    partition: int
    paths: tuple[Path, ...]
    kinds: tuple[str | None, ...]

    @property
    def is_move(self) -> bool:
        """One live copy and one ``-future`` copy: an intra-broker move in progress."""
        return sorted(self.kinds, key=str) == sorted([None, N.FUTURE_DIR], key=str)


@dataclass(frozen=True)
class LogDirs:
    """Everything :func:`discover` found, in deterministic order."""

    log_dirs: tuple[LogDir, ...] = ()
    partitions: tuple[PartitionDir, ...] = ()  # partition dirs named directly
    duplicates: tuple[DuplicateReplica, ...] = field(default=())

    def all_partition_dirs(self) -> tuple[PartitionDir, ...]:
        """Every partition dir found, log dir by log dir, then those named directly."""
        out: list[PartitionDir] = []
        for d in self.log_dirs:
            out.extend(d.all_partition_dirs())
        return tuple(out) + self.partitions
