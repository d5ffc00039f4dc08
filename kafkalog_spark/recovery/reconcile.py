"""Replica reconciliation (recovery layer): ``kafkalog reconcile DIR1 DIR2 [...] --dest OUT``
writes one broker-loadable log per partition found on several brokers' disks.

Per partition: the replica Kafka would have kept, completed from the others where they agree
with it (disks saved after losing a cluster; :mod:`~.reconcile_plan` says which batches, why).

The sources are read, never changed (a log dir a live broker holds is refused). ``OUT`` is a new
log dir: each partition is written into ``<OUT>.kafkalog-reconcile/<topic>-<partition>`` and
renamed into ``OUT`` when whole (the rename is the commit), then the log dir's offset
checkpoints are written and :func:`~.recover.recover` rebuilds every derived file (indexes,
transaction indexes, producer snapshots, leader epochs) from the batches. A run killed anywhere
is finished by running it again: renamed partitions are done, staged ones are redone. Divergent
batches are copied into a quarantine (``<OUT>.kafkalog-quarantine`` by default, one folder per
source log dir) with a SHA-256 manifest. Segments follow the reference's segment boundaries; a
batch filled in before the reference's first segment, past ``segment_bytes``, or past a base
offset's int32 range starts a new segment at its own offset.
"""

from __future__ import annotations

import json
import os
from bisect import bisect_right
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

from ..codec import layout as L
from ..codec.files import checkpoints as C
from ..codec.files import naming as N
from ..errors import InvalidOptionError
from ..log.discovery import discover
from ..log.selection import command_partitions
from ..storage import storage_for
from ..storage.atomic import atomic_write_bytes
from ..storage.lock import ensure_local, ensure_not_locked, hold_lock
from .quarantine import Quarantine, copy_ranges
from .reconcile_plan import PartitionPlan, _runs, load_replica, plan_partition
from .recover import recover

Step = Callable[[str], None]
STAGING_SUFFIX = ".kafkalog-reconcile"
SOURCES_FILE = "sources.json"


@dataclass
class ReconcileReport:
    """What :func:`reconcile` planned and (with ``execute``) did."""

    dest: str
    executed: bool = False
    partitions: list[dict] = field(default_factory=list)  # PartitionPlan.to_dict() each
    notes: list[str] = field(default_factory=list)

    @property
    def quarantine_runs(self) -> list[str]:
        return [r for p in self.partitions for r in p.get("quarantine_runs", [])]

    def to_dict(self) -> dict:
        return {"dest": self.dest, "executed": self.executed, "notes": self.notes,
                "quarantine_runs": self.quarantine_runs, "partitions": self.partitions}


def reconcile(log_dirs: Sequence[str | os.PathLike[str]], dest: str | os.PathLike[str], *,
              execute_plan: bool = False, quarantine_dir: str | os.PathLike[str] | None = None,
              segment_bytes: int | None = None, step: Step | None = None,
              spark=None) -> ReconcileReport:
    """Plan (and with ``execute_plan`` write) the reconciled log dir ``dest``.

    Parameters
    ----------
    log_dirs : sequence of paths
        Two or more brokers' log dirs (``log.dirs`` entries) holding the same partitions.
    dest : path
        The new log dir to write (must not exist, be empty, or hold an unfinished reconcile
        of the same sources).
    execute_plan : bool
        Write ``dest`` (default: a dry run that only plans).
    quarantine_dir : path, optional
        Where divergent batches are copied (default ``<dest>.kafkalog-quarantine``).
    segment_bytes : int, optional
        Largest segment written (default: the reference's largest segment, at least 1 MiB).
    step : callable, optional
        Called with a label before every durable operation (not in Spark tasks).
    spark : SparkSession, optional
        Plan and write the partitions as Spark tasks, one per partition (every executor must
        see the source log dirs and ``dest`` at the same paths: shared storage); the driver
        checks, writes the checkpoints and rebuilds the derived files.

    Raises
    ------
    InvalidOptionError
        Fewer than two log dirs, a path that is not a log dir, ``dest`` inside a source (or
        a source inside it), or ``dest`` not empty.
    LogDirLockedError
        A live process holds a source's (or ``dest``'s) ``.lock``.
    """
    job = prepare(log_dirs, dest, quarantine_dir=quarantine_dir, segment_bytes=segment_bytes)
    report = ReconcileReport(str(dest), executed=execute_plan, notes=job.notes)
    if spark is not None:
        run = partial(_spark_partitions, spark)
    else:
        def run(job: Job, execute: bool) -> list[dict]:
            return [run_partition(job, g, execute_plan=execute, step=step) for g in job.groups]
    if not execute_plan:
        report.partitions = run(job, False)
        return report
    job.begin()
    with hold_lock(job.dest):
        report.partitions = run(job, True)
        _write_checkpoints(report.partitions, job.dest)
    job.finish(report, step)
    return report


