"""Output of one ``kafka-dump-log.sh`` run (inspect layer): the streams, the growing report, the
text/JSON-lines writers, and the JSON-lines keys of every object type.

Shared by the per-kind dumps (:mod:`.dump_segments`, :mod:`.dump_indexes`); the entry point and
the dispatch by file kind are in :mod:`kafkalog_spark.inspect.dump`.
"""

from __future__ import annotations

import json
from typing import Any, Callable, TextIO

from ..codec.files.naming import offset_from_file_name
from ..codec.records.decode import DecodeOptions
from ..errors import LogDirError
from ..tiered.local_tiered_storage import remote_file_name
from .dump_options import DumpOptions, DumpReport

SCAN_CHUNK_ENTRIES = 4096  # entries scanned, checksummed and decoded per step (bounded memory)
JSONL_KEYS = {
    "file": ("type", "file", "kind"),
    "batch": ("type", "file", "position", "base_offset", "last_offset", "count", "base_sequence",
              "last_sequence", "producer_id", "producer_epoch", "partition_leader_epoch",
              "is_transactional", "is_control", "delete_horizon_ms", "timestamp_type",
              "max_timestamp", "size", "magic", "compression", "crc", "is_valid"),
    "record": ("type", "file", "offset", "timestamp_type", "timestamp", "key_size", "value_size",
               "sequence", "header_keys", "is_valid", "crc", "control", "key?", "value?"),
    "offset_index_entry": ("type", "file", "offset", "position"),
    "time_index_entry": ("type", "file", "timestamp", "offset"),
    "aborted_txn": ("type", "file", "version", "producer_id", "first_offset", "last_offset",
                    "last_stable_offset"),
    "producer_state": ("type", "file", "producer_id", "producer_epoch", "coordinator_epoch",
                       "current_txn_first_offset", "last_timestamp", "first_sequence",
                       "last_sequence", "last_offset", "offset_delta", "timestamp"),
}


def file_offset(run: "DumpRun", name: str) -> int:
    """Kafka's ``offsetFromFileName``; with a remote tier (``--remote-tier``) also a remote
    copy's name, ``<offset>-<segment id>.<suffix>`` (LocalTieredStorage)."""
    remote = remote_file_name(name)
    if remote is not None and run.options.remote_tier is not None:
        return remote[0]
    try:
        return offset_from_file_name(name)
    except LogDirError as exc:
        if remote is None:
            raise
        raise LogDirError(f"{exc.reason}: a remote tier's copy of a segment; dump it with "
                          "--remote-tier", exc.location) from None


def compact_json(obj: Any) -> str:
    """Compact JSON like Jackson's ``toString`` (no spaces, non-ASCII kept)."""
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False)


def java_bool(value: bool) -> str:
    return "true" if value else "false"


class DumpRun:
    """One run: options, streams, and the report that grows file by file."""

    def __init__(self, options: DumpOptions, out: TextIO, err: TextIO, report: DumpReport) -> None:
        self.options = options
        self.out = out
        self.err = err
        self.jsonl = options.format == "jsonl"
        self.report = report
        self.decode_options = DecodeOptions(verify_crc=False, include_headers=True,
                                            include_metadata=True, include_control=True,
                                            on_error="skip", max_decompressed=options.max_decompressed)
        self.arg = ""

    def emit(self, text: str, obj: Callable[[], dict[str, Any]]) -> None:
        if self.jsonl:
            self.out.write(compact_json({**obj(), "file": self.arg}) + "\n")
        else:
            self.out.write(text + "\n")

    def error(self, message: str) -> None:
        """A problem Kafka would abort on: reported, counted, and the dump goes on."""
        self.report.errors.append(message)
        if self.jsonl:
            self.out.write(compact_json({"type": "error", "file": self.arg, "message": message}) + "\n")
        else:
            self.err.write(message + "\n")

    def flush(self, lines: list[str]) -> None:
        if lines:
            self.out.write("\n".join(lines) + "\n")
            lines.clear()
