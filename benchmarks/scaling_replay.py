"""Task-graph replay (benchmarks): Spark's event log read into each benchmarked job's stages and
tasks, and that measured graph replayed on N executor slots.

Used by ``bench_scaling.py``; a module of its own so its arithmetic is tested without Spark
(``tests/test_bench_scaling.py``). The model, for one benchmarked job (every Spark job and stage
whose properties carry the benchmark's tag):

* **Tasks** are measured from the driver's side: launch to finish (``Task Info``), so a task's
  time holds its deserialization, its run in the JVM and the Python worker, and its result's
  trip back; ``Executor Run Time`` and shuffle bytes are kept beside it.
* **Serial time** is the job's wall time (taken by the driver around the call) during which no
  task of it was running: planning, listing and reading files on the driver, commits, a
  ``collect``'s post-processing, stage set-up between barriers.
* **Phases**: stages whose task intervals overlapped in the measured run ran concurrently (no
  dependency between them) and are replayed together; the others keep their barrier.
* **First use**: the first task of a stage to run in a Python worker loads that stage's code
  (imports, numba's cached kernels): measured as the excess of the stage's first launched task
  over the stage's median task. One worker paid it in a ``local[1]`` run; on a cluster each
  slot's worker pays it once, on its first task of such a stage.
* **Replay on N slots**: the serial time plus, per phase, the makespan of list scheduling its
  tasks in submission order (launch time, then task index) on N slots, each task to the slot
  that frees first. Three ways to count a task (:data:`MODES`): ``measured`` (as it ran; on the
  slot count of the measured run this gives back its wall time when the run scheduled the same
  way: the ``self`` checks), ``warm`` (the first-use excess taken off: workers that already ran
  this code, as in a long-lived session) and ``cold`` (the excess added to each slot's first
  task of the stage: fresh workers, as for a new ``spark-submit``).
* **CPU per task time**: a task's time is its Python worker's, but the JVM works beside it
  (Arrow batches into rows, shuffle files, the sink): when the run's process tree was sampled
  (:mod:`tree_cpu`), a phase's CPU over its summed task time says how many CPUs one running
  task kept busy (1.4 for a scan measured on ``local[1]`` of a 2-CPU machine: its JVM work ran
  on the second CPU). Replayed where each slot has one CPU (a cluster whose executors have a
  core per task slot: the projections), every task of the phase takes that factor longer
  (when above 1); replayed on slots that share ``cpus`` CPUs (the check against a measured
  ``local[2]`` run), the tasks running at once are slowed by their CPU need over ``cpus``.
  Without samples a task counts as measured.
"""

from __future__ import annotations

import bisect
import heapq
import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

TAG = "kafkalog.bench.job"  # the local property naming a benchmarked job on its Spark jobs
MODES = ("measured", "warm", "cold")


@dataclass
class Task:
    stage: int
    index: int
    launch_ms: int
    finish_ms: int
    run_ms: int  # Executor Run Time
    shuffle_read: int  # bytes, local and remote
    shuffle_write: int

    @property
    def ms(self) -> int:
        return self.finish_ms - self.launch_ms


