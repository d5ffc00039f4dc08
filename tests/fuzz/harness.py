"""Fuzzing harness (tests): run seeded mutated inputs through every parser, verify and recover.

Case ``i`` of seed ``S`` is fully determined by ``random.Random(f"{S}:{i}")``: it picks a target,
a valid input of the target's kind from :mod:`fuzz.corpus`, and one to three mutators from
:mod:`fuzz.mutators`. A case passes when the target returns (its own invariants hold) or raises
a :class:`~kafkalog_spark.errors.KafkaLogError` subclass. Anything else is a finding: another
exception, a broken invariant, a case over the time bound, a ``MemoryError`` under the memory
bound, or a worker that dies or hangs.

Bounds
------
time
    ``signal.setitimer(ITIMER_PROF)`` in the worker's main thread (``--time-limit``, default 2 s
    of the worker's CPU per case: CPU, not wall time, so a loaded machine does not turn a slow
    case into a finding). A numba kernel does not return to the interpreter to take the signal, so the
    parent also gives each worker a wall-clock budget, kills a stuck worker and reports the case
    it was running (workers print ``case <i>`` before each case).
memory
    ``resource.setrlimit(RLIMIT_AS)`` in the worker, set after imports and warm-up to the
    worker's address space plus ``--memory-mb`` (default 1024 MiB). An allocation past it is a
    ``MemoryError`` (or the worker's death), both reported.

Commands
--------
CI runs a fixed seed (``tests/test_fuzz.py``). The long run, from the repository root::

    PYTHONPATH=tests .venv/bin/python -m fuzz.harness --cases 1000000 --seed 7 --workers 2

prints a summary (cases and outcomes per target, findings with the case number to replay with
``--only <i>`` and the same ``--seed``/``--expensive-every``; case numbers name the same input
only for the same corpus and harness, i.e. the same commit and fixtures).
``benchmarks/fuzz_long.py`` runs the same command. CI (12,000 cases, seed 20261122) gives each
of the 19 byte-level targets ~600 cases and verify/recover 150 each (every 40th case).

Invariants beyond "no untyped exception": ``scan_entries`` never raises; skip-mode decode never
raises a corrupt-data error; bad ranges lie inside the data; decoded Arrow batches validate; a
snapshot that parses re-encodes to its bytes; offset/leader-epoch checkpoints round-trip;
``decompress`` honours ``max_size``; after ``recover(execute_plan=True)`` a deep verify finds no
error except inside the records of CRC-valid batches (recovery, like Kafka's, does not parse them).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import random
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import traceback
from collections import Counter, defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from fuzz import corpus as C
from fuzz.mutators import mutate
from real_fixtures import real_fixtures_dir

from kafkalog_spark.errors import InvalidOptionError, KafkaLogError, MissingCodecError

FIXTURES = real_fixtures_dir()
MAX_DECOMPRESSED = 16 << 20  # decode/decompress bound per entry inside the harness


class CaseTimeout(BaseException):
    """Raised by the watchdog; a BaseException so no ``except Exception`` in the code swallows it."""


class Finding(AssertionError):
    """A target's own invariant broken (a wrong result without an exception)."""


@dataclass(frozen=True)
class Target:
    name: str
    kind: str  # corpus kind
    run: Callable[[random.Random, Any, Path], None]  # (rng, valid item, scratch dir)
    expensive: bool = False


# ------------------------------------------------------------------------------------------
# targets over .log bytes
# ------------------------------------------------------------------------------------------
def _log(rng: random.Random, item) -> tuple[int, bytes]:
    base, data = item
    return base, mutate(rng, data)[0]


def t_scan(rng, item, _):
    from kafkalog_spark.codec.records.scan import scan_entries

    _, data = _log(rng, item)
    try:
        t = scan_entries(data)
    except KafkaLogError as e:  # documented: never raises for bad data
        raise Finding(f"scan_entries raised {e!r}") from e
    if not 0 <= t.stop_position <= len(data):
        raise Finding(f"stop_position {t.stop_position} outside 0..{len(data)}")


