"""Effective topic configuration (log layer): the log-management settings of a topic and where
each value came from.

Sources, strongest first:

1. ``options`` — values given to the job/command (``retention.ms=...``);
2. a config file — JSON (``{"topic": {"retention.ms": 1000}}`` or a flat ``{"retention.ms":
   1000}`` applying to every topic) or Java ``.properties`` (flat);
3. the KRaft metadata log ``<log dir>/__cluster_metadata-0``: ``ConfigRecord`` s with
   ``resourceType`` 2 (TOPIC); a later record overrides an earlier one, a null value removes the
   override (``ConfigurationControlManager.replay``);
4. the topic-level settings Kafka creates internal topics with (``__consumer_offsets`` and
   ``__transaction_state`` are ``compact``);
5. Kafka's defaults (``LogConfig`` / ``CleanerConfig``, KAFKA_FORMATS §14.3, §15.10).

:data:`CONFIG_TABLE` lists the settings used; every other topic config Kafka knows
(:data:`OTHER_TOPIC_CONFIGS`) is accepted from options and files, its value checked, and not
used; any other name is an error naming the closest valid one.
"""

from __future__ import annotations

import difflib
import json
import os
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..codec.files import naming as N
from ..codec.files.index_rebuild import DEFAULT_INDEX_INTERVAL_BYTES
from ..codec.files.properties import parse_java_properties
from ..errors import InvalidOptionError, KafkaLogError, Location
from ..storage import as_path, storage_for, user_paths

LONG_MAX = 2**63 - 1
TOPIC_RESOURCE_TYPE = 2  # org.apache.kafka.common.config.ConfigResource.Type.TOPIC

# name -> (default, type, description): the one table of defaults
CONFIG_TABLE: dict[str, tuple[Any, type, str]] = {
    "cleanup.policy": ("delete", str, "delete, compact, or both (comma separated)"),
    "retention.ms": (604_800_000, int, "delete segments older than this (-1: never)"),
    "retention.bytes": (-1, int, "delete oldest segments while the log is larger (-1: never)"),
    "delete.retention.ms": (86_400_000, int, "how long compaction keeps tombstones and markers"),
    "min.compaction.lag.ms": (0, int, "records younger than this are not compacted"),
    "max.compaction.lag.ms": (LONG_MAX, int, "compact a log whose dirty data is older than this"),
    "min.cleanable.dirty.ratio": (0.5, float, "compact when dirty/(clean+dirty) exceeds this"),
    "segment.bytes": (1_073_741_824, int, "largest segment; bounds cleaned segment groups"),
    "segment.index.bytes": (10_485_760, int, "largest index file; bounds cleaned segment groups"),
    "file.delete.delay.ms": (60_000, int, "delay before .deleted files are removed"),
    # a broker setting (not a topic one): compaction keeps the last batch of active producers
    "producer.id.expiration.ms": (86_400_000, int,
                                  "a producer idle this long (no open transaction) expires"),
    # tiered storage (KIP-405): the broker owns such a topic's log start and retention, so the
    # maintenance commands refuse its local log (log/tiered_topics.py)
    "remote.storage.enable": (False, bool, "tiered storage: older segments in a remote tier"),
    "index.interval.bytes": (DEFAULT_INDEX_INTERVAL_BYTES, int,
                             "bytes between offset index entries of cleaned segments"),
}
# Kafka 4.1's other topic configs (LogConfig.configNames()) and their types: a topic's configs
# taken from a cluster (kafka-configs --describe, a .properties dump) are accepted as they are
# and their values checked, but not used — they matter to a live broker only (rolling, flushing,
# replication, checks on produce, compression of produced batches, tiered storage's local
# retention); the cleaner recompresses with each batch's codec at its default level
OTHER_TOPIC_CONFIGS: dict[str, type] = {
    "segment.ms": int, "segment.jitter.ms": int, "flush.messages": int, "flush.ms": int,
    "max.message.bytes": int, "unclean.leader.election.enable": bool,
    "min.insync.replicas": int, "compression.type": str, "compression.gzip.level": int,
    "compression.lz4.level": int, "compression.zstd.level": int, "preallocate": bool,
    "message.timestamp.type": str, "message.timestamp.before.max.ms": int,
    "message.timestamp.after.max.ms": int, "leader.replication.throttled.replicas": str,
    "follower.replication.throttled.replicas": str, "local.retention.ms": int,
    "local.retention.bytes": int, "remote.log.copy.disable": bool,
    "remote.log.delete.on.disable": bool, "internal.segment.bytes": int,
}
INTERNAL_TOPIC_CONFIG = {"__consumer_offsets": {"cleanup.policy": "compact"},
                         "__transaction_state": {"cleanup.policy": "compact"}}
POLICIES = ("delete", "compact")

SOURCE_OPTION, SOURCE_FILE, SOURCE_METADATA = "option", "file", "metadata log"
SOURCE_INTERNAL, SOURCE_DEFAULT = "internal topic", "default"


