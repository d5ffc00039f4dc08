"""Operations a fresh-interpreter child runs (:func:`faults.run_script` targets): each takes
``step`` first and JSON-serialisable keyword arguments."""

from __future__ import annotations


def migrate_topic(step, logs: str, dest: str, topic: str) -> None:
    """One local-engine Delta migration of ``topic`` from ``logs`` into ``dest``."""
    from kafkalog_spark.delta import migrate

    migrate(logs, dest, topics=[topic], step=step)


def restore_table(step, table: str, dest: str, segment_bytes: int) -> None:
    """One ``kafkalog restore`` of ``table`` into the log dir ``dest``."""
    from kafkalog_spark.delta.restore import restore

    restore(table, dest, segment_bytes=segment_bytes, step=step)