def t_crc(rng, item, _):
    from kafkalog_spark.codec.records.crc import verify_crcs
    from kafkalog_spark.codec.records.scan import scan_entries

    _, data = _log(rng, item)
    t = scan_entries(data)
    ok = verify_crcs(data, t)
    if len(ok) != len(t):
        raise Finding("verify_crcs returned a wrong number of rows")


def _decode(verify_crc: bool, on_error: str):
    def run(rng, item, _):
        from kafkalog_spark.codec.records.decode import DecodeOptions, decode_entries

        _, data = _log(rng, item)
        opts = DecodeOptions(verify_crc=verify_crc, on_error=on_error, include_headers=True,
                             include_metadata=True, include_control=rng.random() < 0.5,
                             max_decompressed=MAX_DECOMPRESSED,
                             allow_partial_tail=rng.random() < 0.3)
        result = decode_entries(data, topic="fz", partition=0, options=opts)
        try:
            for batch in result:
                batch.validate(full=True)
        except MissingCodecError:
            raise
        except KafkaLogError as e:  # documented: skip mode drops bad entries instead
            if on_error == "skip":
                raise Finding(f"skip mode raised {e!r}") from e
            raise
        for r in result.bad_ranges:
            if not 0 <= r.start <= r.end <= len(data):
                raise Finding(f"bad range {r} outside the data")
    return run


def t_build_indexes(rng, item, _):
    from kafkalog_spark.codec.files.index_rebuild import build_indexes

    base, data = _log(rng, item)
    build_indexes(data, base, index_interval_bytes=rng.choice((1, 512, 4096)),
                  verify_crc=rng.random() < 0.8)


def t_build_txn_index(rng, item, _):
    from kafkalog_spark.codec.files.index_rebuild import build_txn_index

    base, data = _log(rng, item)
    build_txn_index(data, base).to_bytes()


def t_producer_state(rng, item, _):
    from kafkalog_spark.codec.files.snapshot import ProducerStateTracker

    base, data = _log(rng, item)
    tracker = ProducerStateTracker()
    tracker.apply(data, end_offset=rng.choice((None, base + 5)))
    tracker.snapshot().to_bytes()


# ------------------------------------------------------------------------------------------
# targets over index, snapshot, checkpoint, compressed and internal-topic bytes
# ------------------------------------------------------------------------------------------
def t_offset_index(rng, item, _):
    from kafkalog_spark.codec.files.index import read_offset_index

    base, data = _log(rng, item)
    idx = read_offset_index(data, base, strict=rng.random() < 0.3)
    idx.lookup(base + rng.randrange(-2, 500))
    with contextlib.suppress(KafkaLogError):
        idx.sanity_check("fz.index")
    idx.to_bytes()


def t_time_index(rng, item, _):
    from kafkalog_spark.codec.files.index import read_time_index

    base, data = _log(rng, item)
    idx = read_time_index(data, base, strict=rng.random() < 0.3)
    idx.lookup(rng.choice((-1, 0, 1_700_000_000_000, 2**62)))
    if idx.valid_entries:
        idx.last_entry()
    with contextlib.suppress(KafkaLogError):
        idx.sanity_check("fz.timeindex")
    idx.to_bytes()


def t_txn_index(rng, item, _):
    from kafkalog_spark.codec.files.index import read_txn_index

    base, data = _log(rng, item)
    idx = read_txn_index(data, base, strict=rng.random() < 0.3)
    idx.collect_aborted_txns(base, base + rng.randrange(1, 1000))
    with contextlib.suppress(KafkaLogError):
        idx.sanity_check("fz.txnindex")
    idx.to_bytes()


