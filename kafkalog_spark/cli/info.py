"""``kafkalog info`` (entry-point layer): what a set of log dirs holds, read-only.

Topics, partitions, segments, offset and time ranges, sizes, magics, codecs, special dirs,
crash leftovers, the lock status and each topic's effective log-management config with the
source of every value (:func:`kafkalog_spark.log.topic_config.effective_config`: options, config
file, KRaft metadata log, internal-topic settings, Kafka defaults), as a table or as JSON.
Builds on
:func:`kafkalog_spark.log.discovery.discover` and :func:`~kafkalog_spark.log.segment_info.describe_segment`;
it opens files only for reading and never changes a byte or a modification time. A path with
no Kafka data (an empty folder, a stray file named like a segment) is an error saying so, exit
code 2 (:func:`~kafkalog_spark.log.selection.require_kafka_data`).
"""

from __future__ import annotations

import json
from dataclasses import asdict
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import click

from ..errors import KafkaLogError
from ..log.discovery import discover
from ..log.history import found_with_remote_tier
from ..log.model import LogDir, LogDirs, PartitionDir, Segment
from ..log.partition_state import checkpointed_log_starts
from ..log.segment_info import describe_segment
from ..log.selection import require_kafka_data
from ..log.topic_config import SOURCE_DEFAULT, effective_config, metadata_topic_configs
from ..report import parse_config_options
from ..storage import user_paths
from ..tiered.tier import as_remote_tier
from .options import PathOrURI, config_options, remote_tier_options, storage_option


def segment_report(seg: Segment, shallow: bool) -> dict[str, Any]:
    """One segment as a JSON-ready dict (``shallow``: from ``stat`` only, no ``.log`` read)."""
    out: dict[str, Any] = {
        "base_offset": seg.base_offset, "log": str(seg.log), "size": seg.log_size,
        "mtime": seg.mtime, "index_size": seg.index_size, "timeindex_size": seg.timeindex_size,
        "txnindex_size": seg.txnindex_size, "remote_id": seg.remote_id,
        "last_offset_read": seg.last_offset,
    }
    if shallow:
        return out
    info = describe_segment(seg)
    out.update(
        batches=info.batches, first_offset=info.first_offset, last_offset=info.last_offset,
        next_offset=info.next_offset, records=info.records, min_timestamp=info.min_timestamp,
        max_timestamp=info.max_timestamp, magics=list(info.magics), codecs=list(info.codecs),
        transactional_batches=info.transactional_batches,
        control_batches=info.control_batches, valid_bytes=info.valid_bytes,
        clean=info.clean, stop_reason=info.stop_reason, zero_tail=info.zero_tail,
    )
    return out


def partition_report(part: PartitionDir, shallow: bool, segments: bool = True,
                     log_start: int | None = None) -> dict[str, Any]:
    """One partition dir, its segments (``None`` unless ``segments``: the text report needs only
    the totals, and a log dir of 40k segments held ~1.5 KB per segment's dict) and the totals
    over them. ``start_offset`` is the log start offset a consumer sees (Kafka's loader: the
    larger of the checkpointed ``log_start`` and the first segment's base,
    ``first_base_offset``)."""
    segs = [segment_report(s, shallow) for s in part.segments]
    first = segs[0]["base_offset"] if segs else None
    out: dict[str, Any] = {
        "name": part.name, "topic": part.topic, "partition": part.partition, "kind": part.kind,
        "uuid": part.uuid, "path": str(part.path), "size": part.size,
        "segments": segs if segments else None, "segment_count": len(segs),
        "start_offset": first if first is None or log_start is None else max(first, log_start),
        "first_base_offset": first,
        "leftovers": _names(part.leftovers), "orphan_indexes": _names(part.orphan_indexes),
        "snapshots": _names(part.snapshots), "kraft_snapshots": _names(part.kraft_snapshots),
        "unknown": _names(part.unknown), "partition_metadata": part.partition_metadata,
        "leader_epoch_checkpoint": part.leader_epoch_checkpoint,
        "remote": None if part.remote is None else asdict(part.remote),
        "log_start_offset": log_start,  # log-start-offset-checkpoint's entry, if any
    }
    if not shallow:
        counts = [s["records"] for s in segs]
        out["next_offset"] = segs[-1]["next_offset"] if segs else None
        out["records"] = None if None in counts else sum(counts)
        out["min_timestamp"] = _extreme(min, [s["min_timestamp"] for s in segs])
        out["max_timestamp"] = _extreme(max, [s["max_timestamp"] for s in segs])
        out["magics"] = sorted({m for s in segs for m in s["magics"]})
        out["codecs"] = sorted({c for s in segs for c in s["codecs"]})
        out["unclean_segments"] = [s["base_offset"] for s in segs if not s["clean"]]
    return out


