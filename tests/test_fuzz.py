"""Fuzzing in CI: a fixed-seed run of the tests/fuzz harness over every parser, verify and
recover (mutated valid inputs must end in a result or a typed KafkaLogError, within a time and
memory bound), plus checks that the harness itself catches what it claims to catch.

The long run is ``PYTHONPATH=tests .venv/bin/python -m fuzz.harness --cases N --seed S``
(see ``tests/fuzz/harness.py``)."""

from __future__ import annotations

import random
import subprocess
import sys
import time
from pathlib import Path

import pytest

from fuzz import harness as H
from fuzz.mutators import MUTATORS, entry_bounds, mutate

CI_SEED = 20261122
CI_CASES = 12_000
EXPENSIVE_EVERY = 40  # -> 300 verify/recover cases (each copies and damages a log dir)
TESTS = Path(__file__).resolve().parent


@pytest.mark.slow
def test_fuzz_ci_run(shared_fixtures: Path) -> None:
    summary = H.run(CI_CASES, CI_SEED, workers=2, expensive_every=EXPENSIVE_EVERY,
                    fixtures=shared_fixtures, wall_limit=300)
    details = [f"case {f['i']} [{f['target']}]: {f['detail']}" for f in summary["findings"]]
    assert not details, "fuzz findings (replay with --only):\n" + "\n".join(details)
    assert summary["cases"] == CI_CASES
    counts = summary["counts"]
    assert set(counts) == set(H.BY_NAME), "a target never ran"
    assert sum(c.get("ok", 0) + c.get("typed", 0) for n, c in counts.items()
               if H.BY_NAME[n].expensive) == CI_CASES // EXPENSIVE_EVERY
    # the mutations do damage (typed errors) without only producing garbage (some results)
    for name in ("decode_fail_crc", "read_snapshot", "decompress", "internal_topics",
                 "leader_epoch_checkpoint"):
        assert counts[name].get("typed", 0) > 0 and counts[name].get("ok", 0) > 0, (name, counts[name])


def test_mutations_are_seeded() -> None:
    data = bytes(range(256)) * 4
    a = [mutate(random.Random(f"7:{i}"), data) for i in range(50)]
    b = [mutate(random.Random(f"7:{i}"), data) for i in range(50)]
    assert a == b
    assert sum(m != data for m, _ in a) > 40


def test_structure_mutators_work_on_entries() -> None:
    from kafkalog_spark.codec.records.encode import encode_record_batches
    from fuzz.corpus import records

    log = encode_record_batches(records(30), max_batch_records=10).tobytes()
    assert len(entry_bounds(log)) == 3
    rng = random.Random(1)
    assert len(entry_bounds(MUTATORS["duplicate_entry"](rng, log))) == 4
    assert len(entry_bounds(MUTATORS["drop_entry"](rng, log))) == 2
    shuffled = MUTATORS["reorder_entries"](rng, log)
    assert sorted(shuffled[s:e] for s, e in entry_bounds(shuffled)) == \
        sorted(log[s:e] for s, e in entry_bounds(log))


def _target(run) -> H.Target:
    return H.Target("probe", "probe", run)


def test_harness_reports_untyped_errors_and_hangs() -> None:
    corpus = H.C.Corpus({"probe": [b""]})

    def bad(rng, item, scratch):
        raise ValueError("boom")

    def typed(rng, item, scratch):
        raise H.C.compression.CompressionError("bad payload")

    def hang(rng, item, scratch):  # spins (the bound counts CPU): "ok" if never stopped
        t = time.monotonic()
        while time.monotonic() - t < 20:
            pass

    import signal

    old = signal.signal(signal.SIGPROF, H._on_alarm)
    try:
        assert H.run_case(random.Random(0), _target(bad), corpus, TESTS, 1.0)[0] == "finding"
        assert H.run_case(random.Random(0), _target(typed), corpus, TESTS, 1.0) == ("typed", "CompressionError")
        outcome, detail = H.run_case(random.Random(0), _target(hang), corpus, TESTS, 0.2)
        assert outcome == "finding" and "time bound" in detail
    finally:
        signal.signal(signal.SIGPROF, old)


def test_harness_memory_bound() -> None:
    script = ("import random\n"
              "from fuzz import harness as H\n"
              "H._limit_memory(256)\n"
              "def big(rng, item, scratch): bytearray(1 << 31)\n"
              "c = H.C.Corpus({'probe': [b'']})\n"
              "print(H.run_case(random.Random(0), H.Target('p', 'probe', big), c, None, 5.0))\n")
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         env={"PYTHONPATH": str(TESTS), "PATH": "/usr/bin:/bin"}, check=True)
    assert "'finding', 'MemoryError" in out.stdout, out
