"""Write options of the ``kafkalog`` data source (Spark layer): one table, strict parsing.

Spark hands options over case-insensitively (keys may arrive lower-cased), so names match
ignoring case. Every option is parsed once into the frozen :class:`WriteOptions`; an unknown
name or a bad value raises :class:`~kafkalog_spark.errors.InvalidOptionError` naming the valid
choices. :data:`WRITE_OPTIONS` is the single source of names, defaults and documentation
(:func:`write_options_doc` renders it). Topic-level names follow Kafka's own configs
(``segment.bytes``, ``index.interval.bytes``, ``compression.type``'s codecs).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from ..codec import layout as L
from ..codec.files import properties as M
from ..codec.files.naming import check_topic
from ..codec.records.encode import DEFAULT_MAX_BATCH_BYTES
from ..errors import InvalidOptionError
from ..log.staging import WriteSettings
from .options import OptionSpec, match_options, with_defaults

CODECS = tuple(L.CODEC_NAMES[i] for i in sorted(L.CODEC_NAMES))

WRITE_OPTIONS: tuple[OptionSpec, ...] = (
    OptionSpec("path", None, "the target Kafka log dir (set by save(path)); created if missing"),
    OptionSpec("topic", None, "topic of every row when the DataFrame has no topic column"),
    OptionSpec("numPartitions", None, "partition count for Kafka's default partitioner (murmur2 "
               "of the key) when there is no partition column; default: the topic's existing "
               "partition count in the log dir"),
    OptionSpec("compression", "none", "codec of every batch: " + ", ".join(CODECS)),
    OptionSpec("compression.level", None, "codec level (gzip 1-9, lz4 1-17, zstd 1-22); "
               "default: Kafka's default level"),
    OptionSpec("segment.bytes", str(1 << 30), "roll a segment before it would exceed this size "
               "(Kafka's segment.bytes)"),
    OptionSpec("index.interval.bytes", "4096", "bytes between offset/time index entries "
               "(Kafka's index.interval.bytes)"),
    OptionSpec("batch.records", "10000", "most records per record batch"),
    OptionSpec("batch.bytes", str(DEFAULT_MAX_BATCH_BYTES), "most uncompressed record bytes per batch (a "
               "larger record gets a batch of its own)"),
    OptionSpec("leaderEpoch", "0", "partition leader epoch stamped on the batches and recorded "
               "in leader-epoch-checkpoint; -1 for none"),
    OptionSpec("topicId", None, "base64url topic id for new partition.metadata files (needs the "
               "topic option); default: the id the topic already has here, else a random one"),
)
_INT32_MAX = 2**31 - 1


@dataclass(frozen=True)
class WriteOptions:
    """Parsed write options; ``settings`` is what every task's stager uses."""

    path: str
    topic: str | None
    num_partitions: int | None
    topic_id: str | None
    settings: WriteSettings


def parse_write_options(options: Mapping[str, str]) -> WriteOptions:
    """Parse the options given to ``df.write.format("kafkalog")``.

    Parameters
    ----------
    options : mapping
        Option names (any case) to string values, as Spark passes them.

    Returns
    -------
    WriteOptions

    Raises
    ------
    InvalidOptionError
        An unknown option (the message lists the valid names), a bad value (it says which
        values are valid) or a missing path.
    """
    raw = match_options(options, WRITE_OPTIONS, "write option")
    get = with_defaults(raw, WRITE_OPTIONS).get

    path = get("path")
    if not path:
        raise InvalidOptionError("no path: use df.write.format('kafkalog').save(log_dir)")
    topic = get("topic")
    if topic is not None:
        check_topic(topic)
    codec = get("compression").strip().lower()
    if codec not in CODECS:
        raise InvalidOptionError(f"compression must be one of {', '.join(CODECS)}; got {codec!r}")
    topic_id = get("topicId")
    if topic_id is not None:
        if topic is None:
            raise InvalidOptionError("topicId needs the topic option (it names one topic's id)")
        try:
            M.uuid_from_string(topic_id)
        except ValueError as exc:
            raise InvalidOptionError(f"topicId {topic_id!r} is not a base64url topic id "
                                     f"(22 characters, like Nq2ZD3ATRUu4vhRG2pcSzQ): {exc}") from exc
    level = get("compression.level")
    settings = WriteSettings(
        codec=codec,
        compression_level=None if level is None else _int("compression.level", level, -131072, 22),
        segment_bytes=_int("segment.bytes", get("segment.bytes"), L.RECORD_BATCH_OVERHEAD,
                           _INT32_MAX),
        index_interval_bytes=_int("index.interval.bytes", get("index.interval.bytes"), 0,
                                  _INT32_MAX),
        max_batch_records=_int("batch.records", get("batch.records"), 1, _INT32_MAX),
        max_batch_bytes=_int("batch.bytes", get("batch.bytes"), 1, _INT32_MAX),
        leader_epoch=_int("leaderEpoch", get("leaderEpoch"), -1, _INT32_MAX),
    )
    n = get("numPartitions")
    return WriteOptions(path=path, topic=topic,
                        num_partitions=None if n is None else _int("numPartitions", n, 1, 1 << 20),
                        topic_id=topic_id, settings=settings)


def _int(name: str, text: str, lo: int, hi: int) -> int:
    try:
        value = int(text.strip())
    except ValueError:
        raise InvalidOptionError(f"{name} must be an integer in [{lo}, {hi}]; got {text!r}") from None
    if not lo <= value <= hi:
        raise InvalidOptionError(f"{name} must be an integer in [{lo}, {hi}]; got {value}")
    return value


def write_options_doc() -> str:
    """The option table as Markdown (name, default, meaning), for the docs."""
    lines = ["| option | default | meaning |", "|---|---|---|"]
    for spec in WRITE_OPTIONS:
        default = "" if spec.default is None else f"`{spec.default}`"
        lines.append(f"| `{spec.name}` | {default} | {spec.doc} |")
    return "\n".join(lines)
