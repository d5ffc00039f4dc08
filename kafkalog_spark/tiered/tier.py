"""A remote tier as the user names it (tier layer): its root folder or bucket URI and its layout,
checked once (:func:`remote_tier`).

Layouts (TIERED_STORAGE.md)::

    local-tiered-storage   Kafka's LocalTieredStorage: <dir>/kafka-tiered-storage/
                           <topic>-<partition>-<topic id>/<20-digit offset>-<segment id>.<suffix>
                           byte copies of the broker's .log, .index, .timeindex, .txnindex,
                           .snapshot and a .leader_epoch_checkpoint
    aiven                  Aiven's tiered-storage-for-apache-kafka (segment.format=kafka):
                           <prefix><topic>-<topic id>/<partition>/<20-digit offset>-<segment id>
                           .log / .indexes / .rsm-manifest (chunked, maybe compressed and
                           encrypted)
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

from ..errors import InvalidOptionError, Location, RemoteTierError
from ..storage import ObjectPath, as_path, storage_for
from ..storage.paths import is_remote

LOCAL_TIERED_STORAGE = "local-tiered-storage"
AIVEN = "aiven"
LAYOUTS = (LOCAL_TIERED_STORAGE, AIVEN)
LTS_ROOT = "kafka-tiered-storage"  # LocalTieredStorage's folder under its rsm.config.dir
# what each layout is not yet read for (an option naming it is refused, saying so)
NOT_YET = {AIVEN: "the aiven layout is not read yet (only local-tiered-storage is); see "
                  "docs/tiered-storage.md"}


@dataclass(frozen=True)
class RemoteSegment:
    """One remote segment's files, whatever the layout: where its ``.log`` bytes are (for
    LocalTieredStorage a byte copy named ``<offset>-<segment id>.log`` with its indexes named
    alike beside it) and the offsets it holds (``end_offset`` ``None``: not known from a
    listing)."""

    segment_id: str
    start_offset: int
    end_offset: int | None
    folder: os.PathLike[str] | ObjectPath
    log_name: str
    log_size: int
    mtime: float
    index_size: int | None = None
    timeindex_size: int | None = None
    txnindex_size: int | None = None
    state: str = "listed"  # the metadata's state name, or "listed" (found by listing the tier)

    @property
    def log(self) -> os.PathLike[str] | ObjectPath:
        return self.folder / self.log_name  # type: ignore[operator]


@dataclass(frozen=True)
class RemoteTier:
    """A remote tier: ``root`` is the folder (or object-store prefix) the layout starts at —
    for LocalTieredStorage the ``kafka-tiered-storage`` folder itself."""

    root: os.PathLike[str] | ObjectPath
    layout: str
    uri: str  # as the user gave it, for messages

    def describe(self) -> str:
        return f"remote tier {self.uri} ({self.layout})"


def check_layout(layout: str) -> str:
    """``layout`` if it is a layout this version reads, else :class:`InvalidOptionError`."""
    if layout not in LAYOUTS:
        raise InvalidOptionError(f"remote tier layout must be one of {', '.join(LAYOUTS)}; "
                                 f"got {layout!r}")
    if layout in NOT_YET:
        raise InvalidOptionError(NOT_YET[layout])
    return layout


def remote_tier(uri: str | os.PathLike[str] | ObjectPath, layout: str = LOCAL_TIERED_STORAGE,
                storage_options: Mapping[str, str] | None = None) -> RemoteTier:
    """The tier at ``uri`` in ``layout``, checked: the layout is known and the folder is there.

    For ``local-tiered-storage`` ``uri`` is LocalTieredStorage's ``rsm.config.dir`` (holding
    ``kafka-tiered-storage/``) or that ``kafka-tiered-storage`` folder itself.

    Raises
    ------
    InvalidOptionError
        An unknown layout, or one not read yet.
    RemoteTierError
        No such folder, or not that layout's folder.
    """
    check_layout(layout)
    path = uri if isinstance(uri, ObjectPath) else as_path(
        os.fspath(uri), storage_options if is_remote(os.fspath(uri)) else None)
    fs = storage_for(path)
    if not fs.is_dir(path):
        raise RemoteTierError(f"remote tier not found: {fs.missing_reason(path)}",
                              Location(str(uri)))
    if not isinstance(path, ObjectPath):
        path = fs.resolve(path)  # Spark tasks and messages get the absolute folder
    if path.name != LTS_ROOT:
        if not fs.is_dir(path / LTS_ROOT):
            raise RemoteTierError(
                f"not a LocalTieredStorage tier: no {LTS_ROOT}/ folder here (give "
                f"LocalTieredStorage's rsm.config.dir, or the {LTS_ROOT} folder in it)",
                Location(str(uri)))
        path = path / LTS_ROOT
    return RemoteTier(path, layout, str(uri))


def as_remote_tier(value: RemoteTier | str | os.PathLike[str] | ObjectPath | None,
                   layout: str | None = None,
                   storage_options: Mapping[str, str] | None = None) -> RemoteTier | None:
    """A tier as the readers take it: ``None`` (no tier), a :class:`RemoteTier`, or its
    URI with ``layout`` (default ``local-tiered-storage``). A layout without a tier is an
    error, not ignored."""
    if value is None:
        if layout is not None:
            raise InvalidOptionError(f"a remote tier layout ({layout!r}) without a remote tier: "
                                     "name the tier too (remote_tier= / remoteTier / "
                                     "--remote-tier)")
        return None
    if isinstance(value, RemoteTier):
        return value
    return remote_tier(value, layout or LOCAL_TIERED_STORAGE, storage_options)