def t_snapshot(rng, item, _):
    from kafkalog_spark.codec.files.snapshot import ProducerStateTracker, read_snapshot

    _, data = _log(rng, item)
    snap = read_snapshot(data, file="fz.snapshot")
    tracker = ProducerStateTracker()
    tracker.load_snapshot(snap)
    if snap.to_bytes() != data:  # it passed its CRC: every byte is accounted for
        raise Finding("a snapshot that parsed does not re-encode to its bytes")


def _text(rng, data: bytes) -> str:
    return mutate(rng, data)[0].decode("latin-1")


def t_offset_checkpoint(rng, data, _):
    from kafkalog_spark.codec.files.checkpoints import (format_offset_checkpoint,
                                                        parse_offset_checkpoint)

    offsets = parse_offset_checkpoint(_text(rng, data), file="fz-checkpoint")
    try:
        text = format_offset_checkpoint(offsets)
    except InvalidOptionError:  # Kafka reads any topic text but we only write legal names
        return
    if parse_offset_checkpoint(text) != offsets:
        raise Finding("offset checkpoint does not round-trip")


def t_epoch_checkpoint(rng, data, _):
    from kafkalog_spark.codec.files import checkpoints as K

    entries = K.parse_leader_epoch_checkpoint(_text(rng, data), file="leader-epoch-checkpoint")
    K.load_leader_epochs(entries)
    if K.parse_leader_epoch_checkpoint(K.format_leader_epoch_checkpoint(entries)) != entries:
        raise Finding("leader epoch checkpoint does not round-trip")


def t_partition_metadata(rng, data, _):
    from kafkalog_spark.codec.files.properties import parse_partition_metadata

    parse_partition_metadata(_text(rng, data), file="partition.metadata").topic_id_text


def t_properties(rng, data, _):
    from kafkalog_spark.codec.files import properties as K

    text = _text(rng, data)
    K.parse_java_properties(text, file="meta.properties")
    K.parse_meta_properties(text, file="meta.properties")
    K.parse_clean_shutdown(text)


def t_decompress(rng, item, _):
    from kafkalog_spark.codec.compression.codecs import decompress

    codec, magic, payload = item
    out = decompress(codec, mutate(rng, payload)[0], magic=magic, max_size=1 << 20)
    if len(out) > 1 << 20:
        raise Finding(f"decompress returned {len(out)} bytes over max_size")


def t_internal(rng, item, _):
    from kafkalog_spark.codec.internal import internal_topics as I

    decoder, key, value = item
    if rng.random() < 0.6 and value is not None:
        value = mutate(rng, value)[0]
    else:
        key = mutate(rng, key)[0]
    if decoder == "consumer_offsets":
        I.decode_consumer_offsets_value(I.decode_consumer_offsets_key(key), value)
    elif decoder == "transaction_log":
        I.decode_transaction_log_key(key)
        I.decode_transaction_log_value(value)
    elif decoder == "metadata":
        I.decode_metadata_record(value if value is not None else key)
    elif decoder == "end_txn_marker":
        I.decode_end_txn_marker(value)
    else:
        type_id = int.from_bytes(key[2:4], "big", signed=True) if len(key) >= 4 else -1
        I.decode_control_record_value(type_id, value)


# ------------------------------------------------------------------------------------------
# verify and recover over a damaged log dir
# ------------------------------------------------------------------------------------------
def _damaged_log_dir(rng, template: Path, scratch: Path) -> tuple[Path, Path]:
    case_dir = Path(tempfile.mkdtemp(dir=scratch))
    root = case_dir / "logs"
    shutil.copytree(template, root)
    files = sorted(p for p in root.rglob("*") if p.is_file() and p.name != ".lock")
    # logs and indexes most often: that is where the interesting cuts are
    weights = [4 if p.suffix in (".log", ".index", ".timeindex") else 1 for p in files]
    for victim in set(rng.choices(files, weights=weights, k=rng.choice((1, 1, 2)))):
        victim.write_bytes(mutate(rng, victim.read_bytes())[0])
    return case_dir, root


