"""The task-graph replay of benchmarks/bench_scaling.py (benchmarks/scaling_replay.py) on event
logs written as Spark writes them: which tasks count, the serial time, phases, list scheduling."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def _replay():
    spec = importlib.util.spec_from_file_location("scaling_replay",
                                                  REPO / "benchmarks" / "scaling_replay.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["scaling_replay"] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


R = _replay()
T0 = 1_700_000_000_000


def job_start(job: int, tag: str | None, stages: list[tuple[int, list[int]]]) -> dict:
    props = {"callSite.short": "collect at x.py:1"}
    if tag:
        props[R.TAG] = tag
    return {"Event": "SparkListenerJobStart", "Job ID": job, "Submission Time": T0,
            "Stage IDs": [s for s, _ in stages], "Properties": props,
            "Stage Infos": [{"Stage ID": s, "Stage Attempt ID": 0, "Parent IDs": parents,
                             "Stage Name": "collect at /somewhere/verify_job.py:160",
                             "Number of Tasks": 1,
                             "RDD Info": [{"RDD ID": 2, "Name": "MapPartitionsRDD",
                                           "Scope": json.dumps({"id": "1", "name": "Exchange"})},
                                          {"RDD ID": 1, "Name": "DataSourceRDD", "Scope":
                                           json.dumps({"id": "0", "name": "BatchScan kafkalog"})},
                                          {"RDD ID": 3, "Name": "PythonRDD"}]}
                            for s, parents in stages]}


def submitted(stage: int, attempt: int = 0) -> dict:
    return {"Event": "SparkListenerStageSubmitted",
            "Stage Info": {"Stage ID": stage, "Stage Attempt ID": attempt}}


def task_end(stage: int, index: int, launch: int, finish: int, *, attempt: int = 0,
             reason: str = "Success", shuffle_write: int = 0) -> dict:
    return {"Event": "SparkListenerTaskEnd", "Stage ID": stage, "Stage Attempt ID": attempt,
            "Task End Reason": {"Reason": reason},
            "Task Info": {"Index": index, "Launch Time": T0 + launch, "Finish Time": T0 + finish},
            "Task Metrics": {"Executor Run Time": finish - launch - 1,
                             "Shuffle Read Metrics": {"Local Bytes Read": 5, "Remote Bytes Read": 2},
                             "Shuffle Write Metrics": {"Shuffle Bytes Written": shuffle_write}}}


def write_log(path: Path, evs: list[dict]) -> Path:
    path.write_text("".join(json.dumps(e) + "\n" for e in evs))
    return path


def test_list_scheduling_and_interval_union() -> None:
    assert R.makespan([3, 3, 2, 2, 2], 1) == 12
    assert R.makespan([3, 3, 2, 2, 2], 2) == 7  # 3|3, 2 -> 5|3, 2 -> 5|5, 2 -> 7|5
    assert R.makespan([3, 3, 2, 2, 2], 8) == 3
    assert R.makespan([], 4) == 0
    assert R.union_length([(0, 2), (1, 3), (5, 6), (5.5, 5.7)]) == 4
    assert R.union_length([]) == 0


def test_a_one_slot_run_replays_to_its_own_wall_time(tmp_path: Path) -> None:
    # job "scan": stage 0 (4 tasks of 100 ms, one after the other), then stage 1 (one task of
    # 200 ms) after a 50 ms gap; untagged job 1 and a failed task are not part of it
    evs = [job_start(0, "scan", [(0, []), (1, [0])]), submitted(0), submitted(1),
           job_start(1, None, [(2, [])]), submitted(2), task_end(2, 0, 0, 999)]
    evs += [task_end(0, i, 100 * i, 100 * (i + 1)) for i in range(4)]
    evs += [task_end(0, 9, 0, 30, reason="ExceptionFailure")]
    evs += [task_end(1, 0, 450, 650, shuffle_write=10)]
    log = write_log(tmp_path / "events", evs)

    trace = R.read_traces(log, {"scan": (T0 - 50, T0 + 950)})["scan"]

    assert trace.spark_jobs == 1 and [s.stage_id for s in trace.stages] == [0, 1]
    assert len(trace.tasks) == 5 and trace.busy_ms == 600
    assert trace.serial_ms == 400 and trace.serial_share == pytest.approx(0.4)
    assert trace.serial_parts() == (50, 50, 300)  # planning, the gap, after the last task
    assert trace.replay(1) == pytest.approx(1000)
    assert trace.replay(2) == pytest.approx(400 + 200 + 200)
    assert trace.replay(128) == pytest.approx(400 + 100 + 200)
    assert trace.speedup(2) == pytest.approx(1000 / 800)
    wide = trace.widest_stage()  # stage 1's one task is all of it
    assert wide.stage_id == 1 and wide.largest_share == 1.0
    assert wide.name == "collect at verify_job.py:160 [BatchScan kafkalog > Exchange > PythonRDD]"
    assert trace.stages[0].tasks[0].shuffle_read == 7


def test_overlapping_stages_are_one_phase_and_a_retried_stage_counts_its_last_attempt(
        tmp_path: Path) -> None:
    # two independent stages that ran side by side (2 slots), then a stage whose attempt 0
    # lost a task: only attempt 1's tasks are the graph's
    evs = [job_start(0, "compact", [(0, []), (1, []), (2, [0, 1])]),
           submitted(0), submitted(1), task_end(0, 0, 0, 300), task_end(1, 0, 0, 100),
           task_end(1, 1, 100, 200), submitted(2), task_end(2, 0, 300, 350),
           submitted(2, attempt=1), task_end(2, 0, 400, 500, attempt=1),
           task_end(2, 0, 360, 390, attempt=0)]
    log = write_log(tmp_path / "events", evs)

    trace = R.read_traces(log, {"compact": (T0, T0 + 500), "missing": (T0, T0 + 10)})

    t = trace["compact"]
    assert [len(p) for p in t.phases()] == [2, 1]
    assert [x.ms for x in t.stages[2].tasks] == [100]
    assert t.serial_ms == 100  # 300..400 ran no task of the last attempt
    assert t.replay(2) == pytest.approx(100 + 300 + 100)
    assert t.replay(1) == pytest.approx(100 + 500 + 100)
    assert trace["missing"].tasks == [] and trace["missing"].replay(8) == 10
    assert trace["missing"].serial_parts() == (10, 0, 0)


def test_a_stages_first_use_is_taken_off_warm_and_paid_by_every_slot_cold(tmp_path: Path) -> None:
    # the first task loaded the stage's code: 400 ms over the stage's median
    evs = [job_start(0, "verify", [(0, [])]), submitted(0), task_end(0, 0, 0, 500)]
    evs += [task_end(0, i, 400 + 100 * i, 500 + 100 * i) for i in (1, 2, 3)]
    trace = R.read_traces(write_log(tmp_path / "events", evs), {"verify": (T0, T0 + 800)})
    t = trace["verify"]

    assert t.stages[0].first_use_ms == 400 and t.serial_ms == 0
    assert t.stages[0].durations("warm") == [100, 100, 100, 100]
    assert t.stages[0].largest_share == 0.25  # the warm tasks are even
    assert [t.replay(1, m) for m in R.MODES] == [800, 400, 800]
    assert [t.replay(2, m) for m in R.MODES] == [500, 200, 600]  # cold: 400 more on each slot
    assert t.replay(8, "cold") == 500 and t.speedup(2) == 2 and t.speedup(2, "cold") == 800 / 600
    with pytest.raises(ValueError, match="mode must be one of"):
        t.replay(2, "hot")
    assert R.makespan([(5, "a"), (5, "a"), (5, "b")], 1, {"a": 10, "b": 1}) == 26


def test_a_stage_submitting_its_biggest_tasks_first_has_no_first_use_by_design(
        tmp_path: Path) -> None:
    """Restore submits its biggest tasks first: the first task is long, yet it loaded nothing
    more than the ones after it — measured against its neighbours, not the stage's median."""
    times = [900, 880, 860, 300, 200, 100, 100]
    evs = [job_start(0, "restore", [(0, [])]), submitted(0)]
    at = 0
    for i, ms in enumerate(times):
        evs.append(task_end(0, i, at, at + ms))
        at += ms
    trace = R.read_traces(write_log(tmp_path / "events", evs), {"restore": (T0, T0 + at)})
    assert trace["restore"].stages[0].first_use_ms == 900 - 860  # the stage median: 300


