"""Operations a fresh-interpreter child runs (:func:`faults.run_script` targets): each takes
``step`` first and JSON-serialisable keyword arguments."""

from __future__ import annotations


def migrate_topic(step, logs: str, dest: str, topic: str) -> None:
    """One local-engine Delta migration of ``topic`` from ``logs`` into ``dest``."""
    from kafkalog_spark.delta import migrate

    migrate(logs, dest, topics=[topic], step=step)
