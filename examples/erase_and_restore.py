"""Forget a customer everywhere, then rebuild a broker's log dir from the lake: the compliance and
disaster-recovery journey.

``.venv/bin/python examples/erase_and_restore.py [WORK_DIR]`` writes an example log dir (an
``orders`` topic, two partitions, keys ``customer-N``, a ``region`` header), migrates it into a
Delta table, then:

1. erases customer 7 by key from the log dir *and* the table in one run, with an audit report
   that names no key (``kafkalog erase LOGS --topic orders --keys forget.txt --table LAKE
   --execute``; without ``--execute``, as every command that changes data in place, it only
   plans);
2. erases every record with the header ``region=eu`` older than a cut-off time, by a SQL
   predicate (``--where``), again from both copies;
3. checks (``--check``) that nothing matching is left anywhere;
4. restores the table into a new log dir (``kafkalog restore LAKE NEW_LOGS``): the same records
   at the same offsets as the erased log dir, verified clean.

See docs/restore-and-erase.md.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import pyarrow as pa
from deltalake import DeltaTable

import kafkalog_spark as kl
from kafkalog_spark.codec.records.schema import HEADERS_TYPE
from kafkalog_spark.compaction.erase_select import Selection
from kafkalog_spark.delta import migrate
from kafkalog_spark.delta.erase import erase_everywhere
from kafkalog_spark.delta.restore import restore

T0 = 1_700_000_000_000  # ms
CUT_OFF = "2023-11-14T23:00:00Z"  # T0 + ~47 minutes
WHERE = (f"array_has(headers, named_struct('key', 'region', 'value', X'6575')) "  # region=eu
         f"AND timestamp < '{CUT_OFF}'")


def orders(n: int) -> pa.Table:
    return pa.table({
        "partition": pa.array([i % 2 for i in range(n)], pa.int32()),
        "key": [f"customer-{i % 20}".encode() for i in range(n)],
        "value": [f'{{"order": {i}}}'.encode() for i in range(n)],
        "timestamp": pa.array([T0 + i * 60_000 for i in range(n)], pa.int64()),
        "headers": pa.array([[{"key": "region", "value": b"eu" if i % 3 else b"us"}]
                             for i in range(n)], HEADERS_TYPE),
    })


def main(argv: list[str] | None = None) -> dict:
    args = sys.argv[1:] if argv is None else argv
    work = Path(args[0]) if args else Path(tempfile.mkdtemp())
    logs, lake = work / "logs", work / "lake"
    kl.write_log(orders(300), logs, topic="orders", codec="lz4", max_batch_records=25)
    migrate(logs, lake)
    print(f"migrated: {DeltaTable(str(lake / 'orders')).to_pyarrow_table().num_rows} rows")

    # erase changes the log dir and the table in place: a plan unless execute_plan (--execute)
    forget = erase_everywhere([logs], "orders", Selection(keys=[b"customer-7"]), [lake],
                              execute_plan=True)
    print(f"customer-7: {forget['records_removed']} records erased from the log dir, "
          f"{forget['tables'][0]['rows_matching']} rows from the table; key set sha256 "
          f"{forget['key_set_sha256'][:16]}...")
    assert b"customer-7" not in repr(forget).encode()  # the audit names no key

    old_eu = erase_everywhere([logs], "orders", Selection(where=WHERE), [lake],
                              execute_plan=True)
    print(f"region=eu before {CUT_OFF}: {old_eu['records_removed']} records erased, "
          f"{old_eu['tables'][0]['rows_matching']} rows")

    left = [erase_everywhere([logs], "orders", sel, [lake])  # the plan: what is left
            for sel in (Selection(keys=[b"customer-7"]), Selection(where=WHERE))]
    print(f"--check: {[r['records_removed'] for r in left]} records, "
          f"{[r['tables'][0]['rows_matching'] for r in left]} rows left")

    back = work / "restored"
    restored = restore(lake, back)
    same = kl.read_log(back, include_headers=True).equals(kl.read_log(logs, include_headers=True))
    ok = kl.verify(back).ok
    print(f"restored {sum(p['records'] for p in restored['partitions'])} records into {back}: "
          f"same records and offsets as the erased log dir: {same}; verifies clean: {ok}")
    assert same and ok and not any(r["records_removed"] for r in left)
    assert forget["records_removed"] == forget["tables"][0]["rows_matching"]
    return {"customer": forget["records_removed"], "where": old_eu["records_removed"],
            "restored": sum(p["records"] for p in restored["partitions"])}


if __name__ == "__main__":
    print(main())
