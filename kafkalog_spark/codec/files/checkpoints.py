"""Checkpoint and metadata text files (codec layer): parse and format, text in / text out
(KAFKA_FORMATS §11). Reading and writing files lives in :mod:`kafkalog_spark.storage.atomic`.

Generic checkpoint (``CheckpointFile``; lines end with ``\\n``)::

    <version>
    <entry count>
    <entry line> × count

* offset checkpoints (``recovery-point-offset-checkpoint``, ``log-start-offset-checkpoint``,
  ``replication-offset-checkpoint``, ``cleaner-offset-checkpoint``): version 0, ``topic partition offset``
* ``leader-epoch-checkpoint``: version 0, ``epoch startOffset``
* ``partition.metadata``: ``version: 0\\ntopic_id: <22-char base64url>`` (no trailing newline)
* ``meta.properties``: Java ``Properties.store`` text, ``#`` and ``#<date>`` header lines
* ``.kafka_cleanshutdown``: ``{"version":0,"brokerEpoch":<long>}`` or empty
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Callable, TypeVar

from ...errors import CorruptCheckpointError, InvalidOptionError, Location

T = TypeVar("T")

OFFSET_CHECKPOINT_VERSION = 0
LEADER_EPOCH_CHECKPOINT_VERSION = 0
PARTITION_METADATA_VERSION = 0

_LINE_BREAK = re.compile(r"\r\n|\r|\n")  # BufferedReader.readLine
_JAVA_WS = re.compile(r"[ \t\n\x0b\f\r]+")  # java.util.regex \s
_JAVA_INT = re.compile(r"[+-]?[0-9]+\Z")
_TOPIC = re.compile(r"[a-zA-Z0-9._-]+\Z")


def _lines(text: str) -> list[tuple[str, int]]:
    """Lines as Java's ``readLine`` returns them, each with its byte position."""
    out = []
    start = 0
    byte_pos = 0
    for m in _LINE_BREAK.finditer(text):
        out.append((text[start: m.start()], byte_pos))
        byte_pos += len(text[start: m.end()].encode("utf-8"))
        start = m.end()
    if start < len(text):
        out.append((text[start:], byte_pos))
    return out


def _java_split(line: str, pattern: re.Pattern[str]) -> list[str]:
    """``String.split(regex)``: a leading empty part is kept, trailing empty parts dropped."""
    parts = pattern.split(line)
    while parts and parts[-1] == "":
        parts.pop()
    return parts


def _java_int(text: str, bits: int) -> int | None:
    """``Integer.parseInt`` / ``Long.parseLong`` (ASCII digits): ``None`` when it would throw."""
    if not _JAVA_INT.match(text):
        return None
    value = int(text)
    return value if -(1 << (bits - 1)) <= value < (1 << (bits - 1)) else None


def _error(message: str, file: str | None, line_no: int | None, position: int | None) -> CorruptCheckpointError:
    where = f" at line {line_no}" if line_no is not None else ""
    return CorruptCheckpointError(message + where, Location(file, position))


# ------------------------------------------------------------------------------------------
# generic checkpoint
# ------------------------------------------------------------------------------------------
def parse_checkpoint(text: str, version: int, parse_entry: Callable[[str], T | None], *,
                     file: str | None = None) -> list[T]:
    """Parse a ``CheckpointFile`` with Kafka's reader rules.

    Empty text → no entries; the first line must be ``version``; a missing count line → no
    entries; every further line must parse with ``parse_entry`` (``None`` = malformed) and
    their number must equal the count.
    """
    lines = _lines(text)
    if not lines:
        return []
    first, pos = lines[0]
    read_version = _java_int(first, 32)
    if read_version is None:
        raise _error(f"malformed version line {first!r}", file, 1, pos)
    if read_version != version:
        raise _error(f"unrecognised version {read_version}, expected {version}", file, 1, pos)
    if len(lines) == 1:
        return []
    count_line, pos = lines[1]
    expected = _java_int(count_line, 32)
    if expected is None:
        raise _error(f"malformed entry count line {count_line!r}", file, 2, pos)
    entries: list[T] = []
    for line_no, (line, pos) in enumerate(lines[2:], start=3):
        entry = parse_entry(line)
        if entry is None:
            raise _error(f"malformed line {line!r}", file, line_no, pos)
        entries.append(entry)
    if len(entries) != expected:
        raise _error(f"expected {expected} entries but found {len(entries)}", file, None, None)
    return entries


def format_checkpoint(version: int, entry_lines: list[str]) -> str:
    """``CheckpointFile.write`` content: version, count, one line per entry, ``\\n`` endings."""
    return "".join(f"{line}\n" for line in [str(version), str(len(entry_lines)), *entry_lines])


