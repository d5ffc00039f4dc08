"""Report rendering and option parsing shared by the CLI and the spark-submit jobs (report layer).

``kafkalog verify``/``recover``/``compact``/``retain`` and ``jobs/recover.py``,
``jobs/compact.py``, ``jobs/retain.py`` print the same text reports and parse ``--config
NAME=VALUE`` the same way: one definition here, so the two entry points cannot drift apart.
Nothing here depends on click (the click option bundles stay in
:mod:`kafkalog_spark.cli.options`); the result types are imported for annotations only, so
importing this module loads none of the maintenance jobs.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import TYPE_CHECKING

from .errors import InvalidOptionError, KafkaLogError

if TYPE_CHECKING:  # annotations only: a command module loads the job it runs itself
    from .compaction.compact import CompactionResult
    from .inspect.verify import VerifyReport
    from .recovery.recover import RecoveryReport
    from .retention.retain import RetentionResult


# --- entry points ----------------------------------------------------------------------------

def run_job(main: Callable[[], int]) -> int:
    """Run a spark-submit entry point as the CLI runs a command: a library error (bad input, a
    locked log dir, a path executors cannot reach) prints one line ``Error: ...`` on stderr and
    exits with code 2; anything else keeps its traceback."""
    try:
        return main()
    except KafkaLogError as exc:
        print(f"Error: {exc}", file=sys.stderr)
        return 2


# --- options ---------------------------------------------------------------------------------

def parse_config_options(items: tuple[str, ...]) -> dict[str, str]:
    """``name=value`` pairs given with ``--config`` as a dict."""
    out = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep or not name.strip():
            raise InvalidOptionError(f"--config takes name=value, got {item!r}")
        out[name.strip()] = value.strip()
    return out


# --- text reports ----------------------------------------------------------------------------

def render_verify(report: VerifyReport) -> str:
    """The report as a human-readable table, one line per problem."""
    lines = [f"checked {report.partitions} partitions, {report.segments} segments, "
             f"{report.batches} batches, {report.bytes:,} bytes"
             + (f", {report.records} records" if report.records is not None else "")]
    if not report.problems:
        lines.append("OK: no problems found")
        return "\n".join(lines)
    header = ("SEVERITY", "CHECK", "FILE", "POSITION", "BASE OFFSET", "PROBLEM")
    rows = [(p.severity, p.check, p.file or "-", "-" if p.position is None else str(p.position),
             "-" if p.base_offset is None else str(p.base_offset), p.message)
            for p in report.problems]
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(5)]
    for row in [header, *rows]:
        lines.append("  ".join(c.ljust(w) for c, w in zip(row, widths)) + "  " + row[5])
    errors = len(report.errors())
    lines.append(f"{'FAILED' if errors else 'OK'}: {errors} errors, "
                 f"{len(report.problems) - errors} warnings")
    return "\n".join(lines)


def render_recovery(report: RecoveryReport) -> str:
    """The plan (or what was done) as text, one line per action."""
    verb = "did" if report.executed else "would do"
    lines = []
    for p in report.partitions:
        head = f"{p.name}: log end offset {p.log_end}"
        if p.cut:
            head += f", cut at {p.cut['file']} byte {p.cut['position']} ({p.cut['reason']})"
        if p.actions or p.left:
            lines.append(head)
            lines.extend(f"  {a.describe()}" for a in p.actions)
            lines.extend(f"  left: {why}" for why in p.left)
        for d in p.damage:
            before, after = d["last_offset_before"], d["first_offset_after"]
            lines.append(f"  damaged bytes [{d['start']}, {d['end']}) of {d['file']}: "
                         f"{d['reason']}; "
                         + ("at the start of the partition" if before is None
                            else f"offset gap after {before}") + ", "
                         + ("nothing valid follows in this segment" if after is None
                            else f"resuming at {after}"))
        if p.salvage_would_keep:
            k = p.salvage_would_keep
            lines.append(f"  --salvage would keep {k['entries']} valid entries ({k['bytes']} "
                         f"bytes) around {k['damaged_ranges']} damaged range(s)")
    lines.extend(a.describe() for a in report.log_dir_actions)
    lines.extend(f"note: {n}" for n in report.notes)
    for run in report.quarantine_runs:
        lines.append(f"quarantine: {run}")
    n = len(report.actions)
    lines.append(f"{'nothing to do' if not n else f'{verb} {n} actions'} "
                 f"({len(report.partitions)} partitions checked)"
                 + ("" if report.executed or not n else "; run again with --execute"))
    return "\n".join(lines)


def render_reconcile(report) -> str:
    """A :class:`~kafkalog_spark.recovery.reconcile.ReconcileReport` as text: per partition the
    reference replica, then each replica's divergence point and what was kept or set aside."""
    lines = []
    for p in report.partitions:
        lines.append(f"{p['topic']}-{p['partition']}: offsets [{p['log_start_offset']}, "
                     f"{p['log_end_offset']}) from reference {p['reference']}")
        for r in p["replicas"]:
            head = f"  {r['path']}: latest epoch {r['latest_epoch']}, log end {r['log_end_offset']}"
            if r["divergence_offset"] is not None and r["divergence_offset"] < r["log_end_offset"]:
                head += f", diverges at {r['divergence_offset']} ({r['divergence_reason']})"
            elif r["divergence_offset"] is not None:
                head += f", consistent with the reference ({r['divergence_reason']})"
            lines.append(head)
            lines.append(f"    kept {r['batches_kept']} batches ({r['bytes_kept']} bytes)"
                         + (f", {r['damaged_ranges']} damaged range(s) skipped"
                            if r["damaged_ranges"] else "")
                         + (f"; divergent {r['batches_divergent']} batches ({r['bytes_divergent']}"
                            f" bytes) at offsets {r['divergent_offsets']} -> quarantine"
                            if r["batches_divergent"] else ""))
    lines.extend(f"note: {n}" for n in report.notes)
    lines.extend(f"quarantine: {run}" for run in report.quarantine_runs)
    lines.append(f"{'wrote' if report.executed else 'would write'} {len(report.partitions)} "
                 f"partitions into {report.dest}"
                 + ("" if report.executed else "; run again with --execute"))
    return "\n".join(lines)


