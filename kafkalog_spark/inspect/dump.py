"""``kafka-dump-log.sh`` output (inspect layer): DumpLogSegments' text line for line, or JSON lines;
the options, the end-of-run report, and the dispatch by file kind.

Follows Kafka 4.1's ``kafka.tools.DumpLogSegments`` (KAFKA_FORMATS §16, §19.3), checked against
it by ``tests/oracle/test_dump_oracle.py``: legacy record CRCs print with its stray ``}``,
LEADER_CHANGE control records print as ``LeaderChange: <json>``, a file's first record starts
the non-consecutive-offset tracker, the end-of-run reports list files in the order of its Scala
hash maps, keys and values decode as Java's UTF-8 decoder does, and the
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
:data:`~kafkalog_spark.inspect.dump_output.JSONL_KEYS`).

Where Kafka aborts the whole run with an exception (a corrupt entry size, records that do not
parse, a coordinator record without key, an index entry pointing at no batch) this module says
what is wrong on the error stream — one line naming file, position and base offset — and goes on
with the next batch or file; :attr:`DumpReport.errors` then makes the command exit non-zero.
Files are only memory-mapped read-only: no byte and no modification time changes.
"""

from __future__ import annotations

from typing import Any, TextIO

from ..errors import KafkaLogError
from ..log.discovery import discover
from ..log.history import found_with_remote_tier
from ..log.selection import require_kafka_data
from ..storage import as_path, storage_for
from .dump_indexes import dump_offset_index, dump_snapshot, dump_time_index, dump_txn_index
from .dump_options import DumpOptions, DumpReport
from .dump_output import DumpRun, compact_json
from .dump_segments import dump_log

STRING_DECODER_CLASSES = ("org.apache.kafka.tools.api.StringDecoder", "kafka.serializer.StringDecoder")


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


def _expand(run: DumpRun, arg: str) -> list[Any]:
    """A file as given; a partition dir (or a folder of loose segments) as its files in offset
    order — each segment's ``.log``, then its indexes — then its producer snapshots; with a
    remote tier its remote segments' files first."""
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
    try:
        found = found_with_remote_tier(found, run.options.remote_tier)
    except KafkaLogError as exc:
        run.error(f"Error dumping {arg}: {exc}")
        return []
    files: list = []
    for part in found.partitions:
        for seg in part.segments:
            # a remote segment's files may be virtual (aiven): kept as path objects
            files += [p if seg.remote_id is not None else str(p)
                      for p in (seg.log, seg.index, seg.timeindex, seg.txnindex)
                      if p is not None]
        files += [str(p) for p in sorted(part.snapshots)]
    return files


def _dump_file(run: DumpRun, arg: Any) -> None:
    """One file, by the kind its name ends with (§16.2)."""
    run.arg = str(arg)
    path = as_path(arg)
    arg = run.arg
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
