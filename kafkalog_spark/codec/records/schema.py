"""Arrow schema of decoded records (codec layer): Spark-compatible column names and types, and
the check of a requested subset of them (column pruning).

The base columns match Spark's Kafka source (``key, value, topic, partition, offset, timestamp,
timestampType``, ``headers`` on request). Kafka metadata columns are opt-in. One table here is
the source of truth for names, types and their documentation.

A reader may also ask for any subset of all the columns (base, ``headers`` and metadata), in any
order: :func:`check_columns` validates such a request (names, types, nullability) and
:func:`record_schema` with ``columns=`` gives its schema. The request is the whole output: the
``include_headers`` / ``include_metadata`` flags only choose the columns when none are given.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

import pyarrow as pa

from ...errors import InvalidOptionError

HEADER_TYPE = pa.struct([pa.field("key", pa.string(), nullable=False),
                         pa.field("value", pa.binary())])
HEADERS_TYPE = pa.list_(pa.field("element", HEADER_TYPE, nullable=False))

# name -> (arrow type, nullable, description)
BASE_COLUMNS: dict[str, tuple[pa.DataType, bool, str]] = {
    "key": (pa.binary(), True, "record key; null when the record has none"),
    "value": (pa.binary(), True, "record value; null for a tombstone"),
    "topic": (pa.string(), False, "topic name (from the partition directory)"),
    "partition": (pa.int32(), False, "partition number"),
    "offset": (pa.int64(), False, "record offset"),
    "timestamp": (pa.timestamp("us", tz="UTC"), True,
                  "record timestamp (LogAppendTime batches: the batch's); null for v0 / -1"),
    "timestampType": (pa.int32(), False, "-1 none (v0), 0 CreateTime, 1 LogAppendTime"),
}
HEADERS_COLUMN: dict[str, tuple[pa.DataType, bool, str]] = {
    "headers": (HEADERS_TYPE, True, "record headers in order (empty list when none; null for v0/v1)"),
}
METADATA_COLUMNS: dict[str, tuple[pa.DataType, bool, str]] = {
    "leaderEpoch": (pa.int32(), False, "partition leader epoch of the batch (-1 for v0/v1)"),
    "producerId": (pa.int64(), False, "producer id (-1 when none)"),
    "producerEpoch": (pa.int16(), False, "producer epoch (-1 when none)"),
    "sequence": (pa.int32(), False, "record sequence: baseSequence + offsetDelta (-1 when none)"),
    "isTransactional": (pa.bool_(), False, "batch belongs to a transaction"),
    "isControl": (pa.bool_(), False, "control record (transaction marker, KRaft control)"),
    "batchBaseOffset": (pa.int64(), False, "base offset of the batch holding the record"),
    "batchLastOffset": (pa.int64(), False, "last offset of the batch holding the record"),
    "magic": (pa.int8(), False, "message format version of the batch: 0, 1 or 2"),
    "compression": (pa.string(), False, "codec of the batch: none, gzip, snappy, lz4, zstd"),
}
# Column order of Spark's Kafka source
BASE_ORDER = ["key", "value", "topic", "partition", "offset", "timestamp", "timestampType"]


# every column a reader can ask for, in the order of the full schema
ALL_COLUMNS: dict[str, tuple[pa.DataType, bool, str]] = {**BASE_COLUMNS, **HEADERS_COLUMN,
                                                         **METADATA_COLUMNS}


def default_columns(include_headers: bool = False,
                    include_metadata: bool = False) -> tuple[str, ...]:
    """The column names the flags choose: the base columns, then ``headers``, then metadata."""
    names = list(BASE_COLUMNS)
    if include_headers:
        names += list(HEADERS_COLUMN)
    if include_metadata:
        names += list(METADATA_COLUMNS)
    return tuple(names)


def record_schema(include_headers: bool = False, include_metadata: bool = False,
                  columns: Sequence[str] | None = None) -> pa.Schema:
    """The schema of decoded records for the given column options; with ``columns`` (names
    from :data:`ALL_COLUMNS`, checked by :func:`check_columns`) exactly those, in that order."""
    names = default_columns(include_headers, include_metadata) if columns is None else columns
    return pa.schema([pa.field(name, ALL_COLUMNS[name][0], nullable=ALL_COLUMNS[name][1],
                               metadata={"doc": ALL_COLUMNS[name][2]}) for name in names])


Requested = tuple[str, Any, bool]  # (name, type or None for any, nullable)


def check_columns(requested: Iterable[str | Requested],
                  available: Sequence[tuple[str, Any, bool]] | None = None,
                  show: Callable[[Any], str] = str,
                  same_type: Callable[[Any, Any], bool] | None = None) -> tuple[str, ...]:
    """Validate a requested subset of the columns; returns the names in the requested order.

    Parameters
    ----------
    requested
        Names, or ``(name, type, nullable)`` triples (a schema's fields); a type of ``None``
        matches any. A non-nullable request of a column that can hold nulls is refused, the
        other way round is fine.
    available
        ``(name, type, nullable)`` of every column, in the types ``requested`` uses (Spark's
        for the data source); default: the Arrow types of :data:`ALL_COLUMNS`.
    show
        Renders a type in the error message.
    same_type
        ``same_type(requested, available)``: whether a requested type is accepted
        (default ``==``).

    Raises
    ------
    InvalidOptionError
        An unknown or repeated name, another type or nullability; the message lists every
        valid column with its type.
    """
    if available is None:
        available = [(n, t, nullable) for n, (t, nullable, _) in ALL_COLUMNS.items()]
    by_name = {n: (t, nullable) for n, t, nullable in available}
    names: list[str] = []
    for item in requested:
        name, typ, nullable = (item, None, True) if isinstance(item, str) else item
        problem = None
        if name not in by_name:
            problem = f"no column {name!r}"
        elif name in names:
            problem = f"column {name!r} is asked for twice"
        elif typ is not None and not (same_type(typ, by_name[name][0]) if same_type
                                      else typ == by_name[name][0]):
            problem = f"column {name!r} has type {show(by_name[name][0])}, not {show(typ)}"
            if show(typ) == show(by_name[name][0]):
                problem = (f"column {name!r} declares NOT NULL a nested field or element that "
                           f"can be null")
        elif not nullable and by_name[name][1]:
            problem = f"column {name!r} can be null; it cannot be declared NOT NULL"
        if problem is not None:
            valid = ", ".join(f"{n} {show(t)}" for n, t, _ in available)
            raise InvalidOptionError(f"{problem}; valid columns (any subset, any order): {valid}")
        names.append(name)
    return tuple(names)
