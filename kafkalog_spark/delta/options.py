"""Migration options (Delta layer): one table of names, defaults and meanings; strict parsing.

:data:`MIGRATE_OPTIONS` is the single source of option names, defaults and documentation, shared
by :func:`kafkalog_spark.delta.migrate`, ``kafkalog migrate`` and ``jobs/migrate_delta.py``
(:func:`options_doc` renders it for ``docs/delta.md``). Every value is parsed once into the
frozen :class:`MigrateOptions`; a bad value raises
:class:`~kafkalog_spark.errors.InvalidOptionError` naming what is accepted.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from ..errors import InvalidOptionError
from ..tiered.tier import check_layout

LAYOUTS = ("per-topic", "single")
PARTITION_COLUMNS = ("topic", "partition", "date")
ISOLATION_LEVELS = ("read_uncommitted", "read_committed")
ENGINES = ("auto", "spark", "local")
WRITERS = ("auto", "delta-rs", "delta-spark")
# the KRaft metadata log is cluster state, not data: never migrated (discovery keeps it apart)
INTERNAL_TOPICS = ("__consumer_offsets", "__transaction_state")


@dataclass(frozen=True)
class OptionSpec:
    """One row of the option table: library keyword, default and meaning."""

    name: str
    default: object
    doc: str


MIGRATE_OPTIONS: tuple[OptionSpec, ...] = (
    OptionSpec("topics", None, "topics to migrate (default: every topic of the log dirs)"),
    OptionSpec("topic_pattern", None, "regular expression a topic name must match fully"),
    OptionSpec("layout", "per-topic", "per-topic: one table per topic at DEST/<topic>; "
               "single: one table at DEST with a topic column"),
    OptionSpec("partition_by", None, "Delta partition columns among topic, partition, date "
               "(UTC day of the record timestamp); default: topic for the single layout, none "
               "for per-topic tables"),
    OptionSpec("include_headers", True, "keep the headers column"),
    OptionSpec("include_metadata", True, "keep the Kafka metadata columns (leaderEpoch, "
               "producerId, producerEpoch, sequence, isTransactional, isControl, batch offsets, "
               "magic, compression)"),
    OptionSpec("include_control", False, "keep the records of control batches (transaction "
               "markers, isControl true): what `kafkalog restore` needs to bring transactions "
               "back with their outcome"),
    OptionSpec("isolation_level", "read_uncommitted", "read_committed leaves out records of "
               "aborted transactions and stops each partition at its last stable offset"),
    OptionSpec("decode_internal", True, "add typed consumerOffsets / transactionState / "
               "remoteLogMetadata struct columns for __consumer_offsets, __transaction_state "
               "and __remote_log_metadata records"),
    OptionSpec("fail_on_data_loss", True, "stop when retention moved a partition's log start "
               "past the offset already migrated; false: continue from the log start and "
               "record the gap in the metrics"),
    OptionSpec("app_id_prefix", "kafkalog", "prefix of the Delta application-transaction ids "
               "(<prefix>:<topic>:<partition>) that record the offset reached"),
    OptionSpec("engine", "auto", "spark: Spark tasks decode and write Parquet; local: this "
               "process does (no JVM); auto: spark when a session is given"),
    OptionSpec("writer", "auto", "delta-rs: Parquet files committed by deltalake; delta-spark: "
               "df.write.format('delta') (needs the Spark engine and the Delta jars); auto: "
               "delta-rs, but delta-spark for an existing table with a feature delta-rs cannot "
               "write (deletion vectors, ...)"),
    OptionSpec("killed_run_grace_s", 86400, "a table on an object store (no lock): files of "
               "an unfinished run are deleted as a killed run's only once its marker is this "
               "many seconds old (younger: maybe a live run; its files stay, unreferenced)"),
    OptionSpec("single_writer", False, "a table on an object store whose writes are not "
               "conditional (the version file of a commit may be overwritten): accept that "
               "only one migration writes the table at a time; refused otherwise"),
    OptionSpec("remote_tier", None, "tiered storage: the remote tier's folder or bucket URI; "
               "each partition's remote segments are migrated before its local ones, each "
               "offset once (docs/tiered-storage.md)"),
    OptionSpec("remote_tier_layout", None, "the remote tier's layout: local-tiered-storage "
               "(the default) or aiven"),
    OptionSpec("remote_tier_private_key", None, "PEM files of the RSA private keys of "
               "encrypted aiven segments (a list, or comma-separated)"),
)


@dataclass(frozen=True)
class MigrateOptions:
    """Parsed migration options (see :data:`MIGRATE_OPTIONS` for what each means)."""

    topics: frozenset[str] | None = None
    topic_pattern: str | None = None
    layout: str = "per-topic"
    partition_by: tuple[str, ...] = ()
    include_headers: bool = True
    include_metadata: bool = True
    include_control: bool = False
    read_committed: bool = False
    decode_internal: bool = True
    fail_on_data_loss: bool = True
    app_id_prefix: str = "kafkalog"
    engine: str = "auto"
    writer: str = "auto"
    killed_run_grace_s: float = 86400
    single_writer: bool = False
    remote_tier: str | None = None
    remote_tier_layout: str | None = None
    remote_tier_private_key: tuple[str, ...] = field(default=(), repr=False)

    def wants(self, topic: str) -> bool:
        """Whether ``topics`` / ``topic_pattern`` select this topic."""
        if self.topics is not None and topic not in self.topics:
            return False
        return self.topic_pattern is None or re.fullmatch(self.topic_pattern, topic) is not None

    def app_id(self, topic: str, partition: int) -> str:
        """The Delta ``txn`` application id whose version is the next offset to migrate."""
        return f"{self.app_id_prefix}:{topic}:{partition}"


def parse_migrate_options(options: Mapping[str, object] | None = None, **kwargs: object
                          ) -> MigrateOptions:
    """Parse options given by keyword (library names of :data:`MIGRATE_OPTIONS`).

    Parameters
    ----------
    options : mapping, optional
        Option names to values; merged with ``kwargs``. ``None`` values mean "default".

    Returns
    -------
    MigrateOptions

    Raises
    ------
    InvalidOptionError
        An unknown name (the valid ones are listed) or a bad value.
    """
    raw = {k: v for k, v in {**(options or {}), **kwargs}.items() if v is not None}
    known = {s.name for s in MIGRATE_OPTIONS}
    for key in raw:
        if key not in known:
            raise InvalidOptionError(f"unknown migrate option {key!r}; valid options: "
                                     f"{', '.join(sorted(known))}")
    if "topics" in raw and "topic_pattern" in raw:
        raise InvalidOptionError("give only one of topics, topic_pattern")
    layout = _choice("layout", raw.get("layout", "per-topic"), LAYOUTS)
    default_parts: tuple[str, ...] = ("topic",) if layout == "single" else ()
    return MigrateOptions(
        topics=_topics(raw.get("topics")),
        topic_pattern=_pattern(raw.get("topic_pattern")),
        layout=layout,
        partition_by=_partition_by(raw.get("partition_by", default_parts)),
        include_headers=_bool("include_headers", raw.get("include_headers", True)),
        include_metadata=_bool("include_metadata", raw.get("include_metadata", True)),
        include_control=_bool("include_control", raw.get("include_control", False)),
        read_committed=_choice("isolation_level", raw.get("isolation_level", "read_uncommitted"),
                               ISOLATION_LEVELS) == "read_committed",
        decode_internal=_bool("decode_internal", raw.get("decode_internal", True)),
        fail_on_data_loss=_bool("fail_on_data_loss", raw.get("fail_on_data_loss", True)),
        app_id_prefix=_app_id_prefix(raw.get("app_id_prefix", "kafkalog")),
        engine=_choice("engine", raw.get("engine", "auto"), ENGINES),
        writer=_choice("writer", raw.get("writer", "auto"), WRITERS),
        killed_run_grace_s=_seconds(raw.get("killed_run_grace_s", 86400)),
        single_writer=_bool("single_writer", raw.get("single_writer", False)),
        remote_tier=None if "remote_tier" not in raw else str(raw["remote_tier"]),
        remote_tier_layout=None if "remote_tier_layout" not in raw
        else check_layout(str(raw["remote_tier_layout"])),
        remote_tier_private_key=_key_files(raw.get("remote_tier_private_key")),
    )


def options_doc() -> str:
    """The option table as Markdown, from :data:`MIGRATE_OPTIONS`."""
    rows = ["| option | default | meaning |", "|---|---|---|"]
    rows += [f"| `{s.name}` | {'' if s.default is None else f'`{s.default}`'} | {s.doc} |"
             for s in MIGRATE_OPTIONS]
    return "\n".join(rows)


def _key_files(value: object) -> tuple[str, ...]:
    items: Iterable[object] = (value.split(",") if isinstance(value, str)  # type: ignore
                               else value or ())
    return tuple(str(k).strip() for k in items if str(k).strip())


def _topics(value: object) -> frozenset[str] | None:
    if value is None:
        return None
    items: Iterable[object] = value.split(",") if isinstance(value, str) else value  # type: ignore[assignment]
    topics = frozenset(str(t).strip() for t in items if str(t).strip())
    if not topics:
        raise InvalidOptionError("topics must name at least one topic")
    return topics


def _pattern(value: object) -> str | None:
    if value is None:
        return None
    try:
        re.compile(str(value))
    except re.error as exc:
        raise InvalidOptionError(f"topic_pattern {value!r} is not a valid regular expression: "
                                 f"{exc}") from exc
    return str(value)


def _partition_by(value: object) -> tuple[str, ...]:
    items = [v.strip() for v in value.split(",")] if isinstance(value, str) else list(value)  # type: ignore[call-overload]
    out = tuple(dict.fromkeys(str(v) for v in items if str(v)))
    bad = [v for v in out if v not in PARTITION_COLUMNS]
    if bad:
        raise InvalidOptionError(f"partition_by accepts {', '.join(PARTITION_COLUMNS)}; got "
                                 f"{', '.join(bad)}")
    return out


def _choice(name: str, value: object, choices: tuple[str, ...]) -> str:
    v = str(value).strip().lower()
    if v not in choices:
        raise InvalidOptionError(f"{name} must be one of {', '.join(choices)}; got {value!r}")
    return v


def _bool(name: str, value: object) -> bool:
    if isinstance(value, bool):
        return value
    return _choice(name, value, ("true", "false")) == "true"


def _seconds(value: object) -> float:
    try:
        out = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        out = -1.0
    if out < 0:
        raise InvalidOptionError(f"killed_run_grace_s must be a number of seconds >= 0; got "
                                 f"{value!r}")
    return out


def _app_id_prefix(value: object) -> str:
    text = str(value)
    if not text or ":" in text:
        raise InvalidOptionError(f"app_id_prefix must be a non-empty string without ':'; got "
                                 f"{value!r}")
    return text
