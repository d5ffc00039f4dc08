"""Compaction driver (log-management layer): plan every compacted partition, rewrite its segment
groups (locally or with Spark), swap each partition in Kafka's crash-safe order, then write the
new cleaner checkpoint (KAFKA_FORMATS §15.5, §12.8).

Per partition, under the log dir's ``.lock``::

    1  finish or roll back an interrupted swap (load-time passes, log/swap.py)
    2  plan (plan.py); local engine: the dirty range's key digests into a bounded key map
       (key_map.py; the round stops where the map fills); Spark engine, or --exact-keys: key
       rows -> retained offsets (Spark shuffle, or one local aggregation)
    3  rewrite each group -> one cleaned segment (rewrite.py)
    4  replace_segments: .cleaned -> .swap -> live, old files (and the producer snapshots of
       old segments no cleaned one starts at, as Kafka's replaceSegments) .deleted, removed
       (Spark engine: removed in tasks after 5, spark_job.remove_replaced)
    5  cleaner-offset-checkpoint := end offset (atomic write)
    6  local engine, when the key map filled: plan the next pass from that end offset and
       repeat 2-5 until firstUncleanable — what Kafka's cleaner does over later rounds

A crash before 4 leaves the old segments (the passes drop ``.cleaned``); during 4 the passes
finish or roll back the swap; between 4 and 5 the next run cleans again (idempotent); after a
pass's 5 the log is cleaned up to that pass, and the next run goes on from there.
``cleanup.policy=compact,delete`` topics then get retention (retention/retain.py). A tiered
partition (:mod:`kafkalog_spark.log.tiered_topics`) of a compacted topic, or of a topic named,
is refused before anything is planned.
"""

from __future__ import annotations

import contextlib
import functools
import os
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from ..codec.files import checkpoints as C
from ..codec.files import naming as N
from ..errors import InvalidOptionError
from ..log.discovery import discover
from ..log.partition_state import check_high_watermark_source, partition_state, read_offsets
from ..log.selection import command_partitions
from ..log.swap import Dispose, NewSegment, complete_interrupted_swaps, replace_segments
from ..log.tiered_topics import refuse_tiered, tiered_partitions
from ..log.topic_config import configured_partitions
from ..retention.retain import retain
from ..storage.atomic import read_checkpoint_file, write_checkpoint_file
from ..storage.lock import ensure_not_locked, hold_lock
from .cleaned import cleaned_path, cleaned_segments, write_cleaned
from .key_map import DEFAULT_MEMORY, MIN_MEMORY, KeyMap
from .plan import CleaningPlan, PlanAll, Skipped, limit_plan, plan_partition
from .rewrite import GroupOutput, key_rows, map_keys, retained_offsets_local
from .txn_index import txn_indexes

Step = Callable[[str], None]
ENGINES = ("local", "spark")
SWAP_THREADS = 8  # the Spark engine's partitions swapped at once (their fsyncs overlap)
TIERED_WHY = ("compact would rewrite local segments whose byte copies the remote tier may hold "
              "and move offsets the broker's remote bookkeeping points into (Kafka does not "
              "compact tiered topics: remote.storage.enable needs cleanup.policy=delete); "
              "leave these topics out (--topic)")


@dataclass
class CompactionResult:
    """What :func:`compact` planned or did, plus metrics."""

    executed: bool
    now_ms: int
    engine: str
    plans: list[CleaningPlan] = field(default_factory=list)
    skipped: list[Skipped] = field(default_factory=list)
    stats: dict[str, float] = field(default_factory=dict)
    retention: dict[str, Any] | None = None

    @property
    def metrics(self) -> dict[str, Any]:
        return {"executed": self.executed, "now_ms": self.now_ms, "engine": self.engine,
                "partitions_cleaned": len({p.state.tp for p in self.plans}),
                "passes": len(self.plans), "partitions_skipped": len(self.skipped),
                "segments_rewritten": sum(len(g.sources) for p in self.plans for g in p.groups),
                "segments_written": sum(len(p.groups) for p in self.plans),
                **self.stats, **({"retention": self.retention} if self.retention else {})}

    def to_dict(self) -> dict[str, Any]:
        return {"metrics": self.metrics, "partitions": [p.to_dict() for p in self.plans],
                "skipped": [s.to_dict() for s in self.skipped]}


