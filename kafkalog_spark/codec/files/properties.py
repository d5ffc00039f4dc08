"""Key-value metadata files (codec layer): parse and format, text in / text out (KAFKA_FORMATS §11):

* ``partition.metadata``: ``version: 0\\ntopic_id: <22-char base64url>`` (no trailing newline), and
  Kafka's ``Uuid`` string form
* ``meta.properties``: Java ``Properties.store`` text, ``#`` and ``#<date>`` header lines
* ``.kafka_cleanshutdown``: ``{"version":0,"brokerEpoch":<long>}`` or empty

The line-based checkpoint files are :mod:`.checkpoints`; reading and writing files lives in
:mod:`kafkalog_spark.storage.atomic`.
"""

from __future__ import annotations

import base64
import json
import os
import re
import time
from dataclasses import dataclass, field

from ...errors import InvalidOptionError
from .checkpoints import PARTITION_METADATA_VERSION, _error, _java_int, _java_split, _lines

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


def random_uuid() -> str:
    """A new id as Kafka's ``Uuid.randomUuid`` makes one: never a reserved id (zero, or the
    metadata topic's ``AAAAAAAAAAAAAAAAAAAAAQ``) and never one whose string has a ``-``: Kafka's
    command-line tools read ``-t -abc...`` as an option (Kafka 3.x/4.x excluded a leading ``-``,
    KAFKA-20072 any ``-``)."""
    while True:
        raw = bytearray(os.urandom(16))
        raw[6] = (raw[6] & 0x0F) | 0x40  # version 4
        raw[8] = (raw[8] & 0x3F) | 0x80  # IETF variant
        text = uuid_to_string(bytes(raw))
        if "-" not in text:
            return text


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
