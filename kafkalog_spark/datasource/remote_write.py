"""``df.write.format("kafkalog")`` to an object store (Spark layer): a new log dir, uploaded.

An object store has no rename, so tasks cannot stage next to the log dir and the driver cannot
publish by renames. Instead each task stages its rows on its own disk exactly as for a local
write (:meth:`~.writer.KafkaLogWriter.stage`), uploads the staged folder to a staging prefix
next to the destination (``.<name>.kafkalog-staging-<job id>/task-...``) and sends the staged
description with those URIs. The driver's commit downloads the staged segments of the attempts
Spark kept, publishes them into a log dir on its own disk (the same :func:`~.log.publish.publish`
as every write), and uploads it under the writing markers (:mod:`kafkalog_spark.log.upload`):
readers see no partition before all of its files are there. The staging prefix is deleted at
the end (also on abort). The output passes through the driver's disk once: for very large
outputs write to a shared disk and upload.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

import pyarrow as pa

from ..log.publish import publish
from ..log.staging import StagedPartition
from ..log.storage import LOCAL, as_path, storage_for
from ..log.upload import download_tree, upload_log_dir, upload_tree
from ..log.writer import metrics

if TYPE_CHECKING:
    from .writer import KafkaLogCommitMessage, KafkaLogWriter


def stage_and_upload(writer: "KafkaLogWriter", iterator: Iterator[pa.RecordBatch], pid: int,
                     attempt: int) -> "KafkaLogCommitMessage":
    """In a task: stage on this machine's disk, upload to the staging prefix, and describe the
    staged partitions by their URIs."""
    staging = as_path(writer.staging, writer.remote.options)
    with LOCAL.temp_dir("kafkalog-task-") as tmp:
        message = writer.stage(iterator, pid, attempt, Path(tmp))
        upload_tree(Path(tmp), staging)
        moved = tuple(replace(s, directory=str(staging / str(Path(s.directory).relative_to(tmp))))
                      for s in message.staged)
    return replace(message, staged=moved)


def publish_and_upload(writer: "KafkaLogWriter",
                       messages: list["KafkaLogCommitMessage | None"]) -> dict:
    """On the driver: fetch the kept attempts' staged partitions, publish them into a log dir
    on this disk, upload it to the destination; returns the write's metrics."""
    dest, staging = writer.remote, as_path(writer.staging, writer.remote.options)
    try:
        with LOCAL.temp_dir("kafkalog-publish-") as tmp:
            local_staging, log_dir = Path(tmp) / "staging", Path(tmp) / "log"
            LOCAL.make_dirs(log_dir)
            LOCAL.make_dirs(local_staging)
            staged: list[StagedPartition] = []
            for s in (s for m in messages if m is not None for s in m.staged):
                src = as_path(s.directory, dest.options)
                here = local_staging / str(src.relative_to(staging))
                download_tree(src, here)
                staged.append(replace(s, directory=str(here)))
            topic_ids = ({writer.options.topic: writer.options.topic_id}
                         if writer.options.topic_id is not None else None)
            written = publish(log_dir, staged, mode="append",
                              leader_epoch=writer.options.settings.leader_epoch,
                              topic_ids=topic_ids, staging=local_staging)
            upload_log_dir(log_dir, dest)
        return metrics(written)
    finally:
        storage_for(dest).remove_tree(staging, ignore_errors=True)
