"""Read options of the ``kafkalog`` data source (Spark layer): one table, strict parsing.

Names follow Spark's Kafka source where the meaning is the same (``subscribe``,
``startingOffsets``, ``kafka.isolation.level``, ...). Spark hands options over
case-insensitively (keys lower-cased), so matching here ignores case. Every option is parsed
once into the frozen :class:`ReadOptions`; an unknown name or a bad value raises
:class:`~kafkalog_spark.errors.InvalidOptionError` naming the valid choices. :data:`READ_OPTIONS`
is the single source of names, defaults and documentation (:func:`options_doc` renders it).
"""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..errors import InvalidOptionError
from ..storage import as_path, storage_for
from ..storage.options import normalize_options
from ..storage.paths import ObjectPath, is_remote
from ..tiered.tier import RemoteTier, as_remote_tier

EARLIEST, LATEST = -2, -1  # Spark's JSON sentinels in startingOffsets / endingOffsets
ISOLATION_LEVELS = ("read_uncommitted", "read_committed")
CORRUPTION_POLICIES = ("fail", "skip")
TIMESTAMP_STRATEGIES = ("error", "latest")
DEFAULT_MAX_BYTES_PER_PARTITION = 128 * 1024 * 1024  # like spark.sql.files.maxPartitionBytes
DEFAULT_MAX_ROWS_PER_BATCH = 65536
STORAGE_PREFIX = "storage."  # .option("storage.endpoint", ...): see log.object_options
DEFAULT_MIN_PARTITIONS = 16  # fewest tasks packing keeps (more cores: pass minPartitions)
MIN_BYTES_PER_PARTITION = 4096

# {topic: {partition: value}} as given in the JSON options
PerPartition = Mapping[str, Mapping[int, int]]


@dataclass(frozen=True)
class OptionSpec:
    """One row of the option table: the name as documented, its default (as Spark would pass
    it, a string, or ``None`` when unset) and what it means."""

    name: str
    default: str | None
    doc: str