@dataclass
class Job:
    """A checked reconcile: the sources, ``dest``, and each partition's replicas as
    ``(source index, source log dir, partition dir)`` (plain data: a Spark task gets one group)."""

    sources: list[Path]
    dest: Path
    quarantine_root: Path
    segment_bytes: int | None
    groups: list[list[tuple[int, Path, object]]]
    meta_properties: Path | None
    notes: list[str] = field(default_factory=list)

    @property
    def staging(self) -> Path:
        return Path(f"{storage_for(self.dest).resolve(self.dest)}{STAGING_SUFFIX}")

    def begin(self) -> None:
        """Create the staging folder (recording the sources) and ``dest`` with its
        ``meta.properties``."""
        fs = storage_for(self.dest)
        fs.make_dirs(self.staging, exist_ok=True)
        if _read_sources(self.staging) is None:
            atomic_write_bytes(self.staging / SOURCES_FILE,
                               json.dumps([str(s) for s in self.sources]).encode())
        fs.make_dirs(self.dest, exist_ok=True)
        meta = self.meta_properties
        if meta is not None and not fs.exists(self.dest / N.META_PROPERTIES):
            atomic_write_bytes(self.dest / N.META_PROPERTIES, storage_for(meta).read_bytes(meta))

    def finish(self, report: ReconcileReport, step: Step | None) -> None:
        """Every partition and the offset checkpoints are in ``dest``: rebuild the derived
        files, remove the staging folder."""
        rebuilt = recover([self.dest], execute_plan=True,
                          quarantine_dir=self.quarantine_root / "rebuild", step=step,
                          repair_trusted=True)
        for p in rebuilt.partitions:
            if p.cut is not None:  # the plan kept only valid batches: a cut here is a bug
                report.notes.append(f"{p.path}: recovery of the written log cut it: {p.cut}")
        if step is not None:
            step(f"remove {self.staging}")
        storage_for(self.staging).remove_tree(self.staging)


def prepare(log_dirs: Sequence[str | os.PathLike[str]], dest: str | os.PathLike[str], *,
            quarantine_dir: str | os.PathLike[str] | None = None,
            segment_bytes: int | None = None) -> Job:
    """Check the sources and ``dest`` (see :func:`reconcile`) and group the partitions."""
    dirs = [Path(d) for d in log_dirs]
    if len(dirs) < 2:
        raise InvalidOptionError("reconcile takes two or more brokers' log dirs")
    dest = Path(dest)
    ensure_local([*dirs, dest])
    found = discover(dirs)
    command_partitions(found, log_dirs_only="reconcile")
    sources = [storage_for(ld.path).resolve(ld.path) for ld in found.log_dirs]
    _check_dest(dest, sources)
    notes: list[str] = []
    groups: dict[tuple[str, int], list] = {}
    for i, ld in enumerate(found.log_dirs):
        ensure_not_locked(ld.path)
        if ld.metadata_log is not None:
            notes.append(f"{ld.metadata_log.path}: the KRaft metadata log is not reconciled "
                         "(the Raft layer's)")
        for part in ld.partitions:
            groups.setdefault((part.topic, part.partition), []).append((i, ld.path, part))
    for (topic, partition), found_in in sorted(groups.items()):
        if len(found_in) == 1:
            notes.append(f"{topic}-{partition}: on one log dir only; copied as it is")
    root = Path(quarantine_dir) if quarantine_dir is not None else Path(f"{dest}.kafkalog-quarantine")
    meta = next((ld.path / N.META_PROPERTIES for ld in found.log_dirs
                 if ld.meta_properties is not None), None)
    return Job(sources, dest, root, segment_bytes, [g for _, g in sorted(groups.items())],
               meta, notes)


