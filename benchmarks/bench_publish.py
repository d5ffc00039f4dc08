"""Publishing an append as Spark's commit worker does (benchmarks, issue 33): stage PARTITIONS x
TASKS outputs of MB each in this process (lz4), then publish them in a fresh Python process —
the offsets shifted to follow each partition's earlier outputs — and print the publish's wall
and CPU time and the shift's share.

Run it from each checkout to compare (its code is imported from the working directory):

    cd TREE && PYTHONPATH=$PWD .venv/bin/python benchmarks/bench_publish.py --root /tmp/w/cb
"""

from __future__ import annotations

import argparse
import os
import pickle
import shutil
import subprocess
import sys
import time
from pathlib import Path


def stage(root: Path, partitions: int, tasks: int, mb: float) -> None:
    import numpy as np
    import pyarrow as pa

    from kafkalog_spark.log.staging import PartitionStager, WriteSettings, create_staging_dir

    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    rng = np.random.default_rng(1)
    values = [rng.integers(0, 16, 200, dtype=np.uint8).tobytes() for _ in range(256)]
    n = int(mb * 2**20 / 200)
    table = pa.table({"value": pa.array([values[i % 256] for i in range(n)], pa.binary())})
    settings = WriteSettings(codec="lz4")
    staging = create_staging_dir(root / "log")
    staged = []
    for p in range(partitions):
        for t in range(tasks):
            stager = PartitionStager(staging / f"task-{t}" / f"t-{p}", "t", p, order=t,
                                     settings=settings, staging=staging)
            stager.add(table)
            staged.append(stager.finish())
    (root / "staged.pkl").write_bytes(pickle.dumps((staged, staging)))


def publish_timed(root: Path) -> str:
    import importlib

    importlib.import_module("kafkalog_spark.datasource.writer")  # what unpickling the writer imports
    from kafkalog_spark.log import publish as P

    # the shift: one pass over the staged segments (this tree) or a call per segment (older)
    name = "_shift_staged" if hasattr(P, "_shift_staged") else "shift_base_offsets"
    inner, spent = getattr(P, name), [0.0]

    def timed(*args, **kwargs):
        start = time.perf_counter()
        try:
            return inner(*args, **kwargs)
        finally:
            spent[0] += time.perf_counter() - start

    setattr(P, name, timed)
    staged, staging = pickle.loads((root / "staged.pkl").read_bytes())
    wall, cpu = time.perf_counter(), time.process_time()
    P.publish(root / "log", staged, mode="append", leader_epoch=0, staging=staging)
    return (f"shift {spent[0]:.3f} s, publish {time.perf_counter() - wall:.3f} s wall "
            f"{time.process_time() - cpu:.3f} s CPU, {sum(len(s.segments) for s in staged)} "
            f"segments, load {os.getloadavg()[0]:.1f}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--root", type=Path, required=True, help="work folder (emptied first)")
    ap.add_argument("--partitions", type=int, default=64)
    ap.add_argument("--tasks", type=int, default=5, help="staged outputs per partition")
    ap.add_argument("--mb", type=float, default=1.0, help="MiB of values per output")
    ap.add_argument("--publish-only", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.publish_only:
        print(publish_timed(args.root))
        return
    stage(args.root, args.partitions, args.tasks, args.mb)
    subprocess.run([sys.executable, __file__, "--root", str(args.root), "--publish-only"],
                   check=True)


if __name__ == "__main__":
    main()