def t_verify(rng, template, scratch):
    from kafkalog_spark.inspect.verify import verify

    case_dir, root = _damaged_log_dir(rng, template, scratch)
    try:
        verify(root, deep=True).to_dict()
    finally:
        shutil.rmtree(case_dir, ignore_errors=True)


def t_recover(rng, template, scratch):
    from kafkalog_spark.inspect.verify import verify
    from kafkalog_spark.recovery.rebuild import rebuild_indexes
    from kafkalog_spark.recovery.recover import recover

    case_dir, root = _damaged_log_dir(rng, template, scratch)
    quarantine = case_dir / "quarantine"
    try:
        report = recover(root, execute_plan=True, quarantine_dir=quarantine)
        # Recovery checks what Kafka's does (structure, CRC, offsets), not the records inside a
        # CRC-valid batch (damage restamped with a good CRC: a broken writer, not a broken
        # disk), which a broker keeps too; every other check must pass but in what recover
        # leaves as the broker's load does, and names: an index file (until rebuild-index),
        # a partition with a damaged segment (until --salvage).
        left = {str(Path(p.path) / line.split(":")[0]) for p in report.partitions
                for line in p.left}
        damaged = {str(Path(name).parent) for name in left if name.endswith(".log")}
        errors = [p for p in verify(root, deep=True).errors() if p.check != "records"]
        if unlisted := [p for p in errors if p.file not in left
                        and str(Path(p.file).parent) not in damaged  # its files, its checkpoints:
                        and not any(p.message.startswith(f"{Path(d).name}: ") for d in damaged)]:
            raise Finding(f"verify after recover: {unlisted[:3]}")
        if errors:
            if damaged:
                recover(root, execute_plan=True, salvage=True, quarantine_dir=quarantine)
            rebuild_indexes(root, execute_plan=True, quarantine_dir=str(quarantine))
            if errors := [p for p in verify(root, deep=True).errors() if p.check != "records"]:
                raise Finding(f"verify after recover, --salvage and rebuild-index: {errors[:3]}")
    finally:
        shutil.rmtree(case_dir, ignore_errors=True)


TARGETS = [
    Target("scan_entries", "log", t_scan),
    Target("verify_crcs", "log", t_crc),
    Target("decode_fail_crc", "log", _decode(True, "fail")),
    Target("decode_skip_crc", "log", _decode(True, "skip")),
    Target("decode_fail_nocrc", "log", _decode(False, "fail")),
    Target("decode_skip_nocrc", "log", _decode(False, "skip")),
    Target("build_indexes", "log", t_build_indexes),
    Target("build_txn_index", "log", t_build_txn_index),
    Target("producer_state_apply", "log", t_producer_state),
    Target("read_offset_index", "index", t_offset_index),
    Target("read_time_index", "timeindex", t_time_index),
    Target("read_txn_index", "txnindex", t_txn_index),
    Target("read_snapshot", "snapshot", t_snapshot),
    Target("offset_checkpoint", "offset_checkpoint", t_offset_checkpoint),
    Target("leader_epoch_checkpoint", "epoch_checkpoint", t_epoch_checkpoint),
    Target("partition_metadata", "partition_metadata", t_partition_metadata),
    Target("properties", "properties", t_properties),
    Target("decompress", "compressed", t_decompress),
    Target("internal_topics", "internal", t_internal),
    Target("verify_deep", "logdir", t_verify, expensive=True),
    Target("recover_then_verify", "logdir", t_recover, expensive=True),
]
BY_NAME = {t.name: t for t in TARGETS}


# ------------------------------------------------------------------------------------------
# running cases
# ------------------------------------------------------------------------------------------
def _on_alarm(signum, frame):
    raise CaseTimeout()


