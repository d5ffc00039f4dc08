"""Fuzzing long run: the CI fuzz harness (tests/fuzz) for as many cases as you like.

Same cases as ``tests/test_fuzz.py`` runs, numbered ``0..N-1`` under one seed, so a finding is
replayed with ``--only <case> --seed S``. Prints cases and outcomes per target, then every
finding; exits 1 when there is one.

    .venv/bin/python benchmarks/fuzz_long.py --cases 1000000 --seed 7          # the long run
    .venv/bin/python benchmarks/fuzz_long.py --cases 200000 --seed 7 --expensive-every 10
    .venv/bin/python benchmarks/fuzz_long.py --only 8979 --seed 2 --expensive-every 20
    NUMBA_DISABLE_JIT=1 .venv/bin/python benchmarks/fuzz_long.py --cases 100000 --seed 7

All options: ``--help`` (time bound per case, memory bound per worker, workers, fixtures).
"""

from __future__ import annotations

import sys
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1] / "tests"

if __name__ == "__main__":
    sys.path.insert(0, str(TESTS))  # the harness puts tests/ on its workers' path itself
    from fuzz.harness import main

    sys.exit(main())