def plan_log_dir(log_dir, *, now_ms: int, options: Mapping[str, Any] | None,
                 config_file: str | os.PathLike[str] | None, topics: Sequence[str] | None,
                 force: bool, skipped: list[Skipped],
                 high_watermark: str = "checkpoint",
                 plan_all: PlanAll | None = None) -> list[CleaningPlan]:
    """Cleaning plans of the compacted partitions of one discovered log dir. ``plan_all`` runs
    the partitions' planning (it reads every segment's batch headers) elsewhere — the Spark
    engine's tasks (:func:`.spark_job.plan_spark`); default: here, one after the other."""
    plan = functools.partial(
        _plan_one, log_dir=log_dir.path, now_ms=now_ms, force=force,
        high_watermark=high_watermark,
        cleaner=read_offsets(log_dir.path, N.CLEANER_OFFSET_CHECKPOINT),
        log_start=read_offsets(log_dir.path, N.LOG_START_OFFSET_CHECKPOINT),
        replication=read_offsets(log_dir.path, N.REPLICATION_OFFSET_CHECKPOINT))
    todo = [(part, config) for part, config in configured_partitions(
        log_dir, options=options, config_file=config_file, topics=topics) if config.compact]
    plans = []
    for found in (plan_all or _plan_here)(plan, todo):
        (skipped if isinstance(found, Skipped) else plans).append(found)
    return plans


def _plan_here(plan: Callable[..., Any], todo: list[tuple[Any, Any]]) -> list[Any]:
    return [plan(part, config) for part, config in todo]


def _plan_one(part, config, *, log_dir: Path, now_ms: int, force: bool, high_watermark: str,
              cleaner: Mapping[tuple[str, int], int], log_start: Mapping[tuple[str, int], int],
              replication: Mapping[tuple[str, int], int]) -> CleaningPlan | Skipped:
    """One partition's plan (or why it is skipped); the log dir's checkpoints read once, by the
    caller."""
    state = partition_state(part, log_dir, log_start=log_start, replication=replication,
                            high_watermark=high_watermark)
    return plan_partition(state, config, cleaner_checkpoint=cleaner.get(state.tp),
                          now_ms=now_ms, force=force)


@contextlib.contextmanager
def rewrite_local(plan: CleaningPlan, stats: dict[str, float], *, exact_keys: bool = False,
                  memory: int = DEFAULT_MEMORY
                  ) -> Iterator[tuple[CleaningPlan, list[GroupOutput]]]:
    """The Spark-free path for one partition: the dirty range's key digests into a key map of
    at most ``memory`` bytes (the plan is cut where it fills: :func:`limit_plan`) — or, with
    ``exact_keys``, every key row into one aggregation (memory grows with the keys) — then each
    group streamed into its ``.cleaned`` file (:func:`write_cleaned`). Yields the plan carried
    out and the outputs, mapped for the swap (valid inside the ``with``); an error before the
    swap removes the files."""
    with cleaned_segments() as files:
        t0 = time.perf_counter()
        retained: KeyMap | np.ndarray
        if exact_keys:
            rows = [key_rows(g) for g in plan.groups]
            retained = retained_offsets_local(pa.concat_tables(rows), plan.first_dirty, True)
            del rows
        else:
            retained = KeyMap(memory, most_keys=plan.first_uncleanable - plan.first_dirty)
            plan = limit_plan(plan, map_keys(plan.groups, retained))
        t1 = time.perf_counter()
        outputs = []
        for g in plan.groups:
            part = retained
            if not isinstance(retained, KeyMap):
                lo = g.base_offset
                hi = (plan.groups[g.group + 1].base_offset if g.group + 1 < len(plan.groups)
                      else 2**63 - 1)
                part = retained[(retained >= lo) & (retained < hi)]
            files.track(cleaned_path(plan.state.path, g.base_offset))
            outputs.append(files.adopt(write_cleaned(g, part, plan.state.path)))
        _sum_stats(stats, outputs)
        stats["shuffle_seconds"] = stats.get("shuffle_seconds", 0.0) + t1 - t0
        stats["rewrite_seconds"] = stats.get("rewrite_seconds", 0.0) + time.perf_counter() - t1
        files.swapping = True
        yield plan, outputs


def clean_partition_local(plan: CleaningPlan, stats: dict[str, float], *, now_ms: int,
                          high_watermark: str, checkpoint: CleanerCheckpoint,
                          exact_keys: bool = False, memory: int = DEFAULT_MEMORY,
                          step: Step | None = None) -> list[CleaningPlan]:
    """One partition's round with the local engine, in as many passes as the key map needs
    (module docstring, step 6); returns the passes carried out."""
    done = []
    while True:
        with rewrite_local(plan, stats, exact_keys=exact_keys, memory=memory) as (ran, outputs):
            swap_in(ran, outputs, step=step)
        checkpoint.write([ran], step)
        done.append(ran)
        if ran.end_offset >= ran.first_uncleanable:
            return done
        (part,) = discover(ran.state.path).partitions
        state = partition_state(part, ran.state.log_dir, high_watermark=high_watermark)
        nxt = plan_partition(state, ran.config, cleaner_checkpoint=ran.end_offset,
                             now_ms=now_ms, resume=ran)
        if isinstance(nxt, Skipped):  # nothing left below firstUncleanable
            return done
        plan = nxt