READ_OPTIONS: tuple[OptionSpec, ...] = (
    OptionSpec("path", None, "log dir, partition dir or one .log file; several separated by "
               "commas; glob patterns allowed (set by load(path))"),
    OptionSpec("paths", None, "JSON list of paths (set by Spark for load([p1, p2]))"),
    OptionSpec("subscribe", None, "comma-separated topics to read (default: every topic)"),
    OptionSpec("subscribePattern", None, "regular expression a topic name must match fully"),
    OptionSpec("assign", None, 'JSON {"topic": [partition, ...]} of the partitions to read'),
    OptionSpec("looseTopic", None, "the topic of loose segments: .log files named directly "
               "outside a <topic>-<partition> folder, or a folder of them (with "
               "loosePartition; without both such files are an error, not an empty read)"),
    OptionSpec("loosePartition", None, "the partition of loose segments (with looseTopic)"),
    OptionSpec("startingOffsets", "earliest",
               'earliest, or JSON {"topic": {"partition": offset}} naming every partition the read '
               'selects, as in Spark (-2 = earliest); inclusive'),
    OptionSpec("endingOffsets", "latest",
               'latest, or JSON {"topic": {"partition": offset}} naming every partition the read '
               'selects, as in Spark (-1 = latest); exclusive'),
    OptionSpec("startingTimestamp", None, "start every partition at the first offset whose "
               "record timestamp >= this (ms since the epoch), resolved through .timeindex"),
    OptionSpec("endingTimestamp", None, "end every partition (exclusive) at the first offset "
               "whose record timestamp >= this (ms); none such: the log end"),
    OptionSpec("startingOffsetsByTimestamp", None,
               'JSON {"topic": {"partition": timestamp_ms}} naming every partition the read '
               'selects, like startingTimestamp per partition'),
    OptionSpec("endingOffsetsByTimestamp", None,
               'JSON {"topic": {"partition": timestamp_ms}} naming every partition the read '
               'selects, like endingTimestamp per partition'),
    OptionSpec("startingOffsetsByTimestampStrategy", "error",
               "when no record has a timestamp >= the starting timestamp: error, or latest "
               "(read nothing from that partition)"),
    OptionSpec("includeHeaders", "false", "add the headers column"),
    OptionSpec("includeMetadata", "false", "add the Kafka metadata columns (leaderEpoch, "
               "producerId, ..., compression)"),
    OptionSpec("includeControl", "false", "also return the records of control batches "
               "(transaction markers; isControl true), which consumers never see"),
    OptionSpec("kafka.isolation.level", "read_uncommitted",
               "read_committed drops records of aborted transactions and stops at the last "
               "stable offset (the first offset of a transaction still open at the log end)"),
    OptionSpec("onCorruption", "fail", "fail: raise on the first bad batch; skip: return every "
               "valid record, log each skipped byte range (see datasource.reader.bad_ranges)"),
    OptionSpec("maxBytesPerPartition", str(DEFAULT_MAX_BYTES_PER_PARTITION),
               "most .log bytes one Spark task reads; larger segments are cut at batch "
               "boundaries found through the offset index (a remote segment in compressed or "
               "encrypted chunks: at chunk boundaries, at least 10 chunks apart)"),
    OptionSpec("minPartitions", str(DEFAULT_MIN_PARTITIONS),
               "tasks a read is packed into, of equal work (a multiple of it if maxBytesPer"
               "Partition needs more); each has a fixed cost: match it to the cores"),
    OptionSpec("maxRowsPerBatch", str(DEFAULT_MAX_ROWS_PER_BATCH),
               "most rows per Arrow record batch a task yields"),
    OptionSpec("verifyCrc", "true", "check every batch's CRC"),
    OptionSpec("remoteTier", None, "tiered storage: the remote tier's folder or URI, read first"),
    OptionSpec("remoteTierLayout", "local-tiered-storage", "the remote tier's layout, or aiven"),
    OptionSpec("remoteTierPrivateKey", None, "RSA key PEM files (comma-separated), aiven only"),
)


def match_options(options: Mapping[str, Any], table: Sequence[OptionSpec],
                  what: str) -> dict[str, str]:
    """The options given, keyed by their documented names (Spark passes names in any case).

    Raises
    ------
    InvalidOptionError
        A name not in ``table``; the message lists the valid names.
    """
    by_key = {spec.name.lower(): spec for spec in table}
    raw: dict[str, str] = {}
    for key, value in options.items():
        if is_storage_option(str(key)):
            continue  # read by storage_options()
        spec = by_key.get(str(key).lower())
        if spec is None:
            raise InvalidOptionError(f"unknown {what} {key!r}{_did_you_mean(str(key), table)}"
                                     f"; valid options: {', '.join(s.name for s in table)}")
        if value is not None:
            raw[spec.name] = str(value)
    return raw


def _did_you_mean(key: str, table: Sequence[OptionSpec]) -> str:
    """`` (did you mean 'startingOffsets'?)`` for the valid name closest to ``key``, if any is
    close. Spark lower-cases option names before a data source sees them, so the name echoed
    in the error may differ from the user's in case only."""
    names = {spec.name.lower(): spec.name for spec in table}
    close = difflib.get_close_matches(key.lower(), names, n=1, cutoff=0.6)
    return f" (did you mean {names[close[0]]!r}?)" if close else ""


def is_storage_option(key: str) -> bool:
    """An option for the object store: ``storage.<name>`` (any name or alias of
    ``log.object_options``) or a bare delta-rs name (``aws_...``, ``google_...``,
    ``azure_...``)."""
    low = key.lower()
    return low.startswith(STORAGE_PREFIX) or low.startswith(("aws_", "google_", "azure_"))