@dataclass
class Stage:
    stage_id: int
    name: str
    job: str
    parents: tuple[int, ...] = ()
    tasks: list[Task] = field(default_factory=list)

    @property
    def task_ms(self) -> int:
        return sum(t.ms for t in self.tasks)

    def ordered(self) -> list[Task]:
        """The tasks in submission order."""
        return sorted(self.tasks, key=lambda t: (t.launch_ms, t.index))

    @property
    def first_use_ms(self) -> float:
        """How much longer the first launched task took than the median of the (up to) three
        launched after it: its neighbours, not the whole stage's median, because a job may
        submit its biggest tasks first (restore does), and then the first task is long by
        design, not by loading code."""
        ordered = self.ordered()
        if len(ordered) < 2:
            return 0.0
        after = sorted(t.ms for t in ordered[1:4])
        return max(0.0, ordered[0].ms - after[len(after) // 2])

    def durations(self, mode: str = "measured") -> list[float]:
        """Task times in submission order, the first one without its first-use excess unless
        ``mode`` is ``measured``."""
        out = [float(t.ms) for t in self.ordered()]
        if out and mode != "measured":
            out[0] -= self.first_use_ms
        return out

    @property
    def largest_share(self) -> float:
        """The largest warm task's share of the stage's summed warm task time."""
        times = self.durations("warm")
        total = sum(times)
        return max(times) / total if total else 0.0

    def interval(self) -> tuple[int, int]:
        return min(t.launch_ms for t in self.tasks), max(t.finish_ms for t in self.tasks)


@dataclass
class Trace:
    """One benchmarked job as measured: its wall time and its stages with their tasks."""

    job: str
    start_ms: float  # the driver's clock (epoch ms) around the job's call
    end_ms: float
    stages: list[Stage]
    spark_jobs: int = 0
    cpu: list[tuple[float, float]] | None = None  # (epoch ms, cumulative CPU ms) of the run

    @property
    def wall_ms(self) -> float:
        return self.end_ms - self.start_ms

    @property
    def tasks(self) -> list[Task]:
        return [t for s in self.stages for t in s.tasks]

    @property
    def busy_ms(self) -> float:
        """Time during which at least one task of the job was running."""
        return union_length((t.launch_ms, t.finish_ms) for t in self.tasks)

    @property
    def serial_ms(self) -> float:
        return max(0.0, self.wall_ms - self.busy_ms)

    @property
    def serial_share(self) -> float:
        return self.serial_ms / self.wall_ms if self.wall_ms else 0.0

    def serial_parts(self) -> tuple[float, float, float]:
        """The serial time before the first task (planning), between tasks (stage set-up,
        driver work between Spark jobs) and after the last one (commits, post-processing)."""
        tasks = self.tasks
        if not tasks:
            return self.wall_ms, 0.0, 0.0
        before = max(0.0, min(t.launch_ms for t in tasks) - self.start_ms)
        after = max(0.0, self.end_ms - max(t.finish_ms for t in tasks))
        return before, max(0.0, self.serial_ms - before - after), after

    def phases(self) -> list[list[Stage]]:
        """Stages grouped where their task intervals overlapped, in time order."""
        out: list[list[Stage]] = []
        end = None
        for stage in sorted((s for s in self.stages if s.tasks), key=lambda s: s.interval()):
            lo, hi = stage.interval()
            if out and end is not None and lo < end:
                out[-1].append(stage)
                end = max(end, hi)
            else:
                out.append([stage])
                end = hi
        return out

    def replay(self, slots: int, mode: str = "measured", cpus: int | None = None) -> float:
        """Projected wall time (ms) of this job on ``slots`` executor slots (``mode``: how a
        task is counted, :data:`MODES`; ``cpus``: the CPUs the slots share, or ``None``: a CPU
        for each slot — see the module doc)."""
        if mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
        return self.serial_ms + sum(self._phase_makespan(p, slots, mode, cpus)
                                    for p in self.phases())

    def cpu_per_task(self, phase: list[Stage]) -> float | None:
        """CPU ms the sampled process tree used during ``phase`` per ms of its summed task time;
        ``None`` without samples."""
        if not self.cpu:
            return None
        lo = min(s.interval()[0] for s in phase)
        hi = max(s.interval()[1] for s in phase)
        task_ms = sum(s.task_ms for s in phase)
        return (cpu_at(self.cpu, hi) - cpu_at(self.cpu, lo)) / task_ms if task_ms else None

    def stretch(self, phase: list[Stage], slots: int, cpus: int | None) -> float:
        """How much longer each task of ``phase`` takes on ``slots`` slots for want of CPU."""
        need = self.cpu_per_task(phase)
        if need is None:
            return 1.0
        if cpus is not None:  # shared: the tasks running at once need need * running CPUs
            need *= min(slots, sum(len(s.tasks) for s in phase)) / cpus
        return max(1.0, need)

    def _phase_makespan(self, phase: list[Stage], slots: int, mode: str,
                        cpus: int | None = None) -> float:
        k = self.stretch(phase, slots, cpus)
        tasks = sorted((t.launch_ms, s.stage_id, t.index, d * k) for s in phase
                       for t, d in zip(s.ordered(), s.durations(mode)))
        # cold: each slot's first task of a stage pays that stage's first use
        extra = {s.stage_id: s.first_use_ms for s in phase} if mode == "cold" else None
        return makespan([(d, stage) for _, stage, _, d in tasks], slots, extra)

    def speedup(self, slots: int, mode: str = "warm") -> float:
        """Replay on one slot over replay on ``slots``, each slot with a CPU of its own."""
        one = self.replay(1, mode)
        return one / self.replay(slots, mode) if one else 0.0

    def losses(self, slots: int, mode: str = "warm") -> list[tuple[float, Stage | None, str]]:
        """What keeps the replay on ``slots`` from ``replay(1) / slots``, largest first: the
        time each part adds over its ideal share, ``(ms, stage, reason)``. The driver's serial
        time adds all but ``1/slots`` of itself (stage ``None``); a phase adds its makespan over
        its summed task time ``/ slots``, charged to its stage with the largest task, because
        it has fewer tasks than slots, one task longer than that ideal (a giant partition) or
        uneven tasks that list scheduling cannot even out."""
        before, between, after = self.serial_parts()
        parts = [(before, "before the first task (planning, listing on the driver)"),
                 (between, "between tasks (stage set-up, driver work between Spark jobs)"),
                 (after, "after the last task (commits, driver post-processing)")]
        out = [(ms * (1 - 1 / slots), None, f"driver {ms / 1000:.1f} s {what}")
               for ms, what in parts if ms > 0]
        for phase in self.phases():
            k = self.stretch(phase, slots, None)
            times = [d * k for s in phase for d in s.durations(mode)]
            made = self._phase_makespan(phase, slots, mode)
            ideal = sum(times) / slots
            stage = max(phase, key=lambda s: max(s.durations(mode)))
            biggest = max(stage.durations(mode)) * k
            if len(times) < slots:
                why = f"{len(times)} tasks for {slots} slots"
            elif biggest > ideal:
                why = (f"one task of {biggest / 1000:.1f} s = {stage.largest_share:.0%} of the "
                       f"stage (a giant partition)")
            else:
                why = f"uneven tasks (largest {biggest / 1000:.1f} s, ideal {ideal / 1000:.1f} s)"
            out.append((made - ideal, stage, why))
        return sorted(out, key=lambda x: -x[0])

    def widest_stage(self) -> Stage | None:
        """The stage whose largest (warm) task limits it most, among stages holding at least
        5 % of the job's task time (tiny stages do not bound a speed-up)."""
        total = sum(s.task_ms for s in self.stages) or 1
        big = [s for s in self.stages if s.tasks and s.task_ms >= 0.05 * total]
        return max(big, key=lambda s: s.largest_share, default=None)


def makespan(tasks: Iterable[float | tuple[float, object]], slots: int,
             first_use: dict | None = None) -> float:
    """List scheduling: each task, in order, on the slot that frees first. A task is a
    duration, or ``(duration, kind)``; ``first_use`` maps a kind to the time a slot pays on its
    first task of that kind."""
    free = [(0.0, slot) for slot in range(max(1, slots))]
    seen: set = set()
    end = 0.0
    for task in tasks:
        duration, kind = task if isinstance(task, tuple) else (task, None)
        at, slot = heapq.heappop(free)
        if first_use and (slot, kind) not in seen:
            seen.add((slot, kind))
            duration += first_use.get(kind, 0.0)
        heapq.heappush(free, (at + duration, slot))
        end = max(end, at + duration)
    return end


def cpu_at(samples: list[tuple[float, float]], ms: float) -> float:
    """The cumulative CPU of ``(time, cpu)`` samples at time ``ms``, interpolated between the
    samples around it (the first or last one outside them)."""
    at = bisect.bisect_left(samples, (ms, float("-inf")))
    if at == 0:
        return samples[0][1]
    if at == len(samples):
        return samples[-1][1]
    (t0, c0), (t1, c1) = samples[at - 1], samples[at]
    return c0 + (c1 - c0) * (ms - t0) / (t1 - t0) if t1 > t0 else c1


def union_length(intervals: Iterable[tuple[float, float]]) -> float:
    """Total length covered by the intervals."""
    total, end = 0.0, None
    start = 0.0
    for lo, hi in sorted(intervals):
        if end is None or lo > end:
            if end is not None:
                total += end - start
            start, end = lo, hi
        else:
            end = max(end, hi)
    if end is not None:
        total += end - start
    return total


def events(path: Path) -> Iterator[dict]:
    """The events of one event log file (JSON lines, as ``spark.eventLog.enabled`` writes
    them uncompressed); the last line of a log still being written may be cut short."""
    with open(path, encoding="utf-8") as f:
        lines = [line for line in f if line.strip()]
    for i, line in enumerate(lines):
        try:
            yield json.loads(line)
        except json.JSONDecodeError:
            if i < len(lines) - 1 or not path.name.endswith(".inprogress"):
                raise
            return


def read_traces(path: Path, walls: dict[str, tuple[float, float]],
                cpu: list[tuple[float, float]] | None = None) -> dict[str, Trace]:
    """Each benchmarked job's trace from the event log at ``path``; ``walls`` gives each job's
    start and end (epoch ms) as the driver measured them around its call, ``cpu`` the run's
    process-tree CPU samples if taken. Only successful tasks of a stage's last attempt count (a
    retried task's lost work is not the graph's)."""
    stages: dict[int, Stage] = {}
    attempt: dict[int, int] = {}  # the last attempt submitted of each stage
    tasks: dict[tuple[int, int], list[Task]] = {}  # (stage, attempt) -> successful tasks
    jobs_of: dict[str, set[int]] = {}
    for ev in events(path):
        kind = ev.get("Event")
        if kind == "SparkListenerJobStart":
            name = (ev.get("Properties") or {}).get(TAG)
            if name:
                jobs_of.setdefault(name, set()).add(ev["Job ID"])
                for info in ev.get("Stage Infos", []):
                    sid = info["Stage ID"]
                    stages.setdefault(sid, Stage(sid, stage_label(info), name,
                                                 tuple(info.get("Parent IDs", []))))
        elif kind == "SparkListenerStageSubmitted":
            info = ev["Stage Info"]
            attempt[info["Stage ID"]] = info.get("Stage Attempt ID", 0)
        elif kind == "SparkListenerTaskEnd" and ev["Stage ID"] in stages \
                and ev.get("Task End Reason", {}).get("Reason") == "Success":
            key = (ev["Stage ID"], ev.get("Stage Attempt ID", 0))
            tasks.setdefault(key, []).append(_task(ev))
    for sid, stage in stages.items():
        stage.tasks = tasks.get((sid, attempt.get(sid, 0)), [])
    out = {}
    for name, (start, end) in walls.items():
        mine = sorted((s for s in stages.values() if s.job == name), key=lambda s: s.stage_id)
        out[name] = Trace(name, start, end, mine, len(jobs_of.get(name, ())), cpu)
    return out


def stage_label(info: dict) -> str:
    """``collect at verify_job.py:160 [BatchScan kafkalog > Exchange]``: the call site (file
    name only) and the operators of the stage's RDDs in RDD order (their RDD class where no
    SQL operator named them)."""
    site = info.get("Stage Name", "")
    head, _, where = site.partition(" at ")
    site = f"{head} at {where.rsplit('/', 1)[-1]}" if where else site
    names: list[str] = []
    for rdd in sorted(info.get("RDD Info", []), key=lambda r: r.get("RDD ID", 0)):
        scope = json.loads(rdd["Scope"]).get("name", "") if rdd.get("Scope") else ""
        name = scope or rdd.get("Name", "")
        if name and not name.startswith(("WholeStageCodegen", "MapPartitionsRDD")) \
                and name not in names:
            names.append(name)
    return f"{site} [{' > '.join(names)}]" if names else site


def _task(ev: dict) -> Task:
    info, metrics = ev["Task Info"], ev.get("Task Metrics") or {}
    read = metrics.get("Shuffle Read Metrics") or {}
    write = metrics.get("Shuffle Write Metrics") or {}
    return Task(ev["Stage ID"], info.get("Index", 0), info["Launch Time"], info["Finish Time"],
                metrics.get("Executor Run Time", 0),
                read.get("Remote Bytes Read", 0) + read.get("Local Bytes Read", 0),
                write.get("Shuffle Bytes Written", 0))


def event_log_file(folder: Path) -> Path:
    """The one event log Spark wrote into ``folder`` (``.inprogress`` while its session runs,
    or when it was killed)."""
    logs = [p for p in folder.iterdir() if p.is_file()]
    if len(logs) != 1:
        raise RuntimeError(f"expected one event log in {folder}, found "
                           f"{sorted(p.name for p in logs)}")
    return logs[0]