def test_the_event_log_folder_holds_one_log_and_a_running_ones_cut_line_is_left_out(
        tmp_path: Path) -> None:
    with pytest.raises(RuntimeError, match="expected one event log"):
        R.event_log_file(tmp_path)
    evs = [job_start(0, "scan", [(0, [])]), submitted(0), task_end(0, 0, 0, 100)]
    text = "".join(json.dumps(e) + "\n" for e in evs)
    running = tmp_path / "local-1.inprogress"
    running.write_text(text + text[:40])  # the session is still writing its next event
    assert R.event_log_file(tmp_path) == running
    assert len(R.read_traces(running, {"scan": (T0, T0 + 100)})["scan"].tasks) == 1
    finished = tmp_path / "local-1"
    running.rename(finished)
    with pytest.raises(json.JSONDecodeError):  # a finished log cut short is not the graph
        list(R.events(finished))
    (tmp_path / "local-2").write_text(text)
    with pytest.raises(RuntimeError, match=r"found \['local-1', 'local-2'\]"):
        R.event_log_file(tmp_path)


def test_the_losses_add_up_to_the_replay_and_name_the_stage_and_cause(tmp_path: Path) -> None:
    # job "scan" of the one-slot test, then a job whose one task holds 70 % of its stage
    evs = [job_start(0, "scan", [(0, []), (1, [0])]), submitted(0), submitted(1)]
    evs += [task_end(0, i, 100 * i, 100 * (i + 1)) for i in range(4)]
    evs += [task_end(1, 0, 450, 650)]
    evs += [job_start(1, "compact", [(2, [])]), submitted(2), task_end(2, 0, 1000, 1100)]
    evs += [task_end(2, i, 1000 + 100 * i, 1100 + 100 * i) for i in (1, 2)]
    evs += [task_end(2, 3, 1300, 2000)]
    log = write_log(tmp_path / "events", evs)
    traces = R.read_traces(log, {"scan": (T0 - 50, T0 + 950), "compact": (T0 + 1000, T0 + 2000)})

    scan = traces["scan"]
    losses = scan.losses(2)
    assert sum(ms for ms, _, _ in losses) == pytest.approx(scan.replay(2) - scan.replay(1) / 2)
    assert [(ms, s and s.stage_id) for ms, s, _ in losses] == [(150, None), (100, 1), (25, None),
                                                               (25, None), (0, 0)]
    assert losses[0][2].startswith("driver 0.3 s after the last task")
    assert losses[1][2] == "1 tasks for 2 slots"
    assert losses[-1][2] == "uneven tasks (largest 0.1 s, ideal 0.2 s)"
    compact = traces["compact"]
    (ms, stage, why), = compact.losses(4)
    assert (ms, stage.stage_id) == (700 - 250, 2) and compact.replay(4) == 700
    assert why == "one task of 0.7 s = 70% of the stage (a giant partition)"


