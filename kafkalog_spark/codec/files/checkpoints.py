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

import base64
import json
import re
import time
from dataclasses import dataclass, field
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


# ------------------------------------------------------------------------------------------
# Uuid and partition.metadata
# ------------------------------------------------------------------------------------------
_B64URL = re.compile(r"[A-Za-z0-9_-]*={0,2}\Z")
ZERO_UUID = bytes(16)


def uuid_from_string(text: str) -> bytes:
    """``Uuid.fromString``: at most 24 characters of base64url (padding optional) decoding to
    exactly 16 bytes. Raises ``ValueError``."""
    if len(text) > 24:
        raise ValueError(f"input string with prefix {text[:24]!r} is too long to be a base64 UUID")
    if not _B64URL.match(text):
        raise ValueError(f"input string {text!r} is not base64url")
    stripped = text.rstrip("=")
    try:
        raw = base64.urlsafe_b64decode(stripped + "=" * (-len(stripped) % 4))
    except ValueError as exc:
        raise ValueError(f"input string {text!r} is not base64url") from exc
    if len(raw) != 16:
        raise ValueError(f"input string {text!r} decoded as {len(raw)} bytes, not the 16 of a UUID")
    return raw


def uuid_to_string(raw: bytes) -> str:
    """``Uuid.toString``: 22 characters of unpadded base64url."""
    if len(raw) != 16:
        raise InvalidOptionError(f"a UUID is 16 bytes, got {len(raw)}")
    return base64.urlsafe_b64encode(raw).decode("ascii").rstrip("=")


@dataclass(frozen=True)
class PartitionMetadata:
    """``partition.metadata``: file version and topic id (16 bytes; ``topic_id_text`` = base64url)."""

    version: int
    topic_id: bytes

    @property
    def topic_id_text(self) -> str:
        return uuid_to_string(self.topic_id)


_META_SPLIT = re.compile(r":[ \t\n\x0b\f\r]+")


def parse_partition_metadata(text: str, *, file: str | None = None) -> PartitionMetadata:
    """``PartitionMetadataReadBuffer.read``: two ``name: value`` lines (split on ``:\\s+``, keys
    not checked), version an int ≥ 0, topic id a non-zero Uuid."""
    lines = _lines(text)
    if not lines:
        raise _error("empty partition metadata file", file, 1, 0)
    line, pos = lines[0]
    parts = _java_split(line, _META_SPLIT)
    version = _java_int(parts[1], 32) if len(parts) == 2 else None
    if version is None:
        raise _error(f"malformed line {line!r}", file, 1, pos)
    if version < PARTITION_METADATA_VERSION:
        raise _error(f"unrecognized partition metadata version {version}", file, 1, pos)
    if len(lines) < 2:
        raise _error("missing topic_id line", file, 2, len(text.encode("utf-8")))
    line, pos = lines[1]
    parts = _java_split(line, _META_SPLIT)
    if len(parts) != 2:
        raise _error(f"malformed line {line!r}", file, 2, pos)
    try:
        topic_id = uuid_from_string(parts[1])
    except ValueError as exc:
        raise _error(f"bad topic id: {exc}", file, 2, pos) from exc
    if topic_id == ZERO_UUID:
        raise _error("invalid topic id (the zero UUID)", file, 2, pos)
    return PartitionMetadata(version, topic_id)


def format_partition_metadata(topic_id: bytes | str, version: int = PARTITION_METADATA_VERSION) -> str:
    """Exact ``partition.metadata`` content (no trailing newline)."""
    raw = uuid_from_string(topic_id) if isinstance(topic_id, str) else topic_id
    if raw == ZERO_UUID:
        raise InvalidOptionError("the zero UUID is not a valid topic id")
    return f"version: {version}\ntopic_id: {uuid_to_string(raw)}"


# ------------------------------------------------------------------------------------------
# Java properties and meta.properties
# ------------------------------------------------------------------------------------------
_PROP_WS = " \t\f"
_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


def _logical_lines(text: str) -> list[tuple[str, int]]:
    """``Properties.LineReader``: skip blank and comment lines, join backslash continuations."""
    natural = _lines(text)
    out = []
    i = 0
    while i < len(natural):
        line, line_no = natural[i][0].lstrip(_PROP_WS), i + 1
        i += 1
        if not line or line[0] in "#!":
            continue
        while (len(line) - len(line.rstrip("\\"))) % 2 == 1:
            line = line[:-1]
            if i >= len(natural):
                break
            line += natural[i][0].lstrip(_PROP_WS)
            i += 1
        out.append((line, line_no))
    return out


def _unescape(s: str, file: str | None, line_no: int) -> str:
    out = []
    i = 0
    while i < len(s):
        c = s[i]
        i += 1
        if c != "\\" or i >= len(s):
            out.append(c)
            continue
        c = s[i]
        i += 1
        if c == "u":
            digits = s[i: i + 4]
            if len(digits) != 4 or not re.fullmatch(r"[0-9a-fA-F]{4}", digits):
                raise _error("malformed \\uxxxx encoding", file, line_no, None)
            out.append(chr(int(digits, 16)))
            i += 4
        else:
            out.append(_ESCAPES.get(c, c))
    return "".join(out)


