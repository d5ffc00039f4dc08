"""Verify and recover: find damage in a stopped broker's log dir, then repair it losing nothing.

``.venv/bin/python examples/verify_and_recover.py [WORK_DIR]`` writes an example log dir, damages
it the way a crash does (a half-written batch at the end of the active segment), then walks the operator's journey:

1. ``verify``: every problem, located by file, byte position and base offset;
2. ``recover`` as a dry run: the plan;
3. ``recover`` executed: the torn bytes go to a quarantine with a SHA-256 manifest; what a
   broker's load would rebuild is rebuilt as it does (here the active segment's indexes and a
   producer snapshot at its base);
4. ``verify`` again, and ``read_log``: every complete record is still there.

The same from the command line: ``kafkalog verify DIR``, ``kafkalog recover DIR [--execute]``.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import pyarrow as pa

import kafkalog_spark as kl
from kafkalog_spark.recovery.quarantine import read_manifests
from kafkalog_spark.recovery.recover import recover


def damaged_log_dir(root: Path) -> tuple[Path, int]:
    """A log dir whose active segment ends in a torn batch; returns it and the record count
    written before the damage."""
    n = 2000
    table = pa.table({"key": [f"k{i % 40}".encode() for i in range(n)],
                      "value": [f"payment {i}".encode() for i in range(n)]})
    kl.write_log(table, root, topic="payments", partition=0, codec="lz4",
                 segment_bytes=16 * 1024, max_batch_records=50)
    active = sorted((root / "payments-0").glob("*.log"))[-1]
    data = active.read_bytes()
    with active.open("ab") as f:  # a crash mid-append: the first 40 bytes of a copied batch
        f.write(data[:40])
    return root, n


def main(argv: list[str] | None = None) -> dict:
    args = sys.argv[1:] if argv is None else argv
    work = Path(args[0]) if args else Path(tempfile.mkdtemp())
    log_dir, written = damaged_log_dir(work / "logs")

    report = kl.verify(log_dir)
    print(f"verify: ok={report.ok}")
    for p in report.errors():
        print(f"  {p.severity} {p.check} {p.file} @ {p.position} (base offset {p.base_offset}): "
              f"{p.message}")
    assert not report.ok

    plan = recover(log_dir)  # dry run
    print(f"recover plan: {len(plan.actions)} actions")
    for a in plan.actions:
        print(f"  {a.describe()}")
    assert plan.changed and not plan.executed

    done = recover(log_dir, execute_plan=True, quarantine_dir=work / "quarantine")
    print(f"recovered: {len(done.actions)} actions; quarantine {done.quarantine_runs}")
    manifests = read_manifests(work / "quarantine")
    print(f"quarantine manifests: {len(manifests)}")

    after = kl.verify(log_dir, deep=True)
    records = kl.read_log(log_dir).num_rows
    print(f"verify after recovery: ok={after.ok}; records readable: {records} of {written}")
    assert after.ok and records == written
    again = recover(log_dir)
    assert not again.changed  # nothing left to do
    return {"problems": len(report.errors()), "actions": len(done.actions), "records": records,
            "manifests": len(manifests)}


if __name__ == "__main__":
    print(main())
