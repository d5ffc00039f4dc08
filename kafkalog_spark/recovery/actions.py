"""Planned repair steps (recovery layer): what ``recover``/``rebuild-index`` will do, as data.

A plan is a list of :class:`Action`; a dry run prints it, ``--execute`` runs it in order with
:func:`execute`. Every action is crash-safe on its own (one rename, one atomic file replace, or a
quarantine copy recorded before the bytes leave the log dir), and plans are recomputed from the
disk, so a run killed between (or inside) actions is completed by the next run. ``step(label)``
is called before every durable operation: progress output, and the hook tests use to simulate a
crash at each point.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import InvalidOptionError, Location, LogDirError
from ..storage import storage_for
from ..storage.atomic import atomic_write_bytes
from .quarantine import Quarantine

QUARANTINE_FILE = "quarantine-file"  # move a whole file into the quarantine
CUT_TAIL = "cut-tail"  # copy [start, end) into the quarantine, then truncate at start
WRITE_FILE = "write-file"  # replace (or create) a derived file; old content kept in quarantine
RENAME = "rename"  # a swap pass rename
SALVAGE = "salvage-segment"  # rewrite a segment without its damaged ranges (recover --salvage;
# carried out by recovery.salvage.execute_salvage, never by execute())
SPLIT = "split-segment"  # split an offset-overflowed segment (recovery.split.execute_split)

Step = Callable[[str], None]


@dataclass(frozen=True)
class Action:
    """One planned change to a log dir."""

    kind: str
    path: str
    reason: str
    start: int | None = None
    end: int | None = None
    target: str | None = None
    content: bytes | None = field(default=None, repr=False, compare=False)

    def to_dict(self) -> dict:
        d = {"action": self.kind, "path": self.path, "reason": self.reason}
        if self.start is not None:
            d["start"], d["end"] = self.start, self.end
        if self.target is not None:
            d["target"] = self.target
        if self.content is not None:
            d["bytes"] = len(self.content)
        return d

    def describe(self) -> str:
        if self.kind == CUT_TAIL:
            return f"cut {self.path} at byte {self.start} (quarantine {self.end - self.start} bytes): {self.reason}"
        if self.kind == QUARANTINE_FILE:
            return f"quarantine {self.path}: {self.reason}"
        if self.kind == RENAME:
            return f"rename {self.path} -> {Path(self.target).name}: {self.reason}"
        if self.kind == SALVAGE:
            return f"salvage {self.path}: {self.reason}"
        if self.kind == SPLIT:
            return f"split {self.path}: {self.reason}"
        return f"write {self.path} ({len(self.content or b'')} bytes): {self.reason}"


def execute(actions: Sequence[Action], quarantine: Quarantine, step: Step | None = None) -> None:
    """Run ``actions`` in order.

    Parameters
    ----------
    actions : sequence of Action
        A plan from :mod:`~kafkalog_spark.recovery.recover` or
        :mod:`~kafkalog_spark.recovery.rebuild`.
    quarantine : Quarantine
        Receives every byte removed or overwritten.
    step : callable, optional
        Called with a label before every durable operation.

    Raises
    ------
    LogDirError
        An action failed on the file system (full disk, a file size limit, a file removed by
        someone else); the message names the action and the file. What ran before stays done
        and the failed action left its file as it was or in its quarantine, so the next run
        plans from there.
    """
    def say(label: str) -> None:
        if step is not None:
            step(label)

    for a in actions:
        try:
            _run(a, quarantine, say)
        except OSError as exc:
            name = exc.filename if exc.filename is not None else a.path
            raise LogDirError(f"{a.describe()} failed: {exc.strerror or exc}",
                              Location(os.fspath(name))) from exc


def _run(a: Action, quarantine: Quarantine, say: Callable[[str], None]) -> None:
    """One action (see :func:`execute`)."""
    path = Path(a.path)
    fs = storage_for(path)
    if a.kind == QUARANTINE_FILE:
        if fs.exists(path):
            quarantine.move_file(path, a.reason)
    elif a.kind == CUT_TAIL:
        assert a.start is not None and a.end is not None
        if fs.stat(path).st_size > a.start:
            quarantine.save_range(path, a.start, a.end, a.reason)
            say(f"truncate {path} at {a.start}")
            fs.truncate(path, a.start)
    elif a.kind == WRITE_FILE:
        assert a.content is not None
        if fs.exists(path):
            if fs.read_bytes(path) == a.content:
                return
            if fs.stat(path).st_size:
                quarantine.save_copy(path, f"content before rewrite: {a.reason}")
        say(f"write {path}")
        atomic_write_bytes(path, a.content)
    elif a.kind == RENAME:
        assert a.target is not None
        say(f"rename {path} -> {a.target}")
        fs.rename(path, a.target)
    else:
        raise InvalidOptionError(f"unknown action kind {a.kind!r}; valid: {QUARANTINE_FILE}, "
                                 f"{CUT_TAIL}, {WRITE_FILE}, {RENAME}")