def run_partition(job: Job, group, *, execute_plan: bool, step: Step | None = None) -> dict:
    """Plan one partition (and with ``execute_plan`` write it into ``dest``); its report."""
    replicas = [load_replica(i, path, part) for i, path, part in group]
    plan = plan_partition(group[0][2].topic, group[0][2].partition, replicas)
    out = plan.to_dict()
    out["high_watermark"] = _high_watermark(plan)
    if execute_plan:
        out["quarantine_runs"] = _write_partition(job, plan, step)
    return out


def _spark_partitions(spark, job: Job, execute: bool) -> list[dict]:
    """:func:`run_partition` of every partition as one Spark task each (the job is plain,
    picklable data; nothing in a driver global)."""
    groups = job.groups
    if not groups:
        return []
    task = partial(run_partition, job, execute_plan=execute)
    return spark.sparkContext.parallelize(groups, len(groups)).map(task).collect()


def _check_dest(dest: Path, sources: list[Path]) -> None:
    out = storage_for(dest).resolve(dest)
    for src in sources:
        if out == src or out.is_relative_to(src) or src.is_relative_to(out):
            raise InvalidOptionError(f"--dest {dest} must lie outside every source log dir "
                                     f"({src})")
    staging = Path(f"{out}{STAGING_SUFFIX}")
    fs = storage_for(out)
    if fs.is_dir(staging):
        want = [str(s) for s in sources]
        if _read_sources(staging) not in (None, want):
            raise InvalidOptionError(f"{staging} holds an unfinished reconcile of other log dirs "
                                     f"({_read_sources(staging)}); finish it or remove it")
        return
    if fs.exists(out) and fs.listdir(out):
        raise InvalidOptionError(f"--dest {dest} is not empty; reconcile writes a new log dir")


def _read_sources(staging: Path) -> list[str] | None:
    try:
        return json.loads(storage_for(staging).read_text(staging / SOURCES_FILE))
    except (OSError, ValueError):
        return None