def swap_in(plan: CleaningPlan, outputs: Sequence[GroupOutput], *, step: Step | None = None,
            dispose: Dispose | None = None) -> None:
    """Replace the rewritten segments of one partition (steps 4; its checkpoint: step 5), each
    with the ``.txnindex`` Kafka's cleaner gives it (:mod:`.txn_index`); ``dispose``: as
    :func:`~kafkalog_spark.log.swap.replace_segments` takes it (default: remove the replaced
    files)."""
    old = [s.base_offset for g in plan.groups for s in g.sources]
    after = [s.base_offset for s in plan.state.segments if s.base_offset > max(old)]
    indexes = txn_indexes(plan.facts.aborts_indexed if plan.facts is not None else (),
                          [o.base_offset for o in outputs], after[0] if after else 2**63)
    new = [NewSegment(o.base_offset, o.log, txnindex=t, mtime=o.mtime,
                      log_written=o.path is not None, indexes_written=o.end_offset is not None,
                      end_offset=o.end_offset,
                      index_interval_bytes=plan.config.index_interval_bytes)
           for o, t in zip(outputs, indexes)]
    replace_segments(plan.state.path, new, old, step=step, dispose=dispose)


class CleanerCheckpoint:
    """A log dir's ``cleaner-offset-checkpoint``, read once and rewritten whole (atomically)
    after each update — not re-read per partition, which is quadratic in partitions."""

    def __init__(self, log_dir) -> None:
        self.path = log_dir / N.CLEANER_OFFSET_CHECKPOINT
        self.offsets = read_checkpoint_file(self.path, C.parse_offset_checkpoint)

    def write(self, plans: Sequence[CleaningPlan], step: Step | None = None) -> None:
        """Step 5 for ``plans`` (their swaps done): their end offsets, one atomic write."""
        for plan in plans:
            self.offsets[plan.state.tp] = plan.end_offset
        if step is not None:
            step(f"write {N.CLEANER_OFFSET_CHECKPOINT}")
        write_checkpoint_file(self.path, C.format_offset_checkpoint(self.offsets))


def swap_all(plans: Sequence[CleaningPlan], outputs: Mapping[tuple[str, int], list[GroupOutput]],
             checkpoint: CleanerCheckpoint, step: Step | None = None) -> list[Path]:
    """The Spark engine's swaps: every partition's (independent of the others: their own
    folders) in a few threads, so that their fsyncs overlap, then one checkpoint write for the
    log dir (a crash before it: the next run cleans those partitions again, idempotent).
    Returns the replaced files, renamed ``.deleted``, for the caller to remove (step 6 later,
    as Kafka deletes a swap's old segments after it: a crash first leaves files the next load
    or compaction removes). With ``step`` (progress, crash tests) one after the other, in a
    fixed order, each removing its own (returns none)."""
    replaced: list[Path] = []
    keep = None if step is not None else lambda path, reason: replaced.append(path)
    if step is None and len(plans) > 1:
        with ThreadPoolExecutor(max_workers=min(SWAP_THREADS, len(plans))) as pool:
            list(pool.map(lambda p: swap_in(p, outputs[p.state.tp], dispose=keep), plans))
    else:
        for plan in plans:
            swap_in(plan, outputs[plan.state.tp], step=step, dispose=keep)
    checkpoint.write(plans, step)
    return replaced


