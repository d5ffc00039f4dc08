"""What one ``kafka-dump-log.sh`` run is asked and what it found (inspect layer):
:class:`DumpOptions` (DumpLogSegments' flags, checked on construction) and
:class:`DumpReport` (Kafka's end-of-run reports and the errors)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..codec.compression.codecs import DEFAULT_MAX_DECOMPRESSED
from ..errors import InvalidOptionError
from ..tiered.tier import RemoteTier

JAVA_INT_MAX = 2**31 - 1  # Integer.MAX_VALUE: --max-bytes default; only then the trailing-bytes line
DEFAULT_MAX_MESSAGE_SIZE = 5 * 1024 * 1024  # --max-message-size
DECODERS = ("string", "offsets", "transaction-log", "cluster-metadata", "remote-log-metadata")
FORMATS = ("text", "jsonl")


@dataclass(frozen=True)
class DumpOptions:
    """DumpLogSegments' options (§16.1); every value checked on construction.

    ``print_data_log`` implies deep iteration; a decoder other than ``"string"`` implies
    ``print_data_log``. ``max_bytes`` left at ``JAVA_INT_MAX`` means "not given" (Kafka prints
    the trailing-bytes warning only then).
    """

    deep_iteration: bool = False
    print_data_log: bool = False
    verify_index_only: bool = False
    index_sanity_check: bool = False
    max_message_size: int = DEFAULT_MAX_MESSAGE_SIZE
    max_bytes: int = JAVA_INT_MAX
    decoder: str = "string"
    skip_record_metadata: bool = False
    format: str = "text"
    max_decompressed: int = DEFAULT_MAX_DECOMPRESSED
    # tiered storage: a partition dir dumps its remote segments first, and a remote copy's
    # files (<offset>-<segment id>.<suffix>) are dumped as the broker's segment files
    remote_tier: RemoteTier | None = None

    def __post_init__(self) -> None:
        if self.decoder not in DECODERS:
            raise InvalidOptionError(f"decoder must be one of {', '.join(DECODERS)}; "
                                     f"got {self.decoder!r}")
        if self.format not in FORMATS:
            raise InvalidOptionError(f"format must be one of {', '.join(FORMATS)}; got {self.format!r}")
        for name in ("max_message_size", "max_bytes"):
            value = getattr(self, name)
            if not isinstance(value, int) or not 0 <= value <= JAVA_INT_MAX:
                raise InvalidOptionError(f"{name} must be an int in 0..{JAVA_INT_MAX}; got {value!r}")

    @property
    def print_data(self) -> bool:
        return self.print_data_log or self.decoder != "string"

    @property
    def deep(self) -> bool:
        return self.deep_iteration or self.print_data


class ReportMap:
    """``file -> findings`` of one DumpLogSegments report, iterated in the order of the Scala
    2.13 ``mutable.Map`` it keeps them in (keyed by the file's absolute path).

    That map is a hash table of buckets: 16 to start, doubled whenever a ``put`` finds the
    entries + 1 at 3/4 of it — before it looks for the key, so an update can grow it too. A key
    goes to bucket ``h & (size - 1)``, with ``h`` Java's ``String.hashCode`` xor its upper 16
    bits; a bucket lists its keys by ``h`` (signed), then as they came. Iteration walks the
    buckets in order. ``newest_first`` is for Kafka's ``List`` reports (``seq ::= item;
    map.put(file, seq)`` on every finding: the findings print last first); the others append
    to a buffer put in the map with its first finding.
    """

    def __init__(self, newest_first: bool = False) -> None:
        self.newest_first = newest_first
        self._findings: dict[str, list[tuple[int, int]]] = {}
        self._table_size = 16

    def add(self, file: str, finding: tuple[int, int]) -> None:
        if self.newest_first or file not in self._findings:
            if len(self._findings) + 1 >= self._table_size * 3 // 4:
                self._table_size *= 2
        self._findings.setdefault(file, []).append(finding)

    def items(self) -> list[tuple[str, list[tuple[int, int]]]]:
        arrival = {f: i for i, f in enumerate(self._findings)}
        hashes = {f: _scala_string_hash(f) for f in self._findings}
        order = sorted(self._findings, key=lambda f: (hashes[f] & (self._table_size - 1),
                                                      hashes[f], arrival[f]))
        return [(f, self._findings[f][::-1] if self.newest_first else self._findings[f])
                for f in order]

    def __bool__(self) -> bool:
        return bool(self._findings)


def _scala_string_hash(text: str) -> int:
    """Java's ``String.hashCode`` (over UTF-16 code units) improved as Scala's ``HashMap`` does
    (``h ^ (h >>> 16)``), as a signed 32-bit int."""
    h = 0
    units = text.encode("utf-16-be", "surrogatepass")
    for i in range(0, len(units), 2):
        h = (31 * h + (units[i] << 8 | units[i + 1])) & 0xFFFFFFFF
    h ^= h >> 16
    return h - (1 << 32) if h & 0x80000000 else h


@dataclass
class DumpReport:
    """What a run found besides its output: Kafka's end-of-run reports and the errors."""

    index_mismatches: ReportMap = field(default_factory=lambda: ReportMap(newest_first=True))
    time_mismatches: ReportMap = field(default_factory=ReportMap)
    time_out_of_order: ReportMap = field(default_factory=ReportMap)
    time_not_found: ReportMap = field(default_factory=ReportMap)
    non_consecutive: ReportMap = field(default_factory=lambda: ReportMap(newest_first=True))
    errors: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """No errors (mismatch reports do not count: Kafka exits 0 with them too)."""
        return not self.errors

    def text_lines(self) -> list[str]:
        """The end-of-run stderr lines, in DumpLogSegments' order and wording."""
        out: list[str] = []
        for f, rows in self.index_mismatches.items():
            out.append(f"Mismatches in :{f}")
            out += [f"  Index offset: {i}, log offset: {o}" for i, o in rows]
        for f, rows in self.time_mismatches.items():
            out.append(f"Found timestamp mismatch in :{f}")
            out += [f"  Index timestamp: {a}, log timestamp: {b}" for a, b in rows]
        for f, rows in self.time_out_of_order.items():
            out.append(f"Found out of order timestamp in :{f}")
            out += [f"  Index timestamp: {a}, Previously indexed timestamp: {b}" for a, b in rows]
        for _, rows in self.time_not_found.items():
            out.append("The following indexed offsets are not found in the log.")
            out += [f"Indexed offset: {a}, found log offset: {b}" for a, b in rows]
        for f, rows in self.non_consecutive.items():
            out.append(f"Non-consecutive offsets in {f}")
            out += [f"  {a} is followed by {b}" for a, b in rows]
        return out

    def objects(self) -> list[dict[str, Any]]:
        """The same reports as JSON-lines objects."""
        out: list[dict[str, Any]] = []
        for kind, table, names in (
                ("index_mismatch", self.index_mismatches, ("index_offset", "log_offset")),
                ("time_index_mismatch", self.time_mismatches, ("index_timestamp", "log_timestamp")),
                ("time_index_out_of_order", self.time_out_of_order,
                 ("index_timestamp", "previous_index_timestamp")),
                ("time_index_offset_not_found", self.time_not_found,
                 ("index_offset", "log_offset")),
                ("non_consecutive_offsets", self.non_consecutive, ("previous", "next"))):
            for f, rows in table.items():
                out += [{"type": kind, "file": f, names[0]: a, names[1]: b} for a, b in rows]
        return out
