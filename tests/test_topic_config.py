"""Effective topic configuration: options > file > KRaft metadata > internal topic > defaults."""

from __future__ import annotations

import shutil

import pytest

from kafkalog_spark.errors import InvalidOptionError
from kafkalog_spark.log.topic_config import (CONFIG_TABLE, effective_config, metadata_topic_configs,
                                             read_config_file)

KRAFT = "ItumelengMogase__Real-Time-Data-Pipeline-for-Patient-Admissions/kafka-data"


def test_defaults_and_internal_topics():
    c = effective_config("orders")
    assert c.cleanup_policy == ("delete",) and c.delete and not c.compact
    assert c.retention_ms == 604_800_000 and c.delete_retention_ms == 86_400_000
    assert c.min_cleanable_dirty_ratio == 0.5 and c.max_compaction_lag_ms == 2**63 - 1
    assert set(c.sources.values()) == {"default"}
    off = effective_config("__consumer_offsets")
    assert off.compact and off.sources["cleanup.policy"] == "internal topic"
    assert set(off.to_dict()) == set(CONFIG_TABLE)


def test_precedence_options_over_file(tmp_path):
    f = tmp_path / "topics.json"
    f.write_text('{"orders": {"retention.ms": 5000, "cleanup.policy": "compact,delete"},'
                 ' "other": {"retention.ms": 1}}')
    c = effective_config("orders", config_file=f, options={"retention.ms": "7"})
    assert c.retention_ms == 7 and c.sources["retention.ms"] == "option"
    assert c.cleanup_policy == ("compact", "delete") and c.sources["cleanup.policy"] == "file"
    assert effective_config("x", config_file=f).retention_ms == 604_800_000
    props = tmp_path / "t.properties"
    props.write_text("# comment\nmin.cleanable.dirty.ratio = 0.1\nsegment.bytes: 4096\n")
    c = effective_config("orders", config_file=props)
    assert c.min_cleanable_dirty_ratio == 0.1 and c.segment_bytes == 4096
    flat = tmp_path / "flat.json"
    flat.write_text('{"delete.retention.ms": 10}')
    assert read_config_file(flat) == {None: {"delete.retention.ms": 10}}
    assert effective_config("any", config_file=flat).delete_retention_ms == 10


@pytest.mark.parametrize("name,value", [("retention.ms", "abc"), ("cleanup.policy", "purge"),
                                        ("min.cleanable.dirty.ratio", "2"), ("no.such", "1"),
                                        ("retention.ms", 1.5)])
def test_bad_values_are_errors_naming_the_source(name, value):
    with pytest.raises(InvalidOptionError, match="option"):
        effective_config("t", options={name: value})


def test_kraft_metadata_snapshot(shared_fixtures, tmp_path):
    src = shared_fixtures / KRAFT / "__cluster_metadata-0"
    log_dir = tmp_path / "logs"
    shutil.copytree(src, log_dir / "__cluster_metadata-0")
    configs = metadata_topic_configs(log_dir)
    assert configs["docker-connect-offsets"]["cleanup.policy"] == "compact"
    assert configs["__consumer_offsets"]["segment.bytes"] == "104857600"
    c = effective_config("__consumer_offsets", log_dirs=log_dir)
    assert c.segment_bytes == 104857600 and c.sources["segment.bytes"] == "metadata log"
    ksql = effective_config("_confluent-ksql-default__command_topic", log_dirs=log_dir)
    assert ksql.retention_ms == -1 and ksql.cleanup_policy == ("delete",)
    assert ksql.sources["retention.ms"] == "metadata log"
    assert effective_config("_schemas", log_dirs=log_dir, options={"cleanup.policy": "delete"}
                            ).sources["cleanup.policy"] == "option"
    assert metadata_topic_configs(tmp_path / "nothing") == {}


# every topic config of a Kafka 4.1 topic, as `kafka-configs --describe --all` lists them
CLUSTER_TOPIC_CONFIG = """\
cleanup.policy=compact,delete
compression.gzip.level=-1
compression.lz4.level=9
compression.type=producer
compression.zstd.level=3
delete.retention.ms=86400000
file.delete.delay.ms=60000
flush.messages=9223372036854775807
flush.ms=9223372036854775807
follower.replication.throttled.replicas=
index.interval.bytes=4096
leader.replication.throttled.replicas=
local.retention.bytes=-2
local.retention.ms=-2
max.compaction.lag.ms=9223372036854775807
max.message.bytes=1048588
message.timestamp.after.max.ms=3600000
message.timestamp.before.max.ms=9223372036854775807
message.timestamp.type=CreateTime
min.cleanable.dirty.ratio=0.5
min.compaction.lag.ms=0
min.insync.replicas=1
preallocate=false
remote.log.copy.disable=false
remote.log.delete.on.disable=false
remote.storage.enable=false
retention.bytes=-1
retention.ms=604800000
segment.bytes=1073741824
segment.index.bytes=10485760
segment.jitter.ms=0
segment.ms=500
unclean.leader.election.enable=false
"""


def test_a_topic_config_taken_from_a_cluster_is_accepted(tmp_path):
    props = tmp_path / "orders.properties"
    props.write_text(CLUSTER_TOPIC_CONFIG)
    c = effective_config("orders", config_file=props)
    assert c.cleanup_policy == ("compact", "delete") and c.sources["cleanup.policy"] == "file"
    assert c.index_interval_bytes == 4096 and c.sources["index.interval.bytes"] == "file"
    assert "segment.ms" not in c.to_dict()  # checked, not used
    c = effective_config("orders", options={"segment.ms": "500", "preallocate": "TRUE",
                                            "index.interval.bytes": "100"})
    assert c.index_interval_bytes == 100 and c.sources["index.interval.bytes"] == "option"


@pytest.mark.parametrize("name,value,message", [
    ("segment.ms", "soon", "segment.ms='soon' (option for topic t) is not a valid int"),
    ("preallocate", "maybe", "preallocate='maybe' (option for topic t) is not a valid bool"),
    ("segment.mss", "1", "unknown topic config 'segment.mss' (option for topic t) (did you mean "
                         "'segment.ms'?); valid: cleanup.policy,"),
    ("retention.mss", "1", "(did you mean 'retention.ms'?)"),
    ("message.downconversion.enable", "true", "unknown topic config"),  # gone in Kafka 4.0
])
def test_other_kafka_configs_are_checked_and_typos_named(name, value, message):
    with pytest.raises(InvalidOptionError) as err:
        effective_config("t", options={name: value})
    assert message in str(err.value)
