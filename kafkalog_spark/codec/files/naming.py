"""File and directory names (codec layer): segment files, partition dirs, log-dir-level files.

Kafka's rules (KAFKA_FORMATS §8)::

    <20-digit base offset>.log | .index | .timeindex | .txnindex     one segment
    <20-digit offset>.snapshot                                     producer-state snapshot
    <any of the above>.deleted | .cleaned | .swap                  transient (crash leftovers)
    <20-digit end offset>-<10-digit epoch>.checkpoint[.part|.deleted]   KRaft snapshot
    <topic>-<partition>                                            live partition dir
    <topic>-<partition>.<uuid32hex>-delete | -future | -stray      special partition dirs

The offset of a file is everything before its **first** dot (``LogFileUtils.offsetFromFileName``).
Parsing is strict in what it returns and names the offending file in a :class:`LogDirError`.

A topic parsed from a directory name must be a name Kafka could have created
(``Topic.validate``: ``[a-zA-Z0-9._-]``, not ``.`` or ``..``). A broker's loader does not check
this, but every such name on disk is foreign (a copy, a hand-made folder), and the topic is
later joined into paths (``DEST/<topic>`` of a migration): ``..`` would climb out, non-UTF-8
bytes cannot become an Arrow string. Such directories are reported as unknown instead.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ...errors import InvalidOptionError, Location, LogDirError

OFFSET_DIGITS = 20  # LogFileUtils.filenamePrefixFromOffset: min 20 integer digits
EPOCH_DIGITS = 10  # raft Snapshots: <end offset>-<epoch>.checkpoint
MAX_DIR_NAME_LENGTH = 255  # -delete / -stray names are capped to this many characters
INT64_MAX = 2**63 - 1
INT32_MAX = 2**31 - 1

# --- per-segment files ---------------------------------------------------------------------
LOG = "log"
INDEX = "index"
TIME_INDEX = "timeindex"
TXN_INDEX = "txnindex"
SNAPSHOT = "snapshot"
SEGMENT_FILE_KINDS = (LOG, INDEX, TIME_INDEX, TXN_INDEX, SNAPSHOT)
INDEX_KINDS = (INDEX, TIME_INDEX, TXN_INDEX)

DELETED = "deleted"
CLEANED = "cleaned"
SWAP = "swap"
TRANSIENT_SUFFIXES = (DELETED, CLEANED, SWAP)

# --- KRaft metadata log ----------------------------------------------------------------------
CHECKPOINT = "checkpoint"  # a KRaft snapshot, complete
CHECKPOINT_PART = "part"  # ...checkpoint.part: being written
METADATA_TOPIC = "__cluster_metadata"
QUORUM_STATE = "quorum-state"
BOOTSTRAP_CHECKPOINT = "bootstrap.checkpoint"

# --- per-partition-dir files -----------------------------------------------------------------
PARTITION_METADATA = "partition.metadata"
LEADER_EPOCH_CHECKPOINT = "leader-epoch-checkpoint"

# --- per-log-dir files -------------------------------------------------------------------------
META_PROPERTIES = "meta.properties"
LOCK_FILE = ".lock"
CLEAN_SHUTDOWN_FILE = ".kafka_cleanshutdown"
RECOVERY_POINT_CHECKPOINT = "recovery-point-offset-checkpoint"
LOG_START_OFFSET_CHECKPOINT = "log-start-offset-checkpoint"
REPLICATION_OFFSET_CHECKPOINT = "replication-offset-checkpoint"
CLEANER_OFFSET_CHECKPOINT = "cleaner-offset-checkpoint"
CHECKPOINT_FILES = (
    CLEANER_OFFSET_CHECKPOINT,
    LOG_START_OFFSET_CHECKPOINT,
    RECOVERY_POINT_CHECKPOINT,
    REPLICATION_OFFSET_CHECKPOINT,
)
WRITING_MARKER = ".kafkalog-writing"  # an object-store log dir / partition dir being uploaded
TMP_SUFFIX = ".tmp"  # atomic write protocol (§11.1): <file>.tmp renamed over <file>
REMOTE_LOG_INDEX_CACHE = "remote-log-index-cache"  # tiered-storage cache, skipped at load

# --- partition dir kinds -------------------------------------------------------------------
DELETE_DIR = "delete"
FUTURE_DIR = "future"
STRAY_DIR = "stray"
SPECIAL_DIR_KINDS = (DELETE_DIR, FUTURE_DIR, STRAY_DIR)
# LocalLog.DELETE_DIR_PATTERN and friends: ^(\S+)-(\S+)\.(\S+)-delete$
_SPECIAL_DIR_PATTERN = {k: re.compile(rf"^(\S+)-(\S+)\.(\S+)-{k}$") for k in SPECIAL_DIR_KINDS}
_KRAFT_SNAPSHOT = re.compile(r"^(\d+)-(\d+)\.checkpoint(?:\.(part|deleted))?$")
_DIGITS = re.compile(r"^\d+$")
_TRANSIENT_ENDINGS = tuple(f".{s}" for s in TRANSIENT_SUFFIXES)
_CANONICAL_SEGMENT_FILE = re.compile(
    rf"([0-9]{{{OFFSET_DIGITS}}})\.({'|'.join(SEGMENT_FILE_KINDS)})")
_LEGAL_TOPIC = re.compile(r"^[a-zA-Z0-9._-]+$")  # Topic.validate's character set (ASCII only)
MAX_TOPIC_LENGTH = 249  # Topic.MAX_NAME_LENGTH


def _error(message: str, name: str) -> LogDirError:
    return LogDirError(message, Location(file=name))


# --- segment files -------------------------------------------------------------------------


@dataclass(frozen=True)
class SegmentFileName:
    """A parsed segment-level file name.

    ``kind`` is one of :data:`SEGMENT_FILE_KINDS`; ``transient`` is ``None`` or one of
    :data:`TRANSIENT_SUFFIXES`; ``canonical`` says the prefix has exactly 20 digits (Kafka
    itself parses any decimal prefix, but only ever writes 20 digits).
    """

    offset: int
    kind: str
    transient: str | None
    canonical: bool

    @property
    def name(self) -> str:
        """The canonical file name for these parts."""
        return segment_file_name(self.offset, self.kind, self.transient)


def format_offset(offset: int) -> str:
    """Format ``offset`` as Kafka's 20-digit zero-padded file-name prefix.

    Parameters
    ----------
    offset : int
        A base offset, ``0 <= offset <= 2**63 - 1``.

    Returns
    -------
    str
        e.g. ``147001`` -> ``"00000000000000147001"``.
    """
    if not 0 <= offset <= INT64_MAX:
        raise _error(f"offset {offset} is outside 0..2^63-1 and cannot name a file", str(offset))
    return f"{offset:0{OFFSET_DIGITS}d}"


def segment_file_name(offset: int, kind: str, transient: str | None = None) -> str:
    """The file name of one segment-level file, e.g. ``00000000000000000042.log.cleaned``.

    Parameters
    ----------
    offset : int
        Base offset (snapshot: the snapshot's offset).
    kind : str
        One of :data:`SEGMENT_FILE_KINDS`.
    transient : str, optional
        One of :data:`TRANSIENT_SUFFIXES`.
    """
    if kind not in SEGMENT_FILE_KINDS:
        raise _error(f"unknown segment file kind {kind!r}; valid: {', '.join(SEGMENT_FILE_KINDS)}",
                     kind)
    if transient is not None and transient not in TRANSIENT_SUFFIXES:
        raise _error(f"unknown transient suffix {transient!r}; valid: "
                     f"{', '.join(TRANSIENT_SUFFIXES)}", transient)
    name = f"{format_offset(offset)}.{kind}"
    return name if transient is None else f"{name}.{transient}"


def offset_from_file_name(name: str) -> int:
    """Kafka's ``offsetFromFileName``: the decimal number before the first dot.

    Raises
    ------
    LogDirError
        When there is no dot or the prefix is not a decimal int64.
    """
    dot = name.find(".")
    prefix = name[:dot] if dot >= 0 else ""
    if not _DIGITS.match(prefix) or int(prefix) > INT64_MAX:
        raise _error("file name does not start with a decimal offset followed by '.'", name)
    return int(prefix)


def parse_segment_file_name(name: str) -> SegmentFileName:
    """Parse a segment-level file name (``.log``/``.index``/``.timeindex``/``.txnindex``/
    ``.snapshot``, optionally followed by ``.deleted``/``.cleaned``/``.swap``).

    Raises
    ------
    LogDirError
        When the name is not of that form (e.g. a KRaft ``.checkpoint``, ``partition.metadata``).
    """
    canonical = _CANONICAL_SEGMENT_FILE.fullmatch(name)  # most names: one match, no checks
    if canonical and (offset := int(canonical[1])) <= INT64_MAX:
        return SegmentFileName(offset, canonical[2], None, True)
    offset = offset_from_file_name(name)
    parts = name.split(".")
    transient = None
    if len(parts) == 3 and parts[2] in TRANSIENT_SUFFIXES:
        transient = parts[2]
    elif len(parts) != 2:
        raise _error("not a segment file name (<offset>.<kind>[.deleted|.cleaned|.swap])", name)
    kind = parts[1]
    if kind not in SEGMENT_FILE_KINDS:
        raise _error(f"unknown segment file kind {kind!r}; valid: {', '.join(SEGMENT_FILE_KINDS)}",
                     name)
    return SegmentFileName(offset, kind, transient, len(parts[0]) == OFFSET_DIGITS)


# --- KRaft snapshots -------------------------------------------------------------------------


@dataclass(frozen=True)
class KraftSnapshotName:
    """A KRaft snapshot file name: ``<end offset>-<epoch>.checkpoint`` with an optional
    ``.part`` (being written) or ``.deleted`` (being removed) suffix."""

    end_offset: int
    epoch: int
    state: str  # "complete", "part" or "deleted"

    @property
    def name(self) -> str:
        base = f"{format_offset(self.end_offset)}-{self.epoch:0{EPOCH_DIGITS}d}.{CHECKPOINT}"
        return base if self.state == "complete" else f"{base}.{self.state}"


def parse_kraft_snapshot_name(name: str) -> KraftSnapshotName:
    """Parse ``00000000000000007364-0000000001.checkpoint`` (and ``.part``/``.deleted``)."""
    m = _KRAFT_SNAPSHOT.match(name)
    if m is None:
        raise _error("not a KRaft snapshot name (<end offset>-<epoch>.checkpoint)", name)
    return KraftSnapshotName(int(m.group(1)), int(m.group(2)), m.group(3) or "complete")


# --- partition directories -------------------------------------------------------------------


@dataclass(frozen=True)
class PartitionDirName:
    """A parsed partition directory name.

    ``kind`` is ``None`` for a live log or one of :data:`SPECIAL_DIR_KINDS`; ``uuid`` is the
    text between the last ``.`` and the suffix of a special dir (Kafka writes 32 hex digits but
    does not check them when loading).
    """

    topic: str
    partition: int
    kind: str | None = None
    uuid: str | None = None

    @property
    def is_metadata_log(self) -> bool:
        """The KRaft metadata log, which the Raft layer loads instead of LogManager."""
        return self.topic == METADATA_TOPIC


def parse_partition_dir_name(name: str) -> PartitionDirName:
    """Parse a partition directory name the way ``LocalLog.parseTopicPartitionName`` does.

    A name ending in ``-delete``/``-future``/``-stray`` must match
    ``^(\\S+)-(\\S+)\\.(\\S+)-<suffix>$`` and is cut at its last ``.``; the rest is split at
    the last ``-`` into a non-empty topic and a decimal partition number.

    Raises
    ------
    LogDirError
        "not in the form of topic-partition" when Kafka would refuse to load the directory, or
        when the topic is not a name Kafka could have created (see the module docstring).
    """
    kind = None
    uuid = None
    base = name
    for k in SPECIAL_DIR_KINDS:
        if name.endswith(f"-{k}"):
            if not _SPECIAL_DIR_PATTERN[k].match(name):
                raise _error(f"directory name is not in the form topic-partition.uniqueId-{k}",
                             name)
            dot = name.rfind(".")
            base, kind, uuid = name[:dot], k, name[dot + 1:-len(k) - 1]
            break
    dash = base.rfind("-")
    topic, partition = base[:dash], base[dash + 1:]
    if dash <= 0 or not _DIGITS.match(partition) or int(partition) > INT32_MAX:
        raise _error("directory name is not in the form topic-partition", name)
    if not _LEGAL_TOPIC.match(topic) or topic in (".", ".."):
        raise _error("directory name is not in the form topic-partition: the topic is not a "
                     "legal Kafka topic name ([a-zA-Z0-9._-], not '.' or '..')",
                     name.encode("utf-8", "backslashreplace").decode("ascii", "replace")
                     if not name.isascii() else name)
    return PartitionDirName(topic, int(partition), kind, uuid)


def partition_dir_name(topic: str, partition: int, kind: str | None = None,
                       uuid: str | None = None) -> str:
    """The directory name Kafka uses for ``topic``/``partition`` (``LocalLog.logDirName`` and
    the ``-delete``/``-future``/``-stray`` variants).

    Parameters
    ----------
    topic, partition
        The topic-partition.
    kind : str, optional
        ``None`` for a live log, else one of :data:`SPECIAL_DIR_KINDS`.
    uuid : str, optional
        Required for special dirs: Kafka uses a random UUID without dashes (32 hex digits).

    Notes
    -----
    ``-delete`` and ``-stray`` names cut the topic so the whole name is at most 255 characters
    (``logDirNameWithSuffixCappedLength``); ``-future`` names are not capped.
    """
    if not topic or partition < 0:
        raise _error("a partition dir needs a non-empty topic and a partition >= 0",
                     f"{topic}-{partition}")
    if not _LEGAL_TOPIC.match(topic) or topic in (".", ".."):  # never a path: no '/', no '..'
        raise _error(f"illegal topic name {topic!r}: [a-zA-Z0-9._-], not '.' or '..'",
                     f"{topic!r}-{partition}")
    if kind is None:
        return f"{topic}-{partition}"
    if kind not in SPECIAL_DIR_KINDS or not uuid:
        raise _error(f"special dir kind must be one of {', '.join(SPECIAL_DIR_KINDS)} with a "
                     f"uuid", f"{topic}-{partition}")
    suffix = f"-{partition}.{uuid}-{kind}"
    if kind == FUTURE_DIR:
        return topic + suffix
    return topic[:max(0, min(len(topic), MAX_DIR_NAME_LENGTH - len(suffix)))] + suffix


# --- classification helpers ----------------------------------------------------------------


def is_transient(name: str) -> bool:
    """Whether ``name`` carries a ``.deleted``/``.cleaned``/``.swap`` suffix."""
    return name.endswith(_TRANSIENT_ENDINGS)


def is_tmp(name: str) -> bool:
    """A temp file of the atomic write protocol (§11.1), left behind by a crash."""
    return name.endswith(TMP_SUFFIX)


def check_topic(topic: str) -> None:
    """Raise :class:`InvalidOptionError` unless ``topic`` is a legal Kafka topic name."""
    if (not topic or len(topic) > MAX_TOPIC_LENGTH or topic in (".", "..")
            or not _LEGAL_TOPIC.match(topic)):
        raise InvalidOptionError(
            f"illegal topic name {topic!r}: 1-{MAX_TOPIC_LENGTH} characters of [a-zA-Z0-9._-], "
            "not '.' or '..'")