@dataclass(frozen=True)
class TopicConfig:
    """The settings of one topic that retention and compaction use (Kafka's names with ``_``)."""

    topic: str
    cleanup_policy: tuple[str, ...]
    retention_ms: int
    retention_bytes: int
    delete_retention_ms: int
    min_compaction_lag_ms: int
    max_compaction_lag_ms: int
    min_cleanable_dirty_ratio: float
    segment_bytes: int
    segment_index_bytes: int
    file_delete_delay_ms: int
    producer_id_expiration_ms: int
    remote_storage_enable: bool
    index_interval_bytes: int
    sources: dict[str, str] = field(default_factory=dict)  # kafka name -> source

    @property
    def compact(self) -> bool:
        return "compact" in self.cleanup_policy

    @property
    def delete(self) -> bool:
        return "delete" in self.cleanup_policy

    def to_dict(self) -> dict[str, dict[str, Any]]:
        """``{kafka name: {"value": ..., "source": ...}}`` (what ``kafkalog info`` can show)."""
        out = {}
        for name in CONFIG_TABLE:
            value = getattr(self, name.replace(".", "_"))
            out[name] = {"value": ",".join(value) if name == "cleanup.policy" else value,
                         "source": self.sources.get(name, SOURCE_DEFAULT)}
        return out


def _convert(name: str, raw: Any, where: str) -> Any:
    if name in CONFIG_TABLE:
        typ = CONFIG_TABLE[name][1]
    elif name in OTHER_TOPIC_CONFIGS:
        typ = OTHER_TOPIC_CONFIGS[name]
    else:
        known = sorted({*CONFIG_TABLE, *OTHER_TOPIC_CONFIGS})
        close = difflib.get_close_matches(str(name), known, n=1, cutoff=0.6)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise InvalidOptionError(f"unknown topic config {name!r} ({where}){hint}; valid: "
                                 + ", ".join(known))
    try:
        if typ is bool:  # Kafka's ConfigDef BOOLEAN: true or false, any case
            text = str(raw).strip().lower()
            if text not in ("true", "false"):
                raise ValueError(raw)
            return text == "true"
        if name == "cleanup.policy":
            items = raw if isinstance(raw, (list, tuple)) else str(raw).split(",")
            policy = tuple(sorted({str(p).strip().lower() for p in items if str(p).strip()}))
            if not policy or any(p not in POLICIES for p in policy):
                raise ValueError(raw)
            return policy
        if typ is str:
            return str(raw).strip()
        if typ is int:
            if isinstance(raw, bool) or (isinstance(raw, float) and not raw.is_integer()):
                raise ValueError(raw)
            return int(str(raw).strip()) if not isinstance(raw, (int, float)) else int(raw)
        value = float(raw)
        if not 0.0 <= value <= 1.0:
            raise ValueError(raw)
        return value
    except (TypeError, ValueError) as exc:
        kind = "delete and/or compact" if name == "cleanup.policy" else typ.__name__
        raise InvalidOptionError(f"topic config {name}={raw!r} ({where}) is not a valid "
                                 f"{kind}") from exc


