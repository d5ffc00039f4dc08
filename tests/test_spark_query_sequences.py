"""Several queries on one ``format("kafkalog")`` DataFrame, as a notebook runs them: each answer
equals the same query over ``read_log``'s table, whatever ran before it — on the DataFrame
itself, a temp view over it, DataFrames derived from it, a cached copy, from several threads
at once, and in random orders (Hypothesis).

PySpark 4.1–4.3.0 reuse a filter pushdown's plan for later queries of the same DataFrame
(see :class:`kafkalog_spark.datasource.reader.KafkaLogReader`); these tests hold every
sequence to the right answer, with the session's Python filter pushdown off (the package's
default) and on.
"""

from __future__ import annotations

from collections import Counter
from contextlib import contextmanager
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timezone
from pathlib import Path

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import kafkalog_spark as kl
from test_datasource_read import T0, records

pytestmark = pytest.mark.spark

PUSHDOWN = "spark.sql.python.filterPushdown.enabled"
TOPICS = ("orders", "payments")


@pytest.fixture(scope="module")
def log_dir(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("sequences") / "logs"
    for i, topic in enumerate(TOPICS):
        kl.write_log(records(1200, partitions=2 + i, topic=topic, seed=i), d,
                     codec=("zstd", "lz4")[i], segment_bytes=16 * 1024, max_batch_records=40)
    return d


@pytest.fixture(scope="module")
def truth(log_dir) -> list[dict]:
    """``read_log``'s rows as plain values: the reference every answer is held to."""
    t = kl.read_log(log_dir)
    ts = t["timestamp"].cast(pa.int64()).to_pylist()
    return [{"topic": r["topic"], "partition": r["partition"], "offset": r["offset"],
             "ts_us": us, "key_null": r["key"] is None}
            for r, us in zip(t.select(["topic", "partition", "offset", "key"]).to_pylist(), ts)]


@contextmanager
def session_pushdown(spark, on: bool):
    """The session's Python filter pushdown as a user may have set it."""
    before = spark.conf.get(PUSHDOWN, None)
    spark.conf.set(PUSHDOWN, "true" if on else "false")
    try:
        yield
    finally:
        if before is None:
            spark.conf.unset(PUSHDOWN)
        else:
            spark.conf.set(PUSHDOWN, before)


@pytest.fixture
def pushdown(spark):
    """Pushdown on: the session setting under which Spark reuses a pushdown's plan."""
    with session_pushdown(spark, True):
        yield


# --- queries: a Spark SQL predicate and the same predicate over the reference rows -----------

def _iso(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, timezone.utc).strftime("%Y-%m-%d %H:%M:%S")


FILTERS: dict[str, tuple[str, object]] = {
    "none": ("", lambda r: True),
    "offset>=590": ("`offset` >= 590", lambda r: r["offset"] >= 590),
    "offset<7": ("`offset` < 7", lambda r: r["offset"] < 7),
    "offset in": ("`offset` IN (3, 500, 999)", lambda r: r["offset"] in (3, 500, 999)),
    "partition=1": ("partition = 1", lambda r: r["partition"] == 1),
    "partition>0": ("partition > 0", lambda r: r["partition"] > 0),
    "topic": ("topic = 'payments'", lambda r: r["topic"] == "payments"),
    "no such topic": ("topic = 'nosuch'", lambda r: False),
    "ts>=": (f"timestamp >= '{_iso(T0 + 9_000)}'", lambda r: r["ts_us"] >= (T0 + 9_000) * 1000),
    "ts<": (f"timestamp < '{_iso(T0 + 3_000)}'", lambda r: r["ts_us"] < (T0 + 3_000) * 1000),
    "future": ("timestamp >= '2100-01-01'", lambda r: False),
    "key null": ("key IS NULL", lambda r: r["key_null"]),
    "mixed": ("topic = 'orders' AND partition = 0 AND `offset` BETWEEN 100 AND 140",
              lambda r: r["topic"] == "orders" and r["partition"] == 0
              and 100 <= r["offset"] <= 140),
    "or": ("`offset` < 3 OR partition = 2", lambda r: r["offset"] < 3 or r["partition"] == 2),
}
SHAPES = ("count", "by_partition", "offsets")


def expected(truth: list[dict], name: str, shape: str):
    keep = [r for r in truth if FILTERS[name][1](r)]
    if shape == "count":
        return len(keep)
    if shape == "by_partition":
        return dict(Counter((r["topic"], r["partition"]) for r in keep))
    return sorted((r["topic"], r["partition"], r["offset"]) for r in keep)


def run(df, name: str, shape: str):
    where = FILTERS[name][0]
    d = df.where(where) if where else df
    if shape == "count":
        return d.count()
    if shape == "by_partition":
        return {(r["topic"], r["partition"]): r["count"]
                for r in d.groupBy("topic", "partition").count().collect()}
    return sorted((r.topic, r.partition, r.offset)
                  for r in d.select("topic", "partition", "offset").collect())


def run_sql(spark, view: str, name: str, shape: str):
    where = FILTERS[name][0]
    cond = f" WHERE {where}" if where else ""
    if shape == "count":
        return spark.sql(f"SELECT count(*) AS n FROM {view}{cond}").collect()[0].n
    if shape == "by_partition":
        return {(r.topic, r.partition): r.n for r in spark.sql(
            f"SELECT topic, partition, count(*) AS n FROM {view}{cond} "
            f"GROUP BY topic, partition").collect()}
    return sorted((r.topic, r.partition, r.offset) for r in spark.sql(
        f"SELECT topic, partition, offset FROM {view}{cond}").collect())


def load(spark, log_dir):
    return spark.read.format("kafkalog").load(str(log_dir))


# --- the sequences -------------------------------------------------------------------

@pytest.mark.parametrize("on", [False, True], ids=["pushdown-off", "pushdown-on"])
def test_filtered_then_unfiltered_on_one_dataframe(spark, log_dir, truth, on):
    """The issue's sequence: a filter that matches nothing, then the whole DataFrame again."""
    with session_pushdown(spark, on):
        df = load(spark, log_dir)
        sequence = [("none", "count"), ("future", "count"), ("none", "count"),
                    ("none", "by_partition"), ("offset>=590", "count"), ("none", "count"),
                    ("ts>=", "by_partition"), ("partition=1", "count"), ("none", "by_partition"),
                    ("topic", "count"), ("offset<7", "offsets"), ("none", "count")]
        for name, shape in sequence:
            assert run(df, name, shape) == expected(truth, name, shape), (name, shape)


def test_temp_view_sequence(spark, log_dir, truth, pushdown):
    load(spark, log_dir).createOrReplaceTempView("kl_seq")
    try:
        for name in ["partition=1", "none", "offset>=590", "none", "ts<", "topic", "none"]:
            assert run_sql(spark, "kl_seq", name, "count") == expected(truth, name, "count"), name
        assert run_sql(spark, "kl_seq", "none", "by_partition") == expected(
            truth, "none", "by_partition")
    finally:
        spark.catalog.dropTempView("kl_seq")


def test_derived_dataframes(spark, log_dir, truth, pushdown):
    """DataFrames derived from one another share their relation: each answers for itself,
    asked in any order."""
    base = load(spark, log_dir)
    orders = base.where(FILTERS["topic"][0].replace("payments", "orders"))
    late = orders.where("`offset` >= 500")
    n_orders = sum(1 for r in truth if r["topic"] == "orders")
    n_late = sum(1 for r in truth if r["topic"] == "orders" and r["offset"] >= 500)
    for _ in range(2):
        assert late.count() == n_late
        assert base.count() == len(truth)
        assert orders.count() == n_orders
        assert base.where("partition = 1").count() == expected(truth, "partition=1", "count")
    assert late.where("`offset` < 500").count() == 0


def test_join_filtered_with_unfiltered_copy(spark, log_dir, truth, pushdown):
    df = load(spark, log_dir)
    few = df.where("`offset` < 7").select("topic", "partition", "offset")
    joined = few.join(df.select("topic", "partition", "offset", "value"),
                      ["topic", "partition", "offset"])
    assert joined.count() == expected(truth, "offset<7", "count")
    # the other way round: the unfiltered side must not shrink after the filtered one ran
    every = df.alias("a").join(df.where("partition = 1").alias("b"),
                               ["topic", "partition", "offset"], "left")
    assert every.count() == len(truth)
    assert df.count() == len(truth)


def test_cached_dataframe(spark, log_dir, truth, pushdown):
    df = load(spark, log_dir)
    assert df.where("`offset` >= 590").count() == expected(truth, "offset>=590", "count")
    df.cache()
    try:
        for name in ["none", "partition>0", "none", "offset in", "none"]:
            assert run(df, name, "offsets") == expected(truth, name, "offsets"), name
    finally:
        df.unpersist()


def test_threads_share_one_dataframe(spark, log_dir, truth, pushdown):
    df = load(spark, log_dir)
    names = ["none", "offset>=590", "none", "partition=1", "ts>=", "none", "topic", "offset<7"]

    def ask(name: str):
        return name, run(df, name, "count")

    with ThreadPoolExecutor(max_workers=4) as pool:
        got = list(pool.map(ask, names * 2))
    for name, answer in got:
        assert answer == expected(truth, name, "count"), name


def test_read_options_still_prune_and_stay_put(spark, log_dir, truth):
    """What a query cannot change: the read its options define, asked again and again."""
    df = (spark.read.format("kafkalog").option("subscribe", "orders")
          .option("startingOffsets", '{"orders": {"0": 500, "1": -2}}').load(str(log_dir)))
    want = sum(1 for r in truth if r["topic"] == "orders"
               and (r["partition"] == 1 or r["offset"] >= 500))
    assert df.count() == want
    assert df.where("partition = 1").count() == sum(
        1 for r in truth if r["topic"] == "orders" and r["partition"] == 1)
    assert df.count() == want
    assert {r.partition for r in df.select("partition").distinct().collect()} == {0, 1}


# --- random sequences ------------------------------------------------------------------------

QUERY = st.tuples(st.sampled_from(sorted(FILTERS)), st.sampled_from(SHAPES),
                  st.sampled_from(("df", "sql", "derived")))


@settings(max_examples=6, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(sequence=st.lists(QUERY, min_size=3, max_size=6))
def test_random_query_sequences(spark, log_dir, truth, sequence):
    """Any order of filtered and unfiltered queries, through the DataFrame, a view over it or a
    DataFrame derived from it, with pushdown on (the case Spark gets wrong by itself)."""
    with session_pushdown(spark, True):
        df = load(spark, log_dir)
        df.createOrReplaceTempView("kl_random")
        derived = df.select("*")
        try:
            for name, shape, via in sequence:
                if via == "sql":
                    got = run_sql(spark, "kl_random", name, shape)
                else:
                    got = run(df if via == "df" else derived, name, shape)
                assert got == expected(truth, name, shape), (name, shape, via, sequence)
        finally:
            spark.catalog.dropTempView("kl_random")
