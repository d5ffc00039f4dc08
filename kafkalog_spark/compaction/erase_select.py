"""What ``kafkalog erase`` removes (log-management layer): a key set (``--keys FILE``) or a SQL
predicate (``--where``) over a record's columns, each answering "which offsets of these decoded
rows match", plus the audit fields that name the selection without revealing it.

The predicate speaks DataFusion's SQL — the engine behind delta-rs's DELETE, so the same text
selects the same records in the log dirs and in the migrate tables. Its columns are the
decoded record's (``codec.records.schema``: ``key``, ``value``, ``timestamp``, ``headers``, ``offset``,
``partition``, the metadata columns, spelled as the schema spells them: ``producerId = 7``);
only those it names are decoded. Control records (transaction markers) never match.
"""

from __future__ import annotations

import base64
import hashlib
import os
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..codec.records.decode import DecodeOptions
from ..codec.records.digest import key_digests
from ..codec.records.schema import ALL_COLUMNS, record_schema
from ..errors import InvalidOptionError, KafkaLogError, Location
from ..storage import storage_for

DEFAULT_MAX_KEYS = 1 << 20
TABLE = "records"  # the name a predicate's rows go by in its SQL
ROW = "__kafkalog_row"  # the row numbers a predicate's query returns


class Matcher(Protocol):
    """One pass's test: the columns it needs decoded, and which rows match."""

    options: DecodeOptions

    def select(self, rows: pa.Table, where: str) -> np.ndarray:
        """Indices of the matching rows of ``rows`` (control records never match); ``where``
        names the rows' file or table in errors."""


def read_keys(path: str | os.PathLike[str], encoding: str = "utf8") -> list[bytes]:
    """The keys of a keys file: one per line (``utf8`` text, or ``hex`` / ``base64`` for binary
    keys); blank lines are skipped. Refuses a missing or empty file."""
    p = Path(path)
    fs = storage_for(p)
    if not fs.is_file(p):
        raise InvalidOptionError(f"keys file {p} does not exist")
    lines = [ln for ln in fs.read_bytes(p).split(b"\n") if ln.strip(b"\r")]
    try:
        keys = [bytes.fromhex(ln.decode().strip()) if encoding == "hex"
                else base64.b64decode(ln.strip(), validate=True) if encoding == "base64"
                else ln.rstrip(b"\r") for ln in lines]
    except ValueError as exc:
        raise InvalidOptionError(f"keys file {p}: a line is not {encoding}: {exc}") from None
    if not keys:
        raise InvalidOptionError(f"keys file {p} holds no keys")
    return keys


def key_set_hash(keys: Sequence[bytes]) -> str:
    """SHA-256 over the sorted distinct keys (length-prefixed): names the key set in the audit
    report without holding any key."""
    h = hashlib.sha256()
    for k in sorted(set(keys)):
        h.update(len(k).to_bytes(8, "big"))
        h.update(k)
    return h.hexdigest()


def _data(rows: pa.Table) -> np.ndarray:
    """Which rows are data records (not control records); all of them without ``isControl``."""
    if "isControl" not in rows.column_names:
        return np.ones(rows.num_rows, bool)
    return ~np.asarray(pc.fill_null(rows.column("isControl"), False), bool)


class KeySet:
    """A chunk of keys: sorted 128-bit digests for the search, the bytes to confirm a hit."""

    options = DecodeOptions(columns=("key", "offset", "isControl"), include_control=True)

    def __init__(self, keys: Sequence[bytes]) -> None:
        arr = pa.array(list(keys), pa.binary())
        hi, lo = key_digests(arr)
        order = np.lexsort((lo, hi))
        self.hi, self.lo = hi[order], lo[order]
        # entries whose high half the next entry repeats (keys sorted by digest)
        self.shared_hi = np.append(self.hi[1:] == self.hi[:-1], False)
        self.keys = set(keys)

    def matches(self, keys: pa.Array | pa.ChunkedArray) -> np.ndarray:
        """Which of ``keys`` (null: never) are in the set."""
        hi, lo = key_digests(keys)
        a = np.searchsorted(self.hi, hi)
        at = np.minimum(a, len(self.hi) - 1)
        hit = (self.hi[at] == hi) & (self.lo[at] == lo)  # the first entry with that high half
        # rare: another key of the set shares the high half — look at the rest of that run
        for i in np.flatnonzero((self.hi[at] == hi) & ~hit & self.shared_hi[at]).tolist():
            j = int(a[i]) + 1
            while j < len(self.hi) and self.hi[j] == hi[i] and self.lo[j] != lo[i]:
                j += 1
            hit[i] = j < len(self.hi) and self.hi[j] == hi[i]
        idx = np.flatnonzero(hit)
        if len(idx):  # digests equal: confirm the bytes
            values = keys.take(pa.array(idx)).to_pylist()
            hit[idx] = [v is not None and v in self.keys for v in values]
        return hit

    def select(self, rows: pa.Table, where: str) -> np.ndarray:
        return np.flatnonzero(self.matches(rows.column("key")) & _data(rows))