def topic_configs(parts: list[PartitionDir], metadata_dir: Path | None,
                  options: dict[str, Any] | None, config_file: str | None) -> dict[str, Any]:
    """``{"topics": {topic: {name: {"value", "source"}}}, "error": str | None}`` for the topics of
    ``parts``; the KRaft metadata log is read from ``metadata_dir`` (a log dir) when given. A
    metadata log that cannot be read is reported in ``error`` and left out, not fatal."""
    metadata, error = {}, None
    if metadata_dir is not None:
        try:
            metadata = metadata_topic_configs(metadata_dir)
        except KafkaLogError as exc:
            error = f"cannot read topic configs from the metadata log: {exc}"
    topics = sorted({p.topic for p in parts if p.topic is not None})
    return {"topics": {t: effective_config(t, options=options, config_file=config_file,
                                           metadata=metadata).to_dict() for t in topics},
            "error": error}


def log_dir_report(d: LogDir, shallow: bool, options: dict[str, Any] | None = None,
                   config_file: str | None = None, segments: bool = True) -> dict[str, Any]:
    """One log dir: its files, lock status, partition dirs and its topics' effective configs."""
    starts = checkpointed_log_starts(d.partitions)
    return {
        "path": str(d.path), "meta_properties": d.meta_properties,
        "meta_properties_error": d.meta_properties_error,
        "lock": {"file": d.lock_file, "held_by_pid": d.lock_holder},
        "clean_shutdown_marker": d.clean_shutdown, "checkpoints": list(d.checkpoints),
        "partitions": [partition_report(p, shallow, segments, starts.get(p.path))
                       for p in d.partitions],
        "special": [partition_report(p, shallow, segments) for p in d.special],
        "metadata_log": (partition_report(d.metadata_log, shallow, segments)
                         if d.metadata_log is not None else None),
        "skipped": _names(d.skipped), "leftovers": _names(d.leftovers),
        "unknown": _names(d.unknown),
        # shallow reads no .log, and the metadata log is a log: no config section then
        "topic_configs": (None if shallow else
                          topic_configs(list(d.partitions), d.path, options, config_file)),
    }


def report(found: LogDirs, shallow: bool = False, *, options: dict[str, Any] | None = None,
           config_file: str | None = None, segments: bool = True) -> dict[str, Any]:
    """Everything :func:`discover` found as one JSON-ready dict.

    Parameters
    ----------
    found : LogDirs
        The result of :func:`~kafkalog_spark.log.discovery.discover`.
    shallow : bool
        Skip reading ``.log`` headers (offset/time ranges and topic configs then absent: the
        KRaft metadata log is a log too).
    segments : bool
        Keep every segment's dict under its partition (else only the partition totals).
    options, config_file : optional
        Topic config overrides, as for ``kafkalog compact``/``retain``; each topic's effective
        config is reported with the source of every value.
    """
    parents = {p.path.parent for p in found.partitions}
    return {
        "log_dirs": [log_dir_report(d, shallow, options, config_file, segments)
                     for d in found.log_dirs],
        "partitions": [partition_report(p, shallow, segments) for p in found.partitions],
        # partition dirs given directly: their parent may hold the metadata log
        "topic_configs": (None if shallow else
                          topic_configs(list(found.partitions),
                                        parents.pop() if len(parents) == 1 else None,
                                        options, config_file)),
        "duplicates": [
            {"topic": d.topic, "partition": d.partition, "paths": [str(p) for p in d.paths],
             "kinds": list(d.kinds), "replica_move": d.is_move}
            for d in found.duplicates
        ],
    }


# --- human output ----------------------------------------------------------------------------