def read_config_file(path: str | os.PathLike[str]) -> dict[str | None, dict[str, Any]]:
    """Read a JSON or ``.properties`` topic config file.

    Returns
    -------
    dict
        ``{topic: {name: value}}``; the key ``None`` holds values for every topic.

    Raises
    ------
    InvalidOptionError
        Unreadable file, bad JSON, or a JSON value that is neither settings nor a topic map.
    """
    p = as_path(path)
    try:
        text = storage_for(p).read_text(p, "utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise InvalidOptionError(f"cannot read topic config file {p}: {exc}") from exc
    if p.suffix.lower() == ".json" or text.lstrip().startswith("{"):
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise InvalidOptionError(f"topic config file {p} is not valid JSON: {exc}") from exc
        if not isinstance(data, dict):
            raise InvalidOptionError(f"topic config file {p} must hold a JSON object")
        if all(isinstance(v, dict) for v in data.values()) and data:
            return {str(t): dict(v) for t, v in data.items()}
        return {None: data}
    return {None: dict(parse_java_properties(text, file=str(p)))}


def _replay_config_records(values, offsets, where: str, out: dict[str, dict[str, str]]) -> None:
    from ..codec.internal.internal_topics import decode_metadata_record

    for value, offset in zip(values, offsets):
        if value is None:
            continue
        rec = decode_metadata_record(value, location=Location(where, None, offset))
        data = rec.get("data")
        if rec["type"] != 4 or not data or data["resourceType"] != TOPIC_RESOURCE_TYPE:
            continue
        topic = out.setdefault(data["resourceName"], {})
        if data["value"] is None:
            topic.pop(data["name"], None)
        else:
            topic[data["name"]] = data["value"]


def metadata_topic_configs(log_dirs: str | os.PathLike[str] | list) -> dict[str, dict[str, str]]:
    """Topic configs recorded in the KRaft metadata of the log dirs' ``__cluster_metadata-0``:
    the newest complete snapshot (``<end offset>-<epoch>.checkpoint``), then the log's records
    from the snapshot's end offset on, in order (a null value removes an override).

    Returns an empty dict when no log dir holds KRaft metadata.
    """
    from ..codec.records.decode import decode_to_table
    from ..storage import mapped_file
    from .reader import iter_log

    out: dict[str, dict[str, str]] = {}
    for d in user_paths(log_dirs):
        mdir = d / f"{N.METADATA_TOPIC}-0"
        fs = storage_for(mdir)
        if not fs.is_dir(mdir):
            continue
        snaps = []
        for p in fs.glob(mdir, f"*.{N.CHECKPOINT}"):
            try:
                snaps.append((N.parse_kraft_snapshot_name(p.name).end_offset, p))
            except KafkaLogError:
                continue
        start = 0
        if snaps:
            start, snap = max(snaps)
            with mapped_file(snap) as buf:
                table = decode_to_table(buf, topic=N.METADATA_TOPIC, partition=0, file=str(snap))
            _replay_config_records(table.column("value").to_pylist(),
                                   table.column("offset").to_pylist(), str(snap), out)
        if fs.glob(mdir, f"*.{N.LOG}"):
            for batch in iter_log(mdir, start_offset=start):
                _replay_config_records(batch.column("value").to_pylist(),
                                       batch.column("offset").to_pylist(), str(mdir), out)
    return out


def effective_config(topic: str, *, options: Mapping[str, Any] | None = None,
                     config_file: str | os.PathLike[str] | None = None,
                     log_dirs: str | os.PathLike[str] | list | None = None,
                     metadata: Mapping[str, Mapping[str, str]] | None = None) -> TopicConfig:
    """The effective config of ``topic`` with the source of each value (module docstring).

    Parameters
    ----------
    topic : str
        Topic name.
    options : mapping, optional
        Job/command options (Kafka names), the strongest source.
    config_file : path, optional
        JSON or ``.properties`` file (:func:`read_config_file`).
    log_dirs : path or list, optional
        Log dirs whose ``__cluster_metadata-0`` is read (ignored when ``metadata`` is given).
    metadata : mapping, optional
        Pre-read :func:`metadata_topic_configs` (saves re-reading it per topic).

    Raises
    ------
    InvalidOptionError
        An unknown config name or a bad value (the message names the source).
    """
    values: dict[str, Any] = {name: spec[0] for name, spec in CONFIG_TABLE.items()}
    values["cleanup.policy"] = ("delete",)
    sources = {name: SOURCE_DEFAULT for name in CONFIG_TABLE}
    if metadata is None and log_dirs is not None:
        try:
            metadata = metadata_topic_configs(log_dirs)
        except KafkaLogError as exc:
            raise KafkaLogError(f"cannot read topic configs from the metadata log: {exc}") from exc
    layers: list[tuple[str, Mapping[str, Any]]] = [
        (SOURCE_INTERNAL, INTERNAL_TOPIC_CONFIG.get(topic, {})),
        (SOURCE_METADATA, {k: v for k, v in (metadata or {}).get(topic, {}).items()
                           if k in CONFIG_TABLE}),  # a broker topic has many other configs
    ]
    if config_file is not None:
        by_topic = read_config_file(config_file)
        layers.append((SOURCE_FILE, {**by_topic.get(None, {}), **by_topic.get(topic, {})}))
    layers.append((SOURCE_OPTION, options or {}))
    for source, layer in layers:
        for name, raw in layer.items():
            value = _convert(name, raw, f"{source} for topic {topic}")
            if name in CONFIG_TABLE:  # the others are checked, not used
                values[name] = value
                sources[name] = source
    return TopicConfig(topic=topic, sources=sources,
                       **{name.replace(".", "_"): v for name, v in values.items()})


def configured_partitions(log_dir: Any, *, options: Mapping[str, Any] | None = None,
                          config_file: str | os.PathLike[str] | None = None,
                          topics: Sequence[str] | None = None) -> Iterator[tuple[Any, TopicConfig]]:
    """Each live partition of a discovered log dir that has segments (and is in ``topics``,
    when given), with its topic's effective config; the metadata log is read once."""
    metadata = metadata_topic_configs(log_dir.path)
    configs: dict[str, TopicConfig] = {}
    for part in log_dir.partitions:
        if part.topic is None or part.partition is None or not part.segments:
            continue
        if topics is not None and part.topic not in topics:
            continue
        if part.topic not in configs:
            configs[part.topic] = effective_config(part.topic, options=options,
                                                   config_file=config_file, metadata=metadata)
        yield part, configs[part.topic]
