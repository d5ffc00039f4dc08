"""What Spark tasks check where they run, and how their errors reach the driver (datasource
layer): a path the driver planned from must exist on every executor, and a task's typed error
comes back as the same error, not as a Java stack trace."""

from __future__ import annotations

import os
import re
import socket
from collections.abc import Iterator
from contextlib import contextmanager

from .. import errors as E
from ..errors import KafkaLogError, Location, PathNotSharedError
from ..storage import as_path, storage_for

_SHARED = ("it must be on storage every executor reaches under the same path: a shared file "
           "system mounted alike on every host, or object storage")
# the last "kafkalog_spark.errors.<Name>: <message>" line of a Python traceback in a task failure
_TASK_ERROR = re.compile(r"kafkalog_spark\.errors\.(\w+): (.+)")


def require_visible(path: str | os.PathLike[str], what: str) -> None:
    """In a task: raise :class:`PathNotSharedError` unless ``path`` (which the driver saw) is
    a folder here too."""
    if not storage_for(path).is_dir(path):
        raise PathNotSharedError(f"the {what} exists where the job was planned but not on the "
                                 f"executor on host {socket.gethostname()}: {_SHARED}",
                                 Location(str(path)))


def task_attempt() -> int:
    """The Spark task attempt running this code (0 outside Spark): names an attempt's own
    output, which no other attempt of the task can truncate."""
    from pyspark import TaskContext

    ctx = TaskContext.get()
    return ctx.taskAttemptId() if ctx is not None else 0


@contextmanager
def planned_files(partition_dir: str | os.PathLike[str]) -> Iterator[None]:
    """In a task reading files the driver listed under ``partition_dir``: a file that cannot
    be opened because the whole log dir is missing here becomes :class:`PathNotSharedError`
    (a file deleted since planning keeps its own error)."""
    try:
        yield
    except (KafkaLogError, OSError) as exc:
        log_dir = as_path(partition_dir).parent
        if not isinstance(exc, PathNotSharedError) and not storage_for(log_dir).is_dir(log_dir):
            raise PathNotSharedError(f"the log dir exists where the job was planned but not on "
                                     f"the executor on host {socket.gethostname()}: {_SHARED}",
                                     Location(str(log_dir))) from exc
        raise


@contextmanager
def task_errors() -> Iterator[None]:
    """On the driver, around a Spark action: a task that failed with one of this package's
    errors (after Spark's retries) raises that error here, with the task's message."""
    try:
        yield
    except KafkaLogError:
        raise
    except Exception as exc:  # Py4JJavaError, pyspark's captured exceptions
        found = _TASK_ERROR.findall(str(exc))
        cls = getattr(E, found[-1][0], None) if found else None
        if not (isinstance(cls, type) and issubclass(cls, KafkaLogError)):
            raise
        raise _rebuilt(cls, found[-1][1].strip()) from None


def _rebuilt(cls: type[KafkaLogError], message: str) -> KafkaLogError:
    """``cls`` carrying a task's rendered message as is (its location is already in it)."""
    err = cls.__new__(cls)
    Exception.__init__(err, message)
    err.reason, err.location = message, Location()
    return err
