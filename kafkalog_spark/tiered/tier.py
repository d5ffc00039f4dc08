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
                           encrypted); before 2023-10 one object per index instead of .indexes
"""

from __future__ import annotations

import os
from collections.abc import Callable, Container, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from ..errors import InvalidOptionError, Location, RemoteTierError
from ..storage import ObjectPath, as_path, storage_for
from ..storage.paths import is_remote

LOCAL_TIERED_STORAGE = "local-tiered-storage"
AIVEN = "aiven"
LAYOUTS = (LOCAL_TIERED_STORAGE, AIVEN)
LTS_ROOT = "kafka-tiered-storage"  # LocalTieredStorage's folder under its rsm.config.dir
# layouts not read yet (an option naming one is refused, saying so)
NOT_YET: dict[str, str] = {}


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
class Listing:
    """A partition folder's segments found by listing it, and what was left out (why)."""

    segments: tuple[RemoteSegment, ...]
    incomplete: tuple[str, ...]  # "<offset>-<id>: no .index" ...


def listing(objects: Mapping[tuple[int, str], Container[str]],
            required: Sequence[str] | Callable[[Container[str]], Sequence[str]],
            make: Callable[[int, str, Any], RemoteSegment]) -> Listing:
    """The segments of a listed folder (``(start offset, segment id) -> kinds of file or
    object present``) that have every ``required`` kind (or every kind ``required(kinds)``
    names, for a layout whose segments come in variants), built by ``make(start, id, kinds)``,
    in start-offset order; a segment's end offset is the next listed start above its own minus
    one — an incomplete segment's too, so that its offsets are a gap, never folded into the
    segment before it (the last one's end is not known)."""
    found, incomplete = [], []
    starts = sorted({start for start, _ in objects})
    for (start, seg_id), kinds in sorted(objects.items()):
        needed = required(kinds) if callable(required) else required
        missing = [k for k in needed if k not in kinds]
        if missing:
            incomplete.append(f"{start:020d}-{seg_id}: no {', '.join('.' + k for k in missing)}")
            continue
        later = starts.index(start) + 1
        found.append(replace(make(start, seg_id, kinds),
                             end_offset=starts[later] - 1 if later < len(starts) else None))
    return Listing(tuple(found), tuple(incomplete))


@dataclass(frozen=True)
class RemoteTier:
    """A remote tier: ``root`` is the folder (or object-store prefix) the layout starts at —
    for LocalTieredStorage the ``kafka-tiered-storage`` folder itself."""

    root: os.PathLike[str] | ObjectPath
    layout: str
    uri: str  # as the user gave it, for messages
    # files of the RSA private keys (PEM) that unwrap encrypted segments' data keys: read when
    # such a segment is met, never shown
    private_keys: tuple[str, ...] = field(default=(), repr=False)

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
                storage_options: Mapping[str, str] | None = None,
                private_keys: Sequence[str | os.PathLike[str]] = ()) -> RemoteTier:
    """The tier at ``uri`` in ``layout``, checked: the layout is known and the folder is there.

    For ``local-tiered-storage`` ``uri`` is LocalTieredStorage's ``rsm.config.dir`` (holding
    ``kafka-tiered-storage/``) or that ``kafka-tiered-storage`` folder itself; for ``aiven``
    the bucket or folder with the key prefix (a folder: the prefix ends in ``/``).
    ``private_keys``: PEM files of the RSA keys of encrypted (aiven) segments.

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
    keys = tuple(str(k) for k in private_keys)
    for k in keys:
        if not storage_for(k).is_file(k):
            raise InvalidOptionError(f"remote tier private key file not found: {k}")
    if layout == AIVEN:
        return RemoteTier(path, layout, str(uri), keys)
    if path.name != LTS_ROOT:
        if not fs.is_dir(path / LTS_ROOT):
            raise RemoteTierError(
                f"not a LocalTieredStorage tier: no {LTS_ROOT}/ folder here (give "
                f"LocalTieredStorage's rsm.config.dir, or the {LTS_ROOT} folder in it)",
                Location(str(uri)))
        path = path / LTS_ROOT
    return RemoteTier(path, layout, str(uri), keys)


def as_remote_tier(value: RemoteTier | str | os.PathLike[str] | ObjectPath | None,
                   layout: str | None = None,
                   storage_options: Mapping[str, str] | None = None,
                   private_keys: str | Sequence[str] | None = None) -> RemoteTier | None:
    """A tier as the readers take it: ``None`` (no tier), a :class:`RemoteTier`, or its
    URI with ``layout`` (default ``local-tiered-storage``) and private key files (paths, or
    one string of comma-separated paths). A layout or key without a tier is an error, not
    ignored."""
    keys = tuple(k.strip() for k in private_keys.split(",") if k.strip()) \
        if isinstance(private_keys, str) else tuple(private_keys or ())
    if value is None:
        if keys:
            raise InvalidOptionError("a remote tier private key without a remote tier: name "
                                     "the tier too (remote_tier= / remoteTier / --remote-tier)")
        if layout is not None:
            raise InvalidOptionError(f"a remote tier layout ({layout!r}) without a remote tier: "
                                     "name the tier too (remote_tier= / remoteTier / "
                                     "--remote-tier)")
        return None
    if isinstance(value, RemoteTier):
        return value
    return remote_tier(value, layout or LOCAL_TIERED_STORAGE, storage_options, keys)