def plan(seed: int, i: int, expensive_every: int) -> tuple[random.Random, Target]:
    """The case's generator and target: every ``expensive_every``-th case is a verify/recover
    case (0: never), the others spread evenly over the byte-level targets."""
    rng = random.Random(f"{seed}:{i}")
    cheap = [t for t in TARGETS if not t.expensive]
    if expensive_every and i % expensive_every == expensive_every - 1:
        return rng, rng.choice([t for t in TARGETS if t.expensive])
    return rng, rng.choice(cheap)


def run_case(rng: random.Random, target: Target, corpus: C.Corpus, scratch: Path,
             time_limit: float) -> tuple[str, str | None]:
    """``("ok" | "typed" | "finding", detail)`` for one case."""
    item = rng.choice(corpus.items[target.kind])
    signal.setitimer(signal.ITIMER_PROF, time_limit)
    try:
        target.run(rng, item, scratch)
        return "ok", None
    except KafkaLogError as e:
        return "typed", type(e).__name__
    except CaseTimeout:
        return "finding", f"over the {time_limit} s time bound"
    except Exception as e:  # noqa: BLE001 - every other exception is what we look for
        tb = traceback.extract_tb(e.__traceback__)
        where = next((f"{Path(f.filename).name}:{f.lineno}" for f in reversed(tb)
                      if "kafkalog_spark" in f.filename), "?")
        return "finding", f"{type(e).__name__}: {str(e)[:200]} at {where}"
    finally:
        signal.setitimer(signal.ITIMER_PROF, 0)


def _limit_memory(extra_mb: int) -> None:
    with open("/proc/self/status") as f:
        vm = next(int(line.split()[1]) for line in f if line.startswith("VmSize:")) * 1024
    limit = vm + extra_mb * 1024 * 1024
    resource.setrlimit(resource.RLIMIT_AS, (limit, resource.getrlimit(resource.RLIMIT_AS)[1]))


def worker(args: argparse.Namespace) -> int:
    signal.signal(signal.SIGPROF, _on_alarm)
    fixtures = Path(args.fixtures) if args.fixtures else (FIXTURES if FIXTURES.is_dir() else None)
    with tempfile.TemporaryDirectory(prefix="kafkalog-fuzz-") as tmp:
        scratch = Path(tmp)
        corpus = C.build(fixtures, scratch)
        # warm-up: every target on every unmutated seed kind compiles the kernels (first calls
        # are not timed) and proves the corpus valid
        for t in TARGETS:
            for item in corpus.items[t.kind]:
                try:
                    t.run(_NoMutation(), item, scratch)
                except KafkaLogError as e:  # a seed that is not valid input is a harness bug
                    if not corpus.is_over_bound(item):
                        print(f"invalid seed for {t.name}: {e}", file=sys.stderr)
                        raise
        if args.memory_mb:
            _limit_memory(args.memory_mb)
        cases = [args.only] if args.only is not None else range(args.start, args.cases,
                                                                  args.stride)
        for i in cases:
            rng, target = plan(args.seed, i, args.expensive_every)
            print(f"case {i}", flush=True)
            outcome, detail = run_case(rng, target, corpus, scratch, args.time_limit)
            print(json.dumps({"i": i, "target": target.name, "outcome": outcome,
                              "detail": detail}), flush=True)
    return 0


class _NoMutation(random.Random):
    """A generator whose mutators leave data unchanged (warm-up on valid inputs)."""

    def choices(self, population, weights=None, *, cum_weights=None, k=1):
        if population and population[0] == "bit_flip":
            return []
        return super().choices(population, weights, cum_weights=cum_weights, k=k)