def test_a_task_that_kept_more_than_one_cpu_busy_is_slowed_where_cpus_are_short(
        tmp_path: Path) -> None:
    # local[1] on a 2-CPU machine: stage 0, four tasks of 100 ms one after the other, while the
    # sampled process tree used 1.5 ms of CPU per ms (the worker plus the JVM beside it); then
    # a one-task stage that used 0.5 CPU (waiting on I/O); 100 ms of driver time at each end
    evs = [job_start(0, "scan", [(0, []), (1, [0])]), submitted(0), submitted(1)]
    evs += [task_end(0, i, 100 * i, 100 * (i + 1)) for i in range(4)]
    evs += [task_end(1, 0, 400, 600)]
    cpu = [(T0 - 100.0, 0.0), (T0, 10.0), (T0 + 400.0, 610.0), (T0 + 600.0, 710.0),
           (T0 + 700.0, 720.0)]
    trace = R.read_traces(write_log(tmp_path / "events", evs),
                          {"scan": (T0 - 100, T0 + 700)}, cpu)["scan"]
    first, second = trace.phases()

    assert R.cpu_at(cpu, T0 + 200) == pytest.approx(310)  # between samples: interpolated
    assert R.cpu_at(cpu, T0 - 500) == 0 and R.cpu_at(cpu, T0 + 900) == 720
    assert trace.cpu_per_task(first) == pytest.approx(1.5)
    assert trace.cpu_per_task(second) == pytest.approx(0.5)
    # as measured: one slot on the 2-CPU machine had the CPU the JVM's work needed
    assert trace.replay(1, cpus=2) == pytest.approx(800)
    # two slots sharing those 2 CPUs: 2 x 1.5 CPUs wanted, each task 1.5x as long
    assert trace.replay(2, cpus=2) == pytest.approx(200 + 2 * 150 + 200)
    # a CPU of its own per slot (the projections): every task of stage 0 1.5x, at any count
    assert trace.replay(1) == pytest.approx(200 + 600 + 200)
    assert trace.replay(4) == pytest.approx(200 + 150 + 200)
    assert trace.speedup(4) == pytest.approx(1000 / 550)
    losses = trace.losses(4)
    assert sum(ms for ms, _, _ in losses) == pytest.approx(trace.replay(4) - trace.replay(1) / 4)
    # without samples a task counts as measured
    bare = R.read_traces(tmp_path / "events", {"scan": (T0 - 100, T0 + 700)})["scan"]
    assert bare.cpu_per_task(first) is None and bare.replay(4) == pytest.approx(500)
