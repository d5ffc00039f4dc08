"""What a table's Delta log says about kafkalog runs (Delta layer): the run id each commit
carries and the application transactions recorded, whichever writer committed.

delta-rs commits carry ``kafkalog.runId`` as a key of their commit info; delta-spark cannot add
a key there, so its commits carry the same keys as JSON in the commit's ``userMetadata``
(Delta's ``userMetadata`` write option). Both writers record the offsets reached as ``txn``
actions with app ids ``<prefix>:<topic>:<partition>``. Takes commit infos (``DeltaTable.
history()`` entries) and a table folder; imports nothing of its room.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path

from ..storage import storage_for

RUN_ID_KEY = "kafkalog.runId"
LOG_DIR = "_delta_log"


def kafkalog_metadata(commit_info: dict) -> dict:
    """The ``kafkalog.*`` keys of a commit: top-level ones (delta-rs) and those in its
    ``userMetadata`` JSON (delta-spark)."""
    found = {k: v for k, v in commit_info.items() if k.startswith("kafkalog.")}
    user = commit_info.get("userMetadata")
    if isinstance(user, str) and "kafkalog." in user:
        try:
            parsed = json.loads(user)
        except ValueError:  # someone else's userMetadata that merely mentions the name
            parsed = None
        if isinstance(parsed, dict):
            found.update((k, v) for k, v in parsed.items() if k.startswith("kafkalog."))
    return found


def run_id_of(commit_info: dict) -> str | None:
    """The kafkalog run id a commit carries, or ``None``."""
    run_id = kafkalog_metadata(commit_info).get(RUN_ID_KEY)
    return None if run_id is None else str(run_id)


def run_commits(history: Iterable[dict], after: int, run_id: str) -> list[dict]:
    """The commits newer than version ``after`` that run ``run_id`` made, oldest first."""
    return sorted((h for h in history if h.get("version", -1) > after and run_id_of(h) == run_id),
                  key=lambda h: h["version"])


def has_app_transactions(table: Path, prefix: str, lookback: int) -> bool:
    """Whether one of the table's last ``lookback`` JSON commits records an application
    transaction whose app id starts with ``<prefix>:`` (a table kafkalog's delta-spark writer
    made before its commits carried the run id)."""
    fs = storage_for(table)
    log = table / LOG_DIR
    commits = sorted(n for n in fs.listdir(log) if n.endswith(".json"))[-lookback:]
    needle = f'"appId":"{prefix}:'
    for name in reversed(commits):
        for line in fs.read_text(log / name).splitlines():
            if line.startswith('{"txn"') and needle in line.replace(" ", ""):
                return True
    return False
