"""Comparing records for the oracle tests (test harness): our rows (``read_log`` / the data
source) in a Kafka consumer's terms, and what differs between two record sets."""

from __future__ import annotations

from collections import defaultdict

import pyarrow as pa
import pyarrow.compute as pc

from .clients import Consumed


def records_of(table: pa.Table) -> dict[tuple[str, int], list[Consumed]]:
    """Our rows in the consumer's terms (timestamps in ms, -1 for none)."""
    ts = pc.fill_null(pc.divide(pc.cast(table["timestamp"], pa.int64()), 1000), -1)
    out: dict[tuple[str, int], list[Consumed]] = defaultdict(list)
    cols = [table[c].to_pylist() for c in ("topic", "partition", "offset", "key", "value",
                                            "headers", "timestampType")]
    for (topic, part, offset, key, value, headers, ts_type), t in zip(zip(*cols), ts.to_pylist()):
        out[(topic, part)].append(Consumed(offset, key, value,
                                           tuple((h["key"], h["value"]) for h in headers or ()),
                                           t, ts_type))
    for recs in out.values():
        recs.sort(key=lambda r: r.offset)
    return dict(out)


def differences(expected: dict[tuple[str, int], list[Consumed]],
                got: dict[tuple[str, int], list[Consumed]]) -> list[str]:
    """Per partition: the offsets only one side has and the first record that differs."""
    found = []
    for tp in sorted(set(expected) | set(got)):
        want = {r.offset: r for r in expected.get(tp, [])}
        have = {r.offset: r for r in got.get(tp, [])}
        if want == have:
            continue
        missing, extra = sorted(set(want) - set(have)), sorted(set(have) - set(want))
        line = f"{tp[0]}-{tp[1]}: consumer {len(want)} records, ours {len(have)}"
        if missing:
            line += f"; only the consumer has offsets {missing[:10]}{'...' if len(missing) > 10 else ''}"
        if extra:
            line += f"; only we have offsets {extra[:10]}{'...' if len(extra) > 10 else ''}"
        unequal = [o for o in sorted(set(want) & set(have)) if want[o] != have[o]]
        if unequal:
            line += f"; {len(unequal)} differ, first: consumer {want[unequal[0]]} ours {have[unequal[0]]}"
        found.append(line)
    return found


def topic_records(records, topic):
    return {tp: recs for tp, recs in records.items() if tp[0] == topic}
