"""New log dirs on object storage (storage layer): written on a local disk, then uploaded whole.

An object store has no rename, so a log dir cannot be assembled in place and published
atomically the way :mod:`kafkalog_spark.log.publish` does on a disk. :func:`write_remote` has
the log dir written into a local temporary folder (by the writer it is given), then
:func:`upload_log_dir` puts every file whole under the destination prefix, marked while it does
so: a ``.kafkalog-writing`` object in the log dir and in each partition dir is put *before* the
first data file and deleted *after* the last one. Discovery refuses a log dir or partition dir
holding that marker (:data:`~kafkalog_spark.codec.files.naming.WRITING_MARKER`), so a reader
sees a partition only once every file of it is there, and a failed or killed upload stays
visible as what it is (delete the prefix and write again) — never as a partial partition. Only
a new (empty) prefix is written: appending to a log dir on an object store would change it in
place.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path

from ..codec.files.naming import WRITING_MARKER
from ..errors import Location, LogDirError
from .local import LOCAL
from .paths import ObjectPath
from .seam import storage_for


def require_new_prefix(dest: ObjectPath) -> None:
    """Refuse a destination prefix that holds objects already."""
    fs = storage_for(dest)
    if fs.exists(dest) and fs.listdir(dest):
        raise LogDirError("an object-store log dir is written once, to a new prefix; this one "
                          "holds objects already (appending would change it in place: copy it "
                          "to a local disk, write there, upload the result)",
                          Location(file=str(dest)))


def write_remote(dest: ObjectPath, write: Callable[[Path], dict]) -> dict:
    """Run ``write(folder)`` on a local temporary folder, then upload it to ``dest``, which
    must be a new or empty prefix; returns what ``write`` returned."""
    require_new_prefix(dest)
    with LOCAL.temp_dir("kafkalog-upload-") as tmp:
        result = write(Path(tmp))
        upload_log_dir(Path(tmp), dest)
    return result


def upload_log_dir(local: Path, dest: ObjectPath) -> int:
    """Upload the log dir ``local`` to ``dest`` under the marker protocol (module docstring);
    returns the number of files put."""
    fs = storage_for(dest)
    marker = json.dumps({"started": time.time()}).encode()
    with LOCAL.scandir(local) as it:
        entries = sorted(it, key=lambda e: e.name)
    folders = [e.name for e in entries if e.is_dir()]
    files = [e.name for e in entries if e.is_file()]
    fs.write_whole(dest / WRITING_MARKER, marker)
    for name in folders:
        fs.write_whole(dest / name / WRITING_MARKER, marker)
    put = 0
    for name in folders:
        for f in sorted(LOCAL.listdir(local / name)):
            fs.concat([local / name / f], dest / name / f)
            put += 1
        fs.remove(dest / name / WRITING_MARKER)
    for name in files:
        fs.concat([local / name], dest / name)
        put += 1
    fs.remove(dest / WRITING_MARKER)
    return put


def upload_tree(local: Path, dest: ObjectPath) -> None:
    """Put every file below the local folder ``local`` under ``dest`` (same relative names)."""
    fs = storage_for(dest)
    for f in LOCAL.glob(local, "**/*"):
        if LOCAL.is_file(f):
            fs.concat([f], dest / str(f.relative_to(local)))


def download_tree(src: ObjectPath, local: Path) -> None:
    """Get every object below ``src`` into the local folder ``local`` (created)."""
    for obj in storage_for(src).list_files(src):
        target = local / str(obj.relative_to(src))
        LOCAL.make_dirs(target.parent)
        with storage_for(obj).open_read(obj) as f:
            LOCAL.write_stream(f, target)
