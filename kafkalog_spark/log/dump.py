"""``kafka-dump-log.sh`` output (log layer): DumpLogSegments' text line for line, or JSON lines;
the options, the end-of-run report, and the dispatch by file kind.

Follows Kafka 4.x ``org.apache.kafka.tools.DumpLogSegments`` (KAFKA_FORMATS §16, §19.3), not the
≤3.x Scala tool: legacy record CRCs print without the stray ``}``, LEADER_CHANGE control records
print as ``LeaderChange: <json>``, the non-consecutive-offset tracker starts at −1, and the
``--transaction-log-decoder`` prints JSON. Dispatch is by the text after the last ``.`` of the
file name (§16.2)::

    .log .checkpoint   batch lines; record lines with deep iteration       (§16.3)
    .index             offset: O position: P       + "Mismatches in :" report    (§16.4)
    .timeindex         timestamp: T offset: O      + timestamp/offset reports    (§16.5)
    .txnindex          version: producerId: firstOffset: lastOffset: lastStableOffset:
    .snapshot          producerId: ... [firstSequence: ... timestamp: ...]       (§16.7)

The ``.log``/``.checkpoint`` dump is in :mod:`.dump_segments` (record details in
:mod:`.dump_decoders`), the others in :mod:`.dump_indexes`; the output helpers they share in
:mod:`.dump_output`.

The end-of-run reports (index mismatches, time index errors, non-consecutive offsets) go to the
error stream, as Kafka prints them to stderr. ``format="jsonl"`` writes one JSON object per
batch, record, index entry and report item instead (keys listed in
:data:`~kafkalog_spark.log.dump_output.JSONL_KEYS`).

Where Kafka aborts the whole run with an exception (a corrupt entry size, records that do not
parse, a coordinator record without key, an index entry pointing at no batch) this module says
what is wrong on the error stream — one line naming file, position and base offset — and goes on
with the next batch or file; :attr:`DumpReport.errors` then makes the command exit non-zero.
Files are only memory-mapped read-only: no byte and no modification time changes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, TextIO

from ..codec.compression import DEFAULT_MAX_DECOMPRESSED
from ..errors import InvalidOptionError, KafkaLogError
from .discovery import discover
from .selection import require_kafka_data
from .dump_indexes import dump_offset_index, dump_snapshot, dump_time_index, dump_txn_index
from .dump_output import DumpRun, compact_json
from .dump_output import JAVA_INT_MAX  # also re-exported for kafkalog_spark/cli/dump.py
from .dump_segments import dump_log
from .storage import as_path, storage_for

DEFAULT_MAX_MESSAGE_SIZE = 5 * 1024 * 1024  # --max-message-size
DECODERS = ("string", "offsets", "transaction-log", "cluster-metadata")
FORMATS = ("text", "jsonl")
STRING_DECODER_CLASSES = ("org.apache.kafka.tools.api.StringDecoder", "kafka.serializer.StringDecoder")


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


@dataclass
class DumpReport:
    """What a run found besides its output: Kafka's end-of-run reports and the errors."""

    index_mismatches: dict[str, dict[int, int]] = field(default_factory=dict)
    time_mismatches: dict[str, list[tuple[int, int]]] = field(default_factory=dict)
    time_out_of_order: dict[str, list[tuple[int, int]]] = field(default_factory=dict)
    time_not_found: dict[str, list[tuple[int, int]]] = field(default_factory=dict)
    non_consecutive: dict[str, dict[int, int]] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """No errors (mismatch reports do not count: Kafka exits 0 with them too)."""
        return not self.errors

    def text_lines(self) -> list[str]:
        """The end-of-run stderr lines, in DumpLogSegments' order and wording."""
        out: list[str] = []
        for f, pairs in self.index_mismatches.items():
            out.append(f"Mismatches in :{f}")
            out += [f"  Index offset: {i}, log offset: {o}" for i, o in sorted(pairs.items(), reverse=True)]
        for f, rows in self.time_mismatches.items():
            out.append(f"Found timestamp mismatch in :{f}")
            out += [f"  Index timestamp: {a}, log timestamp: {b}" for a, b in rows]
        for f, rows in self.time_out_of_order.items():
            out.append(f"Found out of order timestamp in :{f}")
            out += [f"  Index timestamp: {a}, Previously indexed timestamp: {b}" for a, b in rows]
        for rows in self.time_not_found.values():
            out.append("The following indexed offsets are not found in the log.")
            out += [f"Indexed offset: {a}, found log offset: {b}" for a, b in rows]
        for f, pairs in self.non_consecutive.items():
            out.append(f"Non-consecutive offsets in {f}")
            out += [f"  {a} is followed by {b}" for a, b in sorted(pairs.items())]
        return out

    def objects(self) -> list[dict[str, Any]]:
        """The same reports as JSON-lines objects."""
        out: list[dict[str, Any]] = []
        for f, pairs in self.index_mismatches.items():
            out += [{"type": "index_mismatch", "file": f, "index_offset": i, "log_offset": o}
                    for i, o in sorted(pairs.items(), reverse=True)]
        for kind, table, names in (
                ("time_index_mismatch", self.time_mismatches, ("index_timestamp", "log_timestamp")),
                ("time_index_out_of_order", self.time_out_of_order,
                 ("index_timestamp", "previous_index_timestamp")),
                ("time_index_offset_not_found", self.time_not_found,
                 ("index_offset", "log_offset"))):
            for f, rows in table.items():
                out += [{"type": kind, "file": f, names[0]: a, names[1]: b} for a, b in rows]
        for f, pairs in self.non_consecutive.items():
            out += [{"type": "non_consecutive_offsets", "file": f, "previous": a, "next": b}
                    for a, b in sorted(pairs.items())]
        return out