# ------------------------------------------------------------------------------------------
# offset checkpoints
# ------------------------------------------------------------------------------------------
def _offset_entry(line: str) -> tuple[str, int, int] | None:
    parts = _java_split(line, _JAVA_WS)
    if len(parts) != 3:
        return None
    partition, offset = _java_int(parts[1], 32), _java_int(parts[2], 64)
    if partition is None or offset is None:
        return None
    return parts[0], partition, offset


def parse_offset_checkpoint(text: str, *, file: str | None = None) -> dict[tuple[str, int], int]:
    """Parse an offset checkpoint into ``{(topic, partition): offset}`` in file order (a repeated
    partition keeps its last value, as Kafka's map does)."""
    return {(t, p): o for t, p, o in parse_checkpoint(text, OFFSET_CHECKPOINT_VERSION, _offset_entry, file=file)}


def format_offset_checkpoint(offsets: dict[tuple[str, int], int]) -> str:
    """Offset checkpoint text, lines in the mapping's order (Kafka's order is its map's)."""
    lines = []
    for (topic, partition), offset in offsets.items():
        if not _TOPIC.match(topic):
            raise InvalidOptionError(f"topic name {topic!r} is not a legal Kafka topic name")
        lines.append(f"{topic} {int(partition)} {int(offset)}")
    return format_checkpoint(OFFSET_CHECKPOINT_VERSION, lines)


# ------------------------------------------------------------------------------------------
# leader epoch checkpoint and LeaderEpochFileCache rules
# ------------------------------------------------------------------------------------------
@dataclass(frozen=True, order=True)
class EpochEntry:
    """"Leader epoch ``epoch`` began at offset ``start_offset``"."""

    epoch: int
    start_offset: int


def _epoch_entry(line: str) -> EpochEntry | None:
    parts = _java_split(line, _JAVA_WS)
    if len(parts) != 2:
        return None
    epoch, start = _java_int(parts[0], 32), _java_int(parts[1], 64)
    return None if epoch is None or start is None else EpochEntry(epoch, start)


def parse_leader_epoch_checkpoint(text: str, *, file: str | None = None) -> list[EpochEntry]:
    """Entries of a ``leader-epoch-checkpoint`` exactly as stored (see :func:`load_leader_epochs`
    for what the broker's cache makes of them)."""
    return parse_checkpoint(text, LEADER_EPOCH_CHECKPOINT_VERSION, _epoch_entry, file=file)


def format_leader_epoch_checkpoint(entries: list[EpochEntry]) -> str:
    return format_checkpoint(LEADER_EPOCH_CHECKPOINT_VERSION, [f"{e.epoch} {e.start_offset}" for e in entries])


def assign_leader_epoch(entries: list[EpochEntry], epoch: int, start_offset: int) -> list[EpochEntry]:
    """``LeaderEpochFileCache.assign``: the cache after recording ``(epoch, start_offset)``.

    Nothing changes unless the epoch differs from the latest one or the start offset is lower
    than the latest start offset; otherwise entries from the end with epoch ≥ ``epoch`` or start
    offset ≥ ``start_offset`` are removed first, keeping both columns strictly increasing.
    """
    if epoch < 0 or start_offset < 0:
        raise InvalidOptionError(f"invalid leader epoch entry: epoch {epoch}, start offset {start_offset}")
    if entries and not (epoch != entries[-1].epoch or start_offset < entries[-1].start_offset):
        return list(entries)
    kept = list(entries)
    while kept and (kept[-1].epoch >= epoch or kept[-1].start_offset >= start_offset):
        kept.pop()
    kept.append(EpochEntry(epoch, start_offset))
    return sorted(kept)  # the cache is a TreeMap keyed by epoch


def load_leader_epochs(entries: list[EpochEntry]) -> list[EpochEntry]:
    """The cache built from a checkpoint's entries (the constructor assigns them one by one)."""
    cache: list[EpochEntry] = []
    for e in entries:
        cache = assign_leader_epoch(cache, e.epoch, e.start_offset)
    return cache


def truncate_epochs_from_end(entries: list[EpochEntry], end_offset: int) -> list[EpochEntry]:
    """``truncateFromEnd``: drop trailing entries whose start offset ≥ ``end_offset``."""
    kept = list(entries)
    if end_offset >= 0:
        while kept and kept[-1].start_offset >= end_offset:
            kept.pop()
    return kept


def truncate_epochs_from_start(entries: list[EpochEntry], start_offset: int) -> list[EpochEntry]:
    """``truncateFromStart``: drop leading entries with start offset ≤ ``start_offset`` and
    re-add the last dropped epoch as starting at ``start_offset``."""
    i = 0
    while i < len(entries) and entries[i].start_offset <= start_offset:
        i += 1
    removed = entries[:i]
    kept = list(entries[i:])
    if removed:
        kept.insert(0, EpochEntry(removed[-1].epoch, start_offset))
    return kept