def storage_options(options: Mapping[str, Any],
                    session: Mapping[str, str] | None = None) -> dict[str, str]:
    """The store options among a data source's options, over ``session``'s (the session's
    ``spark.hadoop.fs.s3a.*`` settings, :func:`~kafkalog_spark.storage.options.from_hadoop`):
    an option given on the read or write wins."""
    given = {(k[len(STORAGE_PREFIX):] if k.lower().startswith(STORAGE_PREFIX) else k): v
             for k, v in options.items() if is_storage_option(str(k))}
    return {**(session or {}), **normalize_options(given)}


def with_defaults(raw: Mapping[str, str], table: Sequence[OptionSpec]) -> dict[str, str | None]:
    """Every option of ``table``: the given value, else the documented default."""
    return {spec.name: raw.get(spec.name, spec.default) for spec in table}


@dataclass(frozen=True)
class ReadOptions:
    """Parsed read options (see :data:`READ_OPTIONS` for what each means)."""

    paths: tuple[str | ObjectPath, ...]  # object-store paths carry their storage options
    topics: frozenset[str] | None = None
    topic_pattern: str | None = None
    assign: frozenset[tuple[str, int]] | None = None
    starting_offsets: PerPartition | None = None  # None: earliest everywhere
    ending_offsets: PerPartition | None = None  # None: latest everywhere
    starting_timestamp: int | None = None
    ending_timestamp: int | None = None
    starting_by_timestamp: PerPartition | None = None
    ending_by_timestamp: PerPartition | None = None
    starting_timestamp_strategy: str = "error"
    include_headers: bool = False
    include_metadata: bool = False
    include_control: bool = False
    read_committed: bool = False
    on_corruption: str = "fail"
    max_bytes_per_partition: int = DEFAULT_MAX_BYTES_PER_PARTITION
    max_rows_per_batch: int = DEFAULT_MAX_ROWS_PER_BATCH
    min_partitions: int = DEFAULT_MIN_PARTITIONS
    verify_crc: bool = True
    loose_topic: str | None = None
    loose_partition: int | None = None
    remote_tier: RemoteTier | None = None

    def wants(self, topic: str, partition: int) -> bool:
        """Whether ``subscribe`` / ``subscribePattern`` / ``assign`` select this partition."""
        if self.topics is not None and topic not in self.topics:
            return False
        if self.topic_pattern is not None and re.fullmatch(self.topic_pattern, topic) is None:
            return False
        return self.assign is None or (topic, partition) in self.assign