_COLUMNS = ("PARTITION", "SEGS", "OFFSETS", "RECORDS", "SIZE", "TIME RANGE (UTC)", "MAGIC",
            "CODECS", "NOTES")


def render(rep: dict[str, Any]) -> str:
    """The report as text: a header per log dir, one table row per partition dir."""
    lines: list[str] = []
    for d in rep["log_dirs"]:
        lock = d["lock"]
        if lock["held_by_pid"] is not None:
            lock_text = f"LOCKED by pid {lock['held_by_pid']}"
        else:
            lock_text = "not locked" + ("" if lock["file"] else " (no .lock file)")
        meta = d["meta_properties"]
        lines.append(f"log dir {d['path']}")
        lines.append(f"  lock: {lock_text}; clean shutdown marker: "
                     f"{'yes' if d['clean_shutdown_marker'] else 'no'}; "
                     f"checkpoints: {len(d['checkpoints'])}/4")
        if meta:
            lines.append("  meta.properties: " + ", ".join(f"{k}={v}" for k, v in meta.items()))
        if d["meta_properties_error"]:
            lines.append(f"  meta.properties UNREADABLE: {d['meta_properties_error']}")
        parts = d["partitions"] + d["special"]
        if d["metadata_log"] is not None:
            parts.append(d["metadata_log"])
        lines.extend("  " + row for row in _table(parts))
        lines.extend("  " + row for row in _remote_lines(parts))
        for label in ("skipped", "leftovers", "unknown"):
            if d[label]:
                lines.append(f"  {label}: {', '.join(d[label])}")
        lines.extend("  " + row for row in _config_lines(d["topic_configs"]))
        lines.append("")
    if rep["partitions"]:
        lines.append("partition dirs")
        lines.extend("  " + row for row in _table(rep["partitions"]))
        lines.extend("  " + row for row in _remote_lines(rep["partitions"]))
        lines.extend("  " + row for row in _config_lines(rep["topic_configs"]))
        lines.append("")
    for dup in rep["duplicates"]:
        what = "replica move in progress" if dup["replica_move"] else "CONFLICT"
        lines.append(f"{dup['topic']}-{dup['partition']} is in {len(dup['paths'])} places "
                     f"({what}): {', '.join(dup['paths'])}")
    return "\n".join(lines).rstrip() + "\n"


def _remote_lines(parts: list[dict[str, Any]]) -> list[str]:
    """Per partition with a remote tier: where its remote segments came from and every remote
    segment not read, read from the local log instead, cut, overlapping or missing."""
    lines = []
    for p in parts:
        r = p.get("remote")
        if r is None or not (r["remote_segments"] or r["not_read"] or r["gaps"]):
            continue
        lines.append(f"{p['name']}: {r['remote_segments']} remote segment(s) from {r['tier']}, "
                     f"listed by {r['source']} (topic id {r['topic_id']})")
        for label, key in (("not read", "not_read"), ("read from the local log instead",
                                                      "held_locally"),
                           ("overlap", "overlaps"), ("CONFLICT", "conflicts")):
            lines += [f"  {label}: {line}" for line in r[key]]
        lines += [f"  GAP: offsets {a}..{b} are in no segment" for a, b in r["gaps"]]
    return lines


def _config_lines(configs: dict[str, Any] | None) -> list[str]:
    """Each topic's values that are not Kafka's defaults, with their sources."""
    if configs is None or (not configs["topics"] and not configs["error"]):
        return []
    lines = ["topic config (values other than Kafka's defaults, with their source; "
             "--json lists every value):"]
    if configs["error"]:
        lines.append(f"  {configs['error']}")
    for topic, values in configs["topics"].items():
        changed = [f"{name}={v['value']} ({v['source']})" for name, v in values.items()
                   if v["source"] != SOURCE_DEFAULT]
        lines.append(f"  {topic}: {', '.join(changed) if changed else 'all defaults'}")
    return lines


def _table(parts: list[dict[str, Any]]) -> list[str]:
    rows = [_COLUMNS] + [_row(p) for p in parts]
    if len(rows) == 1:
        return ["(no partition dirs)"]
    widths = [max(len(r[i]) for r in rows) for i in range(len(_COLUMNS))]
    return ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows]