def render_compaction(result: CompactionResult) -> str:
    """The plan (or what was done) as text, one block per partition."""
    verb = "cleaned" if result.executed else "would clean"
    lines = []
    for p in result.plans:
        d = p.to_dict()
        end = d["end_offset"]
        cut = "" if end == d["first_uncleanable_offset"] else (
            f" up to {end} (the key map was full; the next pass goes on from there)")
        lines.append(f"{d['partition']}: {verb} offsets [{d['first_dirty_offset']}, "
                     f"{d['first_uncleanable_offset']}) dirty, {d['reason']}{cut}")
        lines.append(f"  segment groups (base offsets): {d['groups']}")
    for s in result.skipped:
        lines.append(f"{s.topic}-{s.partition}: skipped: {s.reason}")
    m = result.metrics
    counts = "" if not result.executed else (
        f", records {m['records_read']} -> {m['records_kept']}, bytes {m['bytes_read']} -> "
        f"{m['bytes_written']}")
    passes = "" if m["passes"] == m["partitions_cleaned"] else f" in {m['passes']} passes"
    lines.append(f"{verb} {m['partitions_cleaned']} partitions{passes} "
                 f"({m['partitions_skipped']} skipped, now={m['now_ms']}){counts}"
                 + ("" if result.executed or not result.plans else "; run again with --execute"))
    return "\n".join(lines)


def render_retention(result: RetentionResult) -> str:
    """The plan (or what was done) as text, one line per deleted segment."""
    verb = "deleted" if result.executed else "would delete"
    lines = []
    for p in result.plans:
        for note in p.notes:
            lines.append(f"{p.topic}-{p.partition}: note: {note}")
        if p.deletions:
            lines.append(f"{p.topic}-{p.partition}: log start offset {p.log_start_offset} -> "
                         f"{p.new_log_start_offset}")
            if p.rolled_at is not None:
                lines.append(f"  {'rolled' if result.executed else 'would roll'} an empty "
                             f"segment at the log end offset {p.rolled_at} (every segment goes)")
            lines.extend(f"  {verb} segment {d.base_offset} ({d.size} bytes): {d.reason}"
                         for d in p.deletions)
    m = result.metrics
    lines.append(f"{verb} {m['segments_deleted']} segments, {m['bytes_deleted']} bytes "
                 f"({m['partitions_checked']} partitions checked, now={m['now_ms']})"
                 + ("" if result.executed or not m["segments_deleted"]
                    else "; run again with --execute"))
    return "\n".join(lines)


def anything_left(report: dict) -> bool:
    """Whether an erase report that did not execute (a plan, a ``--check``) counts any
    matching record or row: what a run with ``--execute`` would erase."""
    return bool(report["records_removed"]
                or any(t["rows_matching"] for t in report.get("tables", [])))


def render_erase(report: dict, check: bool = False) -> str:
    """The audit report as text: per partition, per table, then the key set's totals."""
    state = "left" if check else "erased" if report["executed"] else "to erase"
    rows = "left" if check else "deleted" if report["executed"] else "to delete"
    lines = [f"{p['partition']}: {p['records_removed']:,} records {state} in "
             f"{len(p['segments_rewritten'])} of {p['segments_scanned']} segments"
             + (f", offsets {p['offset_ranges']}" if p["offset_ranges"] else "")
             for p in report["partitions"]]
    for t in report.get("tables", []):
        lines.append(f"{t['table']}: {t['rows_matching']:,} rows {rows}"
                     + (f" (version {t['version']})" if "version" in t else ""))
        if "vacuum" in t:
            lines.append(f"  note: {t['vacuum']}")
    named = (f"key set {report['keys']:,} keys, sha256 {report['key_set_sha256']}"
             if "keys" in report else f"predicate sha256 {report['predicate_sha256']}")
    lines.append(f"{report['topic']}: {report['records_removed']:,} records {state}; {named}"
                 + ("; run again with --execute" if not (check or report["executed"])
                    and anything_left(report) else ""))
    return "\n".join(lines)