def parse_read_options(options: Mapping[str, str],
                       session_storage: Mapping[str, str] | None = None) -> ReadOptions:
    """Parse Spark's (case-insensitive) option map into :class:`ReadOptions`.

    Parameters
    ----------
    options : mapping
        Option names (any case) to string values, as Spark passes them.
    session_storage : mapping, optional
        Object-store options from the Spark session (``spark.hadoop.fs.s3a.*``), under those
        given as options.

    Returns
    -------
    ReadOptions

    Raises
    ------
    InvalidOptionError
        An unknown option (the message lists the valid ones), a bad value (the message says
        what is accepted), no path, or options that contradict each other.
    """
    raw = match_options(options, READ_OPTIONS, "option for format kafkalog")
    get = with_defaults(raw, READ_OPTIONS).get
    _only_one(raw, ("subscribe", "subscribePattern", "assign"))
    _only_one(raw, ("startingOffsets", "startingTimestamp", "startingOffsetsByTimestamp"))
    _only_one(raw, ("endingOffsets", "endingTimestamp", "endingOffsetsByTimestamp"))
    return ReadOptions(
        paths=_paths(raw.get("path"), raw.get("paths"),
                     storage_options(options, session_storage)),
        topics=_topics(raw.get("subscribe")),
        topic_pattern=_pattern(raw.get("subscribePattern")),
        assign=_assign(raw.get("assign")),
        starting_offsets=_offsets("startingOffsets", get("startingOffsets"), "earliest"),
        ending_offsets=_offsets("endingOffsets", get("endingOffsets"), "latest"),
        starting_timestamp=_opt_int("startingTimestamp", raw.get("startingTimestamp"), 0),
        ending_timestamp=_opt_int("endingTimestamp", raw.get("endingTimestamp"), 0),
        starting_by_timestamp=_per_partition("startingOffsetsByTimestamp",
                                             raw.get("startingOffsetsByTimestamp"), 0),
        ending_by_timestamp=_per_partition("endingOffsetsByTimestamp",
                                           raw.get("endingOffsetsByTimestamp"), 0),
        starting_timestamp_strategy=_choice("startingOffsetsByTimestampStrategy",
                                            get("startingOffsetsByTimestampStrategy"),
                                            TIMESTAMP_STRATEGIES),
        include_headers=_bool("includeHeaders", get("includeHeaders")),
        include_metadata=_bool("includeMetadata", get("includeMetadata")),
        include_control=_bool("includeControl", get("includeControl")),
        read_committed=_choice("kafka.isolation.level", get("kafka.isolation.level"),
                               ISOLATION_LEVELS) == "read_committed",
        on_corruption=_choice("onCorruption", get("onCorruption"), CORRUPTION_POLICIES),
        max_bytes_per_partition=_int("maxBytesPerPartition", get("maxBytesPerPartition"),
                                     MIN_BYTES_PER_PARTITION),
        max_rows_per_batch=_int("maxRowsPerBatch", get("maxRowsPerBatch"), 1),
        min_partitions=_int("minPartitions", get("minPartitions"), 1),
        verify_crc=_bool("verifyCrc", get("verifyCrc")),
        loose_topic=raw.get("looseTopic"),
        loose_partition=_opt_int("loosePartition", raw.get("loosePartition"), 0),
        remote_tier=as_remote_tier(raw.get("remoteTier"), raw.get("remoteTierLayout"),
                                   storage_options(options, session_storage),
                                   raw.get("remoteTierPrivateKey")))


def options_doc() -> str:
    """The option table as Markdown (for the README and ``--help``), from :data:`READ_OPTIONS`."""
    rows = ["| option | default | meaning |", "|---|---|---|"]
    rows += [f"| `{s.name}` | {'' if s.default is None else f'`{s.default}`'} | {s.doc} |"
             for s in READ_OPTIONS]
    return "\n".join(rows)


# --- value parsers ---------------------------------------------------------------------------


def _only_one(raw: Mapping[str, str], names: tuple[str, ...]) -> None:
    given = [n for n in names if n in raw]
    if len(given) > 1:
        raise InvalidOptionError(f"give only one of {', '.join(names)}; got {', '.join(given)}")


def _paths(path: str | None, paths: str | None, storage: Mapping[str, str]
           ) -> tuple[str | ObjectPath, ...]:
    items: list[str] = []
    if path:
        items += [p.strip() for p in path.split(",") if p.strip()]
    if paths:
        try:
            listed = json.loads(paths)
        except json.JSONDecodeError as exc:
            raise InvalidOptionError(f"paths must be a JSON list of strings; got {paths!r}") from exc
        if not isinstance(listed, list) or not all(isinstance(p, str) for p in listed):
            raise InvalidOptionError(f"paths must be a JSON list of strings; got {paths!r}")
        items += listed
    if not items:
        raise InvalidOptionError("no path given: use spark.read.format('kafkalog').load(path) "
                                 "with a log dir, a partition dir or a .log file")
    out: list[str] = []
    for item in items:
        fs = storage_for(as_path(item, storage))
        if fs.is_pattern(item):
            hits = fs.glob_pattern(item)  # sorted
            if not hits:
                raise InvalidOptionError(f"path pattern {item!r} matches nothing")
            out += hits
        else:
            out.append(item)
    return tuple(as_path(p, storage) if is_remote(p) else p for p in dict.fromkeys(out))


def _topics(value: str | None) -> frozenset[str] | None:
    if value is None:
        return None
    topics = frozenset(t.strip() for t in value.split(",") if t.strip())
    if not topics:
        raise InvalidOptionError("subscribe must name at least one topic (comma-separated)")
    return topics