def _write_partition(job: Job, plan: PartitionPlan, step: Step | None) -> list[str]:
    """Copy the divergent batches into the quarantine, write the partition into the staging
    folder and rename it into ``dest``; the quarantine runs used."""
    ref = plan.replicas[plan.reference]
    name = ref.part.path.name
    final, tmp = job.dest / name, job.staging / name
    fs = storage_for(job.dest)
    if fs.exists(final):
        return []  # renamed in by an earlier run: done
    runs = []
    for i, rows in plan.divergent.items():
        r = plan.replicas[i]
        if not len(rows):
            continue
        q = Quarantine(r.log_dir, job.quarantine_root / f"{r.index}-{r.log_dir.name}" / name,
                       step=step)
        q.resume()
        for a, b in _runs(rows):
            for s, e in _contiguous(r, a, b):
                q.save_range(r.part.segments[int(r.seg[s])].log, int(r.position[s]),
                             int(r.position[e] + r.size[e]),
                             f"divergent from the reference {ref.part.path} (offsets "
                             f"{int(r.first[s])}..{int(r.last[e])}; {plan.divergence[i][1]})")
        q.finish()
        runs.append(str(q.run))
    if fs.exists(tmp):
        fs.remove_tree(tmp)  # staged by a killed run: redone
    fs.make_dirs(tmp)
    limit = job.segment_bytes or max([s.log_size for s in ref.part.segments] + [1 << 20])
    bases = [s.base_offset for s in ref.part.segments]
    for base, pieces in _segments(plan, bases, limit):
        path = tmp / N.segment_file_name(base, N.LOG)
        if step is not None:
            step(f"write {path}")
        out = fs.open_write(path)
        try:
            for src, start, end in pieces:
                copy_ranges(src, [(start, end)], out)
        finally:
            fs.close_durably(out)
    for kind in (N.PARTITION_METADATA, N.LEADER_EPOCH_CHECKPOINT):
        src = ref.part.path / kind
        if storage_for(src).exists(src):
            atomic_write_bytes(tmp / kind, storage_for(src).read_bytes(src))
    for snap in ref.part.snapshots:  # producer state older than the batches kept
        if N.offset_from_file_name(snap.name) <= plan.log_end:
            atomic_write_bytes(tmp / snap.name, storage_for(snap).read_bytes(snap))
    fs.fsync_dir(tmp)
    if step is not None:
        step(f"rename {tmp} -> {final}")
    fs.rename(tmp, final)
    fs.fsync_dir(job.dest)
    return runs


def _contiguous(r, a: int, b: int):
    """Rows ``a..b`` of replica ``r`` as runs that are contiguous bytes of one segment file."""
    s = a
    for k in range(a + 1, b + 2):
        if k > b or r.seg[k] != r.seg[k - 1] or r.position[k] != r.position[k - 1] + r.size[k - 1]:
            yield s, k - 1
            s = k


def _segments(plan: PartitionPlan, bases: list[int], limit: int):
    """``(base offset, [(file, start, end), ...])`` of each output segment (module docstring)."""
    current: list[tuple[Path, int, int]] = []
    base, size, home = 0, 0, -2  # home: the reference segment the current one follows
    for r, row in plan.ordered():
        first, end, n = int(r.first[row]), int(r.last[row]), int(r.size[row])
        at = bisect_right(bases, first) - 1  # the reference segment holding this offset
        if not current or at != home or size + n > limit or end - base > L.INT32_MAX:
            if current:
                yield base, current
            base = bases[at] if at != home and at >= 0 else first
            size, home, current = 0, at, []
        src, pos = r.part.segments[int(r.seg[row])].log, int(r.position[row])
        if current and current[-1][0] == src and current[-1][2] == pos:
            current[-1] = (src, current[-1][1], pos + n)
        else:
            current.append((src, pos, pos + n))
        size += n
    if current:
        yield base, current


def _high_watermark(plan: PartitionPlan) -> int:
    """The highest of the replicas' high watermarks, capped at the reconciled log end (every
    replica's is at most the leader's; all of them unknown: the log end)."""
    known = [r.high_watermark for r in plan.replicas if r.high_watermark is not None]
    return min(max(known), plan.log_end) if known else plan.log_end


def _write_checkpoints(partitions: list[dict], dest: Path) -> None:
    """The offset checkpoints of ``dest``: log start, recovery point (the log end: every byte
    was written and fsynced) and high watermark."""
    starts, points, hws = {}, {}, {}
    for p in partitions:
        tp, end = (p["topic"], p["partition"]), p["log_end_offset"]
        starts[tp] = min(p["log_start_offset"], end)
        points[tp] = end
        hws[tp] = p["high_watermark"]
    for name, values in ((N.LOG_START_OFFSET_CHECKPOINT, starts),
                         (N.RECOVERY_POINT_CHECKPOINT, points),
                         (N.REPLICATION_OFFSET_CHECKPOINT, hws)):
        atomic_write_bytes(dest / name, C.format_offset_checkpoint(values).encode())