def dump_files(paths: list[str], options: DumpOptions, out: TextIO, err: TextIO) -> DumpReport:
    """Dump each file as ``kafka-dump-log.sh --files`` does, then print the end-of-run reports.

    Parameters
    ----------
    paths : list of str
        Files as given on the command line (printed as given in ``Dumping <path>``).
    options : DumpOptions
        What to print.
    out, err : TextIO
        Standard output and error streams. Output is written batch chunk by batch chunk.

    Returns
    -------
    DumpReport
        Mismatch/non-consecutive reports and the per-file errors (already printed).
    """
    run = DumpRun(options, out, err, DumpReport())
    for arg in paths:
        for name in _expand(run, arg):
            _dump_file(run, name)
    if options.format == "text":
        lines = run.report.text_lines()
        if lines:
            err.write("\n".join(lines) + "\n")
    else:
        for obj in run.report.objects():
            out.write(compact_json(obj) + "\n")
    return run.report


def _expand(run: DumpRun, arg: str) -> list[str]:
    """A file as given; a partition dir (or a folder of loose segments) as its files in offset
    order — each segment's ``.log``, then its indexes — then its producer snapshots."""
    if not storage_for(arg).is_dir(arg):
        return [arg]
    try:
        found = discover(arg)
        require_kafka_data(found)
    except KafkaLogError as exc:
        run.error(f"Error dumping {arg}: {exc}")
        return []
    if found.log_dirs:
        run.error(f"Error dumping {arg}: a log dir; name a partition dir or files")
        return []
    files = []
    for part in found.partitions:
        for seg in part.segments:
            files += [str(p) for p in (seg.log, seg.index, seg.timeindex, seg.txnindex)
                      if p is not None]
        files += [str(p) for p in sorted(part.snapshots)]
    return files


def _dump_file(run: DumpRun, arg: str) -> None:
    """One file, by the kind its name ends with (§16.2)."""
    run.arg = arg
    path = as_path(arg)
    name = path.name
    suffix = name[name.rfind("."):] if "." in name else ""
    handler = {".log": dump_log, ".checkpoint": dump_log, ".index": dump_offset_index,
               ".timeindex": dump_time_index, ".snapshot": dump_snapshot,
               ".txnindex": dump_txn_index}.get(suffix)
    run.emit(f"Dumping {arg}", lambda: {"type": "file", "kind": suffix.lstrip(".") or None})
    if handler is None:
        if run.jsonl:
            run.out.write(compact_json({"type": "ignored", "file": arg}) + "\n")
        else:
            run.err.write(f"Ignoring unknown file {arg}\n")
        return
    try:
        handler(run, path)
    except KafkaLogError as exc:
        run.error(f"Error dumping {arg}: {exc}")
