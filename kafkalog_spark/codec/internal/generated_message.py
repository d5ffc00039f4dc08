"""Kafka's generated-message encoding read from field tables (codec layer): the reader behind
the internal topic decoders (:mod:`.internal_topics`, :mod:`.kraft_records`).

Every internal topic record is a Kafka "generated message" encoding (KAFKA_FORMATS §1.2),
described by field tables taken from Kafka's JSON schemas::

    coordinator key    int16 record type | key struct at that version
    coordinator value  int16 value version | value struct        (null value = tombstone)
    metadata value     uvarint frameVersion (1) | uvarint apiKey | uvarint version | struct
    control value      struct at version 0 (its first field is an int16 "Version")

    non-flexible  string int16 len (-1 null), bytes int32 len, array int32 count (-1 null)
    flexible      lengths/counts are uvarint(n + 1) (0 null); every struct ends with
                  uvarint count, then per tagged field: uvarint tag, uvarint size, payload

Output dicts are JSON-serialisable and follow DumpLogSegments' decoders: field names in
Kafka's JSON spelling (lower camel case), ``bytes`` as base64, ``uuid`` in Kafka's text form
(URL-safe base64 without padding). Unknown record types are reported, never fatal.
"""

from __future__ import annotations

import base64
import struct
from typing import Any, Callable, NamedTuple

from kafkalog_spark.errors import CorruptRecordError, Location

_I8, _I16, _U16, _I32, _I64, _F64 = (struct.Struct(f) for f in (">b", ">h", ">H", ">i", ">q", ">d"))


class _Short(Exception):
    """Internal: a read past the end of the buffer."""


class _Reader:
    """Cursor over one encoded message; ``flexible`` selects compact lengths + tagged fields."""

    __slots__ = ("buf", "pos", "flexible")

    def __init__(self, buf: bytes, pos: int = 0, flexible: bool = False) -> None:
        self.buf, self.pos, self.flexible = buf, pos, flexible

    def take(self, n: int) -> bytes:
        end = self.pos + n
        if n < 0 or end > len(self.buf):
            raise _Short(f"needs {n} bytes at {self.pos}, {len(self.buf) - self.pos} left")
        out = self.buf[self.pos:end]
        self.pos = end
        return out

    def fixed(self, fmt: struct.Struct) -> Any:
        if self.pos + fmt.size > len(self.buf):
            raise _Short(f"needs {fmt.size} bytes at {self.pos}, {len(self.buf) - self.pos} left")
        value = fmt.unpack_from(self.buf, self.pos)[0]
        self.pos += fmt.size
        return value

    def uvarint(self) -> int:
        result = shift = 0
        while True:
            byte = self.take(1)[0]
            result |= (byte & 0x7F) << shift
            if byte < 0x80:
                return result
            shift += 7
            if shift > 28:
                raise ValueError(f"unsigned varint longer than 5 bytes before {self.pos}")

    def length(self, nullable: bool, fixed: struct.Struct) -> int:
        n = self.uvarint() - 1 if self.flexible else self.fixed(fixed)
        if n < 0:
            if nullable:  # non-flexible readers treat any negative length as null
                return -1
            raise ValueError(f"negative length {n} for a non-nullable field before {self.pos}")
        return n

    def string(self, nullable: bool = False) -> str | None:
        n = self.length(nullable, _I16)
        return None if n < 0 else self.take(n).decode("utf-8")

    def blob(self, nullable: bool = False) -> bytes | None:
        n = self.length(nullable, _I32)
        return None if n < 0 else self.take(n)

    def array(self, element: Callable[[], Any], nullable: bool = False) -> list[Any] | None:
        n = self.length(nullable, _I32)
        if n < 0:
            return None
        if n > len(self.buf) - self.pos:  # every element takes >= 1 byte: bounds the list
            raise _Short(f"array of {n} elements at {self.pos} exceeds the remaining bytes")
        return [element() for _ in range(n)]


def _uuid_text(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).decode("ascii").rstrip("=")


class Field(NamedTuple):
    """One schema field: ``kind`` is a primitive name, ``"[]" + primitive``, a tuple of
    Fields (array of structs) or a :class:`Struct`; ``first``/``last`` bound the versions that carry it; ``tag`` makes
    it a tagged field (flexible versions only)."""

    name: str
    kind: Any
    first: int = 0
    last: int | None = None
    nullable: bool = False
    tag: int | None = None
    default: Any = None