def parse_java_properties(text: str, *, file: str | None = None) -> dict[str, str]:
    """``java.util.Properties.load``: ``key=value`` / ``key:value`` / ``key value`` lines, ``#``
    and ``!`` comments, backslash continuations and escapes. File order; a repeated key keeps
    its last value."""
    props: dict[str, str] = {}
    for line, line_no in _logical_lines(text):
        n = len(line)
        key_end = value_start = n
        has_sep = backslash = False
        for i, c in enumerate(line):
            if c in "=:" and not backslash:
                key_end, value_start, has_sep = i, i + 1, True
                break
            if c in _PROP_WS and not backslash:
                key_end, value_start = i, i + 1
                break
            backslash = c == "\\" and not backslash
        while value_start < n:
            c = line[value_start]
            if c not in _PROP_WS:
                if has_sep or c not in "=:":
                    break
                has_sep = True
            value_start += 1
        props[_unescape(line[:key_end], file, line_no)] = _unescape(line[value_start:], file, line_no)
    return props


def _escape(s: str, is_key: bool) -> str:
    out = []
    for i, c in enumerate(s):
        if c == " ":
            out.append("\\ " if (i == 0 or is_key) else " ")
        elif c in "\t\n\r\f":
            out.append("\\" + {"\t": "t", "\n": "n", "\r": "r", "\f": "f"}[c])
        elif c in "=:#!\\":
            out.append("\\" + c)
        else:
            out.append(c)
    return "".join(out)


_DAYS = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")
_MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")


def java_date_string(epoch_seconds: float | None = None) -> str:
    """``java.util.Date.toString()`` in UTC, e.g. ``Thu Oct 10 11:57:10 UTC 2024`` (locale-free)."""
    t = time.gmtime(time.time() if epoch_seconds is None else epoch_seconds)
    return (f"{_DAYS[t.tm_wday]} {_MONTHS[t.tm_mon - 1]} {t.tm_mday:02d} "
            f"{t.tm_hour:02d}:{t.tm_min:02d}:{t.tm_sec:02d} UTC {t.tm_year}")


def format_java_properties(props: dict[str, str], *, date: str | None = None) -> str:
    """``Properties.store(writer, "")``: a ``#`` line, a ``#<date>`` line, then ``key=value``
    lines in the mapping's order (Java's order is its hash table's)."""
    lines = ["#", "#" + (date if date is not None else java_date_string())]
    lines += [f"{_escape(k, True)}={_escape(v, False)}" for k, v in props.items()]
    return "".join(line + "\n" for line in lines)


@dataclass(frozen=True)
class MetaProperties:
    """``meta.properties`` of a log dir, validated as ``MetaProperties.Builder`` does.

    ``node_id`` is ``broker.id`` for v0 (optional) and ``node.id`` for v1 (required).
    ``properties`` keeps every key in file order (for byte-identical re-formatting).
    """

    version: int
    cluster_id: str | None
    node_id: int | None
    directory_id: bytes | None
    properties: dict[str, str] = field(default_factory=dict, compare=False)


def parse_meta_properties(text: str, *, file: str | None = None) -> MetaProperties:
    """Parse and validate ``meta.properties`` (v0 ZooKeeper era, v1 KRaft)."""
    props = parse_java_properties(text, file=file)

    def required_int(key: str) -> int:
        if key not in props:
            raise _error(f"failed to find required property {key}", file, None, None)
        value = _java_int(props[key], 32)
        if value is None:
            raise _error(f"unable to read {key} as a base-10 number: {props[key]!r}", file, None, None)
        return value

    raw_version = props.get("version", "0")
    version = _java_int(raw_version, 32)
    if version not in (0, 1):
        raise _error(f"unknown meta.properties version {raw_version!r}", file, None, None)
    if version == 0:
        node_id = required_int("broker.id") if "broker.id" in props else None
    else:
        node_id = required_int("node.id")
    cluster_id = props.get("cluster.id")
    if version == 1 and cluster_id is None:
        raise _error("cluster.id was not found", file, None, None)
    directory_id = None
    if "directory.id" in props:
        try:
            directory_id = uuid_from_string(props["directory.id"])
        except ValueError as exc:
            raise _error(f"unable to read directory.id as a Uuid: {exc}", file, None, None) from exc
    return MetaProperties(version, cluster_id, node_id, directory_id, props)


def format_meta_properties(meta: MetaProperties, *, date: str | None = None) -> str:
    """``meta.properties`` text: the stored properties (order kept) with the validated fields."""
    props = dict(meta.properties)
    props["version"] = str(meta.version)
    if meta.node_id is not None:
        props["broker.id" if meta.version == 0 else "node.id"] = str(meta.node_id)
    if meta.cluster_id is not None:
        props["cluster.id"] = meta.cluster_id
    if meta.directory_id is not None:
        props["directory.id"] = uuid_to_string(meta.directory_id)
    return format_java_properties(props, date=date)


# ------------------------------------------------------------------------------------------
# .kafka_cleanshutdown
# ------------------------------------------------------------------------------------------
def parse_clean_shutdown(text: str) -> int | None:
    """Broker epoch from a ``.kafka_cleanshutdown`` marker; ``None`` for an empty (older
    brokers) or unparsable file — only the file's existence signals a clean shutdown."""
    try:
        content = json.loads(text)
    except ValueError:
        return None
    epoch = content.get("brokerEpoch") if isinstance(content, dict) else None
    return epoch if isinstance(epoch, int) and not isinstance(epoch, bool) else None


def format_clean_shutdown(broker_epoch: int) -> str:
    """``{"version":0,"brokerEpoch":N}`` exactly as Jackson writes it (no newline)."""
    return json.dumps({"version": 0, "brokerEpoch": int(broker_epoch)}, separators=(",", ":"))