def _pattern(value: str | None) -> str | None:
    if value is None:
        return None
    try:
        re.compile(value)
    except re.error as exc:
        raise InvalidOptionError(f"subscribePattern {value!r} is not a valid regular "
                                 f"expression: {exc}") from exc
    return value


def _json(name: str, value: str) -> object:
    try:
        return json.loads(value)
    except json.JSONDecodeError as exc:
        raise InvalidOptionError(f"{name} must be JSON; got {value!r} ({exc.msg})") from exc


def _assign(value: str | None) -> frozenset[tuple[str, int]] | None:
    if value is None:
        return None
    data = _json("assign", value)
    shape = 'assign must be JSON like {"topicA": [0, 1]}'
    if not isinstance(data, dict) or not data:
        raise InvalidOptionError(f"{shape}; got {value!r}")
    out = set()
    for topic, parts in data.items():
        if not isinstance(parts, list) or not all(type(p) is int and p >= 0 for p in parts):
            raise InvalidOptionError(f"{shape}; topic {topic!r} has {parts!r}")
        out |= {(topic, p) for p in parts}
    return frozenset(out)


def _per_partition(name: str, value: str | None, minimum: int) -> PerPartition | None:
    if value is None:
        return None
    data = _json(name, value)
    shape = f'{name} must be JSON like {{"topicA": {{"0": 23, "1": -1}}}}'
    if not isinstance(data, dict):
        raise InvalidOptionError(f"{shape}; got {value!r}")
    out: dict[str, dict[int, int]] = {}
    for topic, parts in data.items():
        if not isinstance(parts, dict):
            raise InvalidOptionError(f"{shape}; topic {topic!r} has {parts!r}")
        out[topic] = {}
        for p, v in parts.items():
            if not str(p).isdigit() or type(v) is not int or v < minimum:
                raise InvalidOptionError(f"{shape}; {topic!r} partition {p!r} has {v!r} "
                                         f"(values must be integers >= {minimum})")
            out[topic][int(p)] = v
    return out


def _offsets(name: str, value: str | None, keyword: str) -> PerPartition | None:
    """``earliest``/``latest`` (only the keyword meaning "no bound" for this side is accepted
    in a batch query, as in Spark) or per-partition JSON with -2/-1 sentinels."""
    if value is None or value.strip().lower() == keyword:
        return None
    if value.strip().lower() in ("earliest", "latest"):
        raise InvalidOptionError(f"{name} cannot be {value.strip().lower()!r} in a batch query; "
                                 f"use {keyword!r} or per-partition JSON")
    parsed = _per_partition(name, value, EARLIEST)
    assert parsed is not None
    banned = LATEST if keyword == "earliest" else EARLIEST
    for topic, parts in parsed.items():
        for p, v in parts.items():
            if v == banned:
                raise InvalidOptionError(f"{name}: {topic}-{p} is {v}, which a batch query does "
                                         f"not accept here (-2 = earliest only for "
                                         f"startingOffsets, -1 = latest only for endingOffsets)")
    return parsed


def _choice(name: str, value: str | None, choices: tuple[str, ...]) -> str:
    v = (value or "").strip().lower()
    if v not in choices:
        raise InvalidOptionError(f"{name} must be one of {', '.join(choices)}; got {value!r}")
    return v


def _bool(name: str, value: str | None) -> bool:
    return _choice(name, value, ("true", "false")) == "true"


def _int(name: str, value: str | None, minimum: int) -> int:
    try:
        n = int(str(value).strip())
    except ValueError:
        raise InvalidOptionError(f"{name} must be an integer >= {minimum}; got {value!r}") from None
    if n < minimum:
        raise InvalidOptionError(f"{name} must be an integer >= {minimum}; got {value!r}")
    return n


def _opt_int(name: str, value: str | None, minimum: int) -> int | None:
    return None if value is None else _int(name, value, minimum)
