"""Erase (log-management layer): ``kafkalog erase LOG_DIR --topic T --keys FILE`` (or
``--where PREDICATE``) removes every matching record from a stopped broker's log dir, for good.

Per partition of the topic (``-delete`` dirs and the metadata log aside), every segment —
the active one too: the log dir's ``.lock`` says no broker holds it — is scanned for matching
records (:mod:`.erase_select`: keys by 128-bit MurmurHash3 digest, confirmed byte for byte; a
predicate through DataFusion). A segment with no match is not touched. A segment with matches
is rewritten:

* a batch with no match: its bytes, unchanged;
* a batch with matches: rebuilt without them, with every other record's offset (an offset gap
  where each erased record was) and the batch's header (base offset, last offset, leader
  epoch, codec, timestamp type, producer id/epoch/sequence, transactional flag, delete
  horizon) — a v0/v1 entry is rebuilt as a v2 batch, as Kafka's cleaner does since KIP-724;
* a batch whose every record matches: dropped, unless it carries a producer id, in which case
  the 61-byte empty batch keeps the producer's epoch and sequence, as the cleaner keeps it
  (and the log's last batch stays, empty, so the log end offset does not move back);
* control batches (transaction markers) are never erased;

through the crash-safe ``.cleaned → .swap → live`` replacement (the old files are deleted:
erasure means gone), with the indexes rebuilt and the transaction index kept (offsets and
aborted transactions do not change). A run killed anywhere is finished by the next one: the
swap passes complete or roll back the replacement, and a second scan finds what is left.

The key set is read ``max_keys`` at a time; more keys mean one more pass over the log per
chunk (memory bounded like the cleaner's dedupe buffer). The audit report never holds a key,
a value or the predicate: per partition the records removed, segments rewritten, offset ranges
touched, and a SHA-256 of the sorted key set (or of the predicate). ``check`` only scans and
reports what is left. :mod:`.erase_spark` runs the per-segment work as Spark tasks.

A topic with tiered storage (:mod:`kafkalog_spark.log.tiered_topics`) is refused — plan, check
and run alike, before any table is touched: its remote tier holds records no rewrite here reaches.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Sequence
from typing import Any

from ..log.discovery import discover
from ..log.model import PartitionDir
from ..log.selection import command_partitions
from ..log.swap import complete_interrupted_swaps
from ..log.tiered_topics import refuse_tiered, tiered_partitions
from ..storage.lock import ensure_local, ensure_not_locked, hold_lock
from .cleaned import cleaned_path
from .erase_segment import PartitionErase, Step, erase_segment, rescan, swap_in
from .erase_select import DEFAULT_MAX_KEYS, Selection

TIERED_WHY = ("erase cannot reach a remote tier: the matching records in its remote segments, "
              "and in the tier's copies of local segments, would stay there, and only the "
              "broker removes remote records (retention, kafka-delete-records.sh, deleting the "
              "topic) - a plan, check or erasure of the local log alone would not be the truth")


def erase(log_dirs: str | os.PathLike[str] | Sequence[str | os.PathLike[str]], topic: str,
          keys: Sequence[bytes] | None = None, *, where: str | None = None,
          execute_plan: bool = False, max_keys: int = DEFAULT_MAX_KEYS,
          step: Step | None = None, spark: Any = None) -> dict:
    """Erase the records of ``topic`` whose key is in ``keys``, or that ``where`` (a SQL
    predicate, :class:`.erase_select.Predicate`) selects (module docstring); with ``spark``,
    every segment is scanned and rewritten by a Spark task (:mod:`.erase_spark`).

    A dry run unless ``execute_plan`` (as every operation that changes a log dir in place).
    Returns the audit report: ``{"executed", "topic", "key_set_sha256", "keys"`` (or
    ``"predicate_sha256"``) ``, "records_removed", "partitions": [...]}``; without
    ``execute_plan`` (the plan, and what ``--check`` runs) nothing changes and the counts are
    what is there to erase.

    Raises
    ------
    InvalidOptionError
        No keys, both or neither of keys and ``where``, a predicate that does not parse, or a
        path that is not a log dir.
    LogDirLockedError
        A live broker holds a log dir.
    TieredPartitionError
        The topic has tiered storage (a remote tier holds records erase cannot reach).
    """
    return erase_selected(log_dirs, topic, Selection(keys, where, max_keys),
                          execute_plan=execute_plan, step=step, spark=spark)


def erase_selected(log_dirs: str | os.PathLike[str] | Sequence[str | os.PathLike[str]],
                   topic: str, selection: Selection, *, execute_plan: bool = False,
                   step: Step | None = None, spark: Any = None) -> dict:
    """:func:`erase` of a :class:`.erase_select.Selection`."""
    ensure_local(log_dirs)
    found = discover(log_dirs)
    parts = [p for p in command_partitions(found, topics=[topic])
             if p.topic == topic and p.kind is None]
    refuse_tiered("erase", tiered_partitions(found, parts), TIERED_WHY)
    roots = sorted({p.path.parent for p in parts})
    for root in roots:
        ensure_not_locked(root)
    with contextlib.ExitStack() as stack:
        if execute_plan:
            for root in roots:
                stack.enter_context(hold_lock(root))
            parts = [_finish_interrupted(p, step) for p in parts]
        if spark is not None:
            from .erase_spark import erase_spark

            audits = erase_spark(spark, parts, selection, execute_plan, step)
        else:
            audits = [_erase_partition(p, selection, execute_plan, step) for p in parts]
    return {"executed": execute_plan, "topic": topic, **selection.audit(),
            "records_removed": sum(a.records_removed for a in audits),
            "partitions": [a.to_dict() for a in audits]}


def _finish_interrupted(part: PartitionDir, step: Step | None) -> PartitionDir:
    """The partition after a killed run's replacement is completed or rolled back."""
    complete_interrupted_swaps(part.path, step=step)
    return rescan(part)


def _erase_partition(part: PartitionDir, selection: Selection, execute: bool,
                     step: Step | None) -> PartitionErase:
    audit = PartitionErase(part.name)
    for matcher in selection.matchers():
        for seg in part.segments:
            out = cleaned_path(part.path, seg.base_offset) if execute else None
            hits, written = erase_segment(part.topic or "", part.partition or 0, seg, matcher,
                                          last_segment=seg is part.segments[-1], out=out,
                                          step=step)
            audit.add(seg, hits)
            if written:
                swap_in(part.path, seg, step)
        if execute:
            part = rescan(part)
    return audit