_PRIMITIVES: dict[str, Callable[[_Reader], Any]] = {
    "int8": lambda r: r.fixed(_I8),
    "int16": lambda r: r.fixed(_I16),
    "uint16": lambda r: r.fixed(_U16),
    "int32": lambda r: r.fixed(_I32),
    "int64": lambda r: r.fixed(_I64),
    "float64": lambda r: r.fixed(_F64),
    "bool": lambda r: r.fixed(_I8) != 0,
    "uuid": lambda r: _uuid_text(r.take(16)),
    "string": lambda r: r.string(),
    "bytes": lambda r: base64.b64encode(r.blob()).decode("ascii"),  # type: ignore[arg-type]
}


class Struct(NamedTuple):
    """Field kind of a single nested struct (not an array); flexible ones end in tagged fields."""

    fields: tuple[Field, ...]


def _read_value(r: _Reader, f: Field, version: int) -> Any:
    kind = f.kind
    if isinstance(kind, Struct):
        return _read_struct(r, kind.fields, version)
    if isinstance(kind, tuple):
        return r.array(lambda: _read_struct(r, kind, version), f.nullable)
    if kind.startswith("[]"):
        element = _PRIMITIVES[kind[2:]]
        return r.array(lambda: element(r), f.nullable)
    if f.nullable and kind == "string":
        return r.string(True)
    if f.nullable and kind == "bytes":
        raw = r.blob(True)
        return None if raw is None else base64.b64encode(raw).decode("ascii")
    return _PRIMITIVES[kind](r)


def _read_struct(r: _Reader, fields: tuple[Field, ...], version: int) -> dict[str, Any]:
    out: dict[str, Any] = {}
    tagged = {}
    for f in fields:
        if version < f.first or (f.last is not None and version > f.last):
            continue
        if f.tag is not None:
            tagged[f.tag] = f
            out[f.name] = f.default
        else:
            out[f.name] = _read_value(r, f, version)
    if r.flexible:
        unknown = {}
        for _ in range(r.uvarint()):
            tag, size = r.uvarint(), r.uvarint()
            end = r.pos + size
            if tag in tagged:
                out[tagged[tag].name] = _read_value(r, tagged[tag], version)
                if r.pos != end:
                    raise ValueError(f"tagged field {tag} is {size} bytes, read {r.pos - end + size}")
            else:
                unknown[str(tag)] = base64.b64encode(r.take(size)).decode("ascii")
        if unknown:
            out["unknownTaggedFields"] = unknown
    return out


def _decode(buf: Any, pos: int, fields: tuple[Field, ...], version: int, flexible: bool,
            what: str, location: Location | None, exact: bool = True) -> dict[str, Any]:
    """Decode one struct and map every low-level failure to CorruptRecordError."""
    out, end = _decode_struct(buf, pos, fields, version, flexible, what, location)
    if exact and end != len(buf):
        raise CorruptRecordError(
            f"{what} v{version} has {len(buf) - end} unread trailing bytes", location)
    return out


def _decode_struct(buf: Any, pos: int, fields: tuple[Field, ...], version: int, flexible: bool,
                   what: str, location: Location | None) -> tuple[dict[str, Any], int]:
    """One struct and the position after it; low-level failures become CorruptRecordError."""
    r = _Reader(bytes(buf), pos, flexible)
    try:
        return _read_struct(r, fields, version), r.pos
    except (_Short, ValueError, UnicodeDecodeError, struct.error) as exc:
        raise CorruptRecordError(f"{what} v{version} is malformed: {exc}", location) from exc


def _prefix(buf: Any, what: str, location: Location | None) -> int:
    if buf is None or len(buf) < 2:
        raise CorruptRecordError(f"{what} is shorter than its 2-byte version", location)
    return int(_I16.unpack_from(bytes(buf[:2]))[0])


def _unknown(kind_key: str, kind: int, buf: Any, pos: int) -> dict[str, Any]:
    return {kind_key: kind, "name": None, "data": None, "raw": bytes(buf[pos:]).hex()}