class Predicate:
    """A SQL boolean expression over a record's columns, e.g. ``key = X'6b37'``,
    ``timestamp < TIMESTAMP '2024-01-01T00:00:00Z'``, ``array_has(headers,
    named_struct('key', 'customer', 'value', X'3432'))``. Checked against the record schema
    when made, so a typo fails before any file is read."""

    def __init__(self, sql: str) -> None:
        self.sql = sql.strip()
        if not self.sql:
            raise InvalidOptionError("--where needs a predicate")
        named = {c for c in ALL_COLUMNS if re.search(rf"\b{c}\b", self.sql, re.IGNORECASE)}
        columns = ["offset", "isControl"] + sorted(named - {"offset", "isControl"})
        self.options = DecodeOptions(columns=tuple(columns), include_control=True)
        self._ctx = None
        empty = record_schema(columns=list(ALL_COLUMNS)).empty_table()
        self._run(empty.append_column(ROW, pa.array([], pa.int64())), "the record schema")

    def __getstate__(self) -> dict:  # sent to Spark tasks: the session is made again there
        return {**self.__dict__, "_ctx": None}

    def select(self, rows: pa.Table, where: str) -> np.ndarray:
        numbered = rows.append_column(ROW, pa.array(np.arange(rows.num_rows))).filter(_data(rows))
        out = self._run(numbered, where).column(0)
        return out.to_numpy() if out.num_chunks else np.zeros(0, np.int64)  # no batch: no hit

    def _run(self, rows: pa.Table, where: str) -> pa.Table:
        from datafusion import SessionConfig, SessionContext

        if self._ctx is None:  # column names as the schema spells them (producerId, not quoted)
            self._ctx = SessionContext(SessionConfig().set(
                "datafusion.sql_parser.enable_ident_normalization", "false"))
        ctx = self._ctx
        ctx.from_arrow(rows, name=TABLE)
        try:
            return ctx.sql(f"SELECT {ROW} FROM {TABLE} WHERE {self.sql}").to_arrow_table()
        except Exception as exc:  # DataFusion's errors are plain exceptions: one line of it
            detail = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            if where == "the record schema":
                raise InvalidOptionError(f"--where {self.sql!r} does not parse against the "
                                         f"record columns: {detail} (columns: "
                                         f"{', '.join(ALL_COLUMNS)})") from None
            raise KafkaLogError(f"--where {self.sql!r} failed on these records: {detail}",
                                Location(where)) from None
        finally:
            ctx.deregister_table(TABLE)


@dataclass(frozen=True)
class Selection:
    """What one erase run removes: a key set, or a predicate (exactly one)."""

    keys: Sequence[bytes] | None = None
    where: str | None = None
    max_keys: int = DEFAULT_MAX_KEYS

    def __post_init__(self) -> None:
        if (self.keys is None) == (self.where is None):
            raise InvalidOptionError("erase needs either keys or a --where predicate")
        if self.keys is not None and not self.keys:
            raise InvalidOptionError("erase needs at least one key")
        if self.where is not None:  # parsed once, now: fails before anything is read
            object.__setattr__(self, "_predicate", Predicate(self.where))

    def matchers(self) -> Iterator[Matcher]:
        """One matcher per pass over the log: a key set goes ``max_keys`` keys at a time."""
        if self.where is not None:
            yield self._predicate
            return
        distinct = sorted(set(self.keys or ()))
        for i in range(0, len(distinct), self.max_keys):
            yield KeySet(distinct[i:i + self.max_keys])

    def audit(self) -> dict:
        """The report's names for the selection: hashes and counts, never a key."""
        if self.where is not None:
            return {"predicate_sha256": hashlib.sha256(self.where.encode()).hexdigest()}
        return {"key_set_sha256": key_set_hash(self.keys or ()), "keys": len(set(self.keys or ()))}