def _row(p: dict[str, Any]) -> tuple[str, ...]:
    name = p["name"] + (f" [{p['kind']}]" if p["kind"] else "")
    offsets = records = times = magics = codecs = "-"
    if "next_offset" in p and p["segment_count"]:
        offsets = f"{p['start_offset']}..{p['next_offset'] - 1}"
        if p["next_offset"] <= p["start_offset"]:
            offsets = f"empty @{p['start_offset']}"
        records = "?" if p["records"] is None else str(p["records"])
        if p["min_timestamp"] is not None or p["max_timestamp"] is not None:
            times = f"{_ts(p['min_timestamp'])} .. {_ts(p['max_timestamp'])}"
        magics = ",".join(f"v{m}" for m in p["magics"]) or "-"
        codecs = ",".join(p["codecs"]) or "-"
    notes = []
    for key in ("leftovers", "orphan_indexes", "unknown", "kraft_snapshots"):
        if p[key]:
            notes.append(f"{len(p[key])} {key.replace('_', ' ')}")
    if p.get("unclean_segments"):
        notes.append("unclean tail in segment " + ",".join(map(str, p["unclean_segments"])))
    remote = p.get("remote")
    if remote is not None and remote["remote_segments"]:
        notes.append(f"{remote['remote_segments']} remote")
    if remote is not None:
        notes += [f"GAP {a}..{b}" for a, b in remote["gaps"]]
        notes += ["REMOTE OVERLAP"] if remote["conflicts"] else []
    start, log_start = p["first_base_offset"], p.get("log_start_offset")
    if remote is None and log_start is not None and start is not None and log_start < start:
        notes.append(f"offsets {log_start}..{start - 1} not here (tiered storage? "
                     "--remote-tier)")
    return (name, str(p["segment_count"]), offsets, records, _size(p["size"]), times, magics,
            codecs, "; ".join(notes))


def _ts(ms: int | None) -> str:
    if ms is None:
        return "?"
    try:
        return datetime.fromtimestamp(ms / 1000, tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    except (OverflowError, OSError, ValueError):
        return str(ms)  # a timestamp outside the calendar range is shown raw


def _size(n: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    raise AssertionError("unreachable")


def _names(paths: tuple[Path, ...]) -> list[str]:
    return [p.name for p in paths]


def _extreme(fn: Any, values: list[int | None]) -> int | None:
    known = [v for v in values if v is not None]
    return fn(known) if known else None


@click.command("info")
@click.argument("paths", nargs=-1, required=True, type=PathOrURI())
@click.option("--json", "as_json", is_flag=True, help="Machine-readable JSON output.")
@click.option("--shallow", is_flag=True,
              help="Only list directories and stat files; do not read .log headers.")
@config_options("retention.ms=86400000")
@storage_option
@remote_tier_options
def command(paths: tuple[str, ...], as_json: bool, shallow: bool, configs: tuple[str, ...],
            config_file: str | None, storage_options: dict[str, str] | None,
            remote_tier: str | None, remote_tier_layout: str | None,
            remote_tier_private_key: tuple[str, ...]) -> None:
    """Summarise Kafka log dirs, partition dirs or .log files (read-only).

    Shows topics, partitions, segments, offset and time ranges, sizes, record formats (magic),
    codecs, special dirs (-delete/-future/-stray), crash leftovers, whether a broker holds
    the log dir's lock, and each topic's effective config (cleanup.policy, retention, compaction
    settings) with where each value came from: --config, --config-file, the KRaft metadata
    log, internal-topic settings, or Kafka's defaults — what `kafkalog compact` and
    `kafkalog retain` would use with the same options. With --remote-tier each partition's
    remote segments are listed first, with those left out and why.
    """
    tier = as_remote_tier(remote_tier, remote_tier_layout, storage_options,
                          remote_tier_private_key)
    found = discover(user_paths(paths, storage_options))
    require_kafka_data(found)  # says "no Kafka data here", naming what the path holds
    found = found_with_remote_tier(found, tier)
    rep = report(found, shallow=shallow, options=parse_config_options(configs),
                 config_file=config_file, segments=as_json)
    if as_json:
        click.echo(json.dumps(rep, indent=2))
    else:
        click.echo(render(rep), nl=False)