def run(cases: int, seed: int, *, workers: int = 2, expensive_every: int = 40,
        time_limit: float = 2.0, memory_mb: int = 1024, fixtures: Path | None = None,
        wall_limit: float | None = None) -> dict:
    """Run cases ``0..cases-1`` of ``seed`` in ``workers`` subprocesses; returns the summary
    (``counts[target][outcome]``, ``findings``: dicts with ``i``, ``target``, ``detail``)."""
    cmd = [sys.executable, "-m", "fuzz.harness", "--worker", "--cases", str(cases),
           "--seed", str(seed), "--stride", str(workers), "--time-limit", str(time_limit),
           "--memory-mb", str(memory_mb), "--expensive-every", str(expensive_every)]
    if fixtures is not None:
        cmd += ["--fixtures", str(fixtures)]
    env_path = str(Path(__file__).resolve().parents[1])
    import os

    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [env_path] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p])}
    procs = [subprocess.Popen(cmd + ["--start", str(w)], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, env=env) for w in range(workers)]
    deadline = None if wall_limit is None else time.monotonic() + wall_limit
    counts: dict[str, Counter] = defaultdict(Counter)
    findings: list[dict] = []
    for p in procs:
        try:
            remaining = None if deadline is None else max(1.0, deadline - time.monotonic())
            out, err = p.communicate(timeout=remaining)
            died = p.returncode != 0 and f"worker exited {p.returncode}"
        except subprocess.TimeoutExpired:
            p.kill()
            out, err = p.communicate()
            died = "worker over its wall-clock budget (a hang the alarm could not interrupt)"
        last = None
        for line in out.splitlines():
            if line.startswith("case "):
                last = int(line.split()[1])
            elif line.startswith("{"):
                rec = json.loads(line)
                last = None
                counts[rec["target"]][rec["outcome"]] += 1
                if rec["outcome"] == "typed":
                    counts[rec["target"]]["typed:" + rec["detail"]] += 1
                if rec["outcome"] == "finding":
                    findings.append(rec)
        if died:
            findings.append({"i": last, "target": None if last is None else
                             plan(seed, last, expensive_every)[1].name,
                             "outcome": "finding", "detail": f"{died}; stderr: {err[-2000:]}"})
    return {"seed": seed, "cases": sum(c["ok"] + c["typed"] + c["finding"] for c in counts.values()),
            "counts": {k: dict(v) for k, v in sorted(counts.items())}, "findings": findings}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m fuzz.harness", description=__doc__.split("\n")[0])
    ap.add_argument("--cases", type=int, default=10_000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--expensive-every", type=int, default=40,
                    help="every N-th case is a verify/recover case (0: none)")
    ap.add_argument("--time-limit", type=float, default=2.0, help="seconds per case")
    ap.add_argument("--memory-mb", type=int, default=1024, help="address space per worker "
                    "beyond its size after warm-up (0: no limit)")
    ap.add_argument("--fixtures", default=None, help="the real broker fixtures (default: "
                    "$KAFKALOG_REAL_FIXTURES, else ../shared/fixtures/real next to the clone)")
    ap.add_argument("--only", type=int, default=None, help="replay one case (in this process)")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--start", type=int, default=0, help=argparse.SUPPRESS)
    ap.add_argument("--stride", type=int, default=1, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.worker or args.only is not None:
        return worker(args)
    t0 = time.monotonic()
    summary = run(args.cases, args.seed, workers=args.workers, time_limit=args.time_limit,
                  memory_mb=args.memory_mb, expensive_every=args.expensive_every,
                  fixtures=Path(args.fixtures) if args.fixtures else None)
    print(f"seed {summary['seed']}: {summary['cases']} cases in {time.monotonic() - t0:.1f} s")
    for name, c in summary["counts"].items():
        typed = ", ".join(f"{k[6:]} {v}" for k, v in sorted(c.items()) if k.startswith("typed:"))
        print(f"  {name:24} ok {c.get('ok', 0):6}  typed {c.get('typed', 0):6}  "
              f"findings {c.get('finding', 0):3}  ({typed})")
    for f in summary["findings"]:
        print(f"FINDING case {f['i']} [{f['target']}]: {f['detail']}")
    return 1 if summary["findings"] else 0


if __name__ == "__main__":
    sys.exit(main())