def compact(log_dirs: str | os.PathLike[str] | Sequence[str | os.PathLike[str]], *,
            execute: bool = False, now_ms: int | None = None,
            options: Mapping[str, Any] | None = None,
            config_file: str | os.PathLike[str] | None = None,
            topics: Sequence[str] | None = None, force: bool = False, engine: str = "local",
            spark: Any = None, step: Step | None = None,
            high_watermark: str = "checkpoint", exact_keys: bool = False,
            dedupe_buffer_bytes: int = DEFAULT_MEMORY) -> CompactionResult:
    """Plan (and with ``execute`` carry out) one cleaning round on stopped brokers' log dirs.

    Parameters
    ----------
    log_dirs : path or sequence of paths
        Broker log dirs.
    execute : bool
        Change the disk (default: a dry run that only plans).
    now_ms : int, optional
        Fixed current time in ms (delete horizons, lags) for reproducible runs.
    options, config_file : optional
        Topic config overrides (:func:`kafkalog_spark.log.topic_config.effective_config`).
    topics : sequence of str, optional
        Only these topics.
    force : bool
        Clean every partition with a non-empty dirty range, whatever its dirty ratio.
    engine : {"local", "spark"}
        Plan and rewrite in this process, or plan (a dry run too), shuffle keys and rewrite
        groups with Spark tasks.
    spark : SparkSession, optional
        For ``engine="spark"`` (default: :func:`kafkalog_spark.spark.session`).
    step : callable, optional
        Called with a label before every file operation of a swap (progress, crash tests).
    high_watermark : {"checkpoint", "log-end"}
        Kafka's rule (``replication-offset-checkpoint``; without an entry nothing is
        cleanable), or the log end offset — only for a copied dir no broker will load again
        (:func:`kafkalog_spark.log.partition_state.partition_state`).
    exact_keys : bool
        Identify keys by their full bytes. Default: by a 128-bit MurmurHash3 digest of the key
        (:mod:`kafkalog_spark.codec.records.digest`), as Kafka's cleaner identifies them by a 16-byte
        MD5: fixed-width keys group much faster (Spark shuffles two longs, not variable-length
        bytes), and two distinct keys of a partition collide with a chance of about
        ``n**2 / 2**129``. Use exact keys when producers may choose keys adversarially.
        The local engine then holds every key of a partition in memory (no bound).
    dedupe_buffer_bytes : int
        The local engine's key map budget, Kafka's ``log.cleaner.dedupe.buffer.size`` (default
        128 MiB: at most ``0.9 * bytes / 24`` keys per pass). A partition whose dirty range has
        more distinct keys is cleaned in several passes, each cut where the map filled and
        checkpointed (:mod:`kafkalog_spark.compaction.key_map`); the result is the one-pass
        result. The Spark engine's shuffle spills to disk and needs no such bound.

    Raises
    ------
    LogDirLockedError
        A live process (a broker) holds a log dir's ``.lock``.
    TieredPartitionError
        A tiered partition (tiered storage) of a compacted topic, or of a topic named in
        ``topics``, plan or run.
    """
    if engine not in ENGINES:
        raise InvalidOptionError(f"engine must be one of {', '.join(ENGINES)}; got {engine!r}")
    if dedupe_buffer_bytes < MIN_MEMORY:
        raise InvalidOptionError(f"the dedupe buffer needs at least {MIN_MEMORY} bytes; got "
                                 f"{dedupe_buffer_bytes}")
    dirs = [log_dirs] if isinstance(log_dirs, (str, os.PathLike)) else list(log_dirs)
    now_ms = int(time.time() * 1000) if now_ms is None else int(now_ms)
    for d in dirs:
        ensure_not_locked(d)
    found = discover(dirs)
    command_partitions(found, topics=topics, log_dirs_only="compaction")
    refuse_tiered("compact", [
        t for t in tiered_partitions(found, [p for d in found.log_dirs for p in d.partitions
                                             if topics is None or p.topic in topics],
                                     options=options, config_file=config_file)
        if t.config.compact or topics is not None], TIERED_WHY)
    result = CompactionResult(execute, now_ms, engine)
    kw = dict(now_ms=now_ms, options=options, config_file=config_file, topics=topics,
              force=force, skipped=result.skipped,
              high_watermark=check_high_watermark_source(high_watermark))
    plan_all = None  # plan here; the Spark engine plans in tasks (on a cluster: executors)
    if engine == "spark":
        from .spark_job import plan_spark

        if spark is None:
            from ..spark import session

            spark = session()
        plan_all = plan_spark(spark)
    if not execute:
        for log_dir in found.log_dirs:
            result.plans += plan_log_dir(log_dir, **kw, plan_all=plan_all)
        return result
    for log_dir in found.log_dirs:
        with hold_lock(log_dir.path):
            for part in log_dir.partitions:
                complete_interrupted_swaps(part.path)
            fresh = discover(log_dir.path).log_dirs[0]
            plans = plan_log_dir(fresh, **kw, plan_all=plan_all)
            checkpoint = CleanerCheckpoint(log_dir.path)
            if engine == "spark":
                from .spark_job import remove_replaced, rewrite_spark

                with rewrite_spark(plans, result.stats, spark=spark,
                                   exact_keys=exact_keys) as outputs:
                    replaced = swap_all(plans, outputs, checkpoint, step)
                remove_replaced(spark, replaced)
                result.plans += plans
            else:  # one partition at a time: memory holds one partition's key map
                for plan in plans:
                    result.plans += clean_partition_local(
                        plan, result.stats, now_ms=now_ms, high_watermark=high_watermark,
                        checkpoint=checkpoint, exact_keys=exact_keys,
                        memory=dedupe_buffer_bytes, step=step)
    both = sorted({p.state.topic for p in result.plans if p.config.delete})
    if both:
        result.retention = retain(dirs, execute=True, now_ms=now_ms, options=options,
                                  config_file=config_file, topics=both,
                                  high_watermark=high_watermark).metrics
    for key in ("bytes_read", "records_read", "records_kept", "bytes_written"):
        result.stats.setdefault(key, 0)
    return result


def _sum_stats(stats: dict[str, float], outputs: Sequence[GroupOutput]) -> None:
    for o in outputs:
        for k, v in o.stats.items():
            stats[k] = stats.get(k, 0) + v

