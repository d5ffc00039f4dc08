"""Which storage holds a path (storage layer): :func:`storage_for` dispatches between the local
file system (:mod:`.local`) and the object stores (:mod:`.remote`); the path helpers every
caller uses on user-given paths."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import Location, LogDirError
from .local import LOCAL, LocalStorage
from .paths import ObjectPath, UserPath, as_path, is_remote
from .remote import RemoteStorage, remote_storage

if TYPE_CHECKING:  # numpy is imported when a file is first mapped: the CLI's start stays light
    import numpy as np

PathLike = str | os.PathLike[str]


_VIRTUAL: dict[type, Callable[[Any], Any]] = {}


def register_storage(path_type: type, storage: Callable[[Any], Any]) -> None:
    """Serve paths of ``path_type`` by ``storage(path)``: files an upper layer builds from
    stored objects (an Aiven remote segment's ``.log`` restored from its chunks,
    :mod:`kafkalog_spark.tiered.aiven_storage`), read with the seam's read methods."""
    _VIRTUAL[path_type] = storage


def storage_for(path: PathLike | ObjectPath) -> LocalStorage | RemoteStorage:
    """The storage that holds ``path``: :class:`~.remote.RemoteStorage` for an
    ``ObjectPath`` or an object-store URI (with the path's options), a registered storage for
    a virtual path (:func:`register_storage`), else :data:`LOCAL`."""
    virtual = _VIRTUAL.get(type(path))
    if virtual is not None:
        return virtual(path)
    if isinstance(path, ObjectPath) or is_remote(path):
        return remote_storage(path)
    return LOCAL


def is_local(storage: LocalStorage | RemoteStorage) -> bool:
    """Whether ``storage`` is the local file system (maps, atomic renames, locks)."""
    return isinstance(storage, LocalStorage)


def user_paths(paths: UserPath | Sequence[UserPath],
               storage_options: Mapping[str, str] | None = None) -> list[Path | ObjectPath]:
    """One path or a sequence of paths, each through :func:`as_path`; an object-store URI
    with ``*``, ``?`` or ``[`` is expanded (the shell expands local patterns)."""
    out: list[Path | ObjectPath] = []
    for p in [paths] if isinstance(paths, (str, os.PathLike, ObjectPath)) else paths:
        path = as_path(p, storage_options)
        fs = storage_for(path)
        if isinstance(path, ObjectPath) and fs.is_pattern(str(path)):
            hits = fs.glob_pattern(str(path))
            if not hits:
                raise LogDirError("the pattern matches nothing", Location(file=str(path)))
            out += [ObjectPath(h, path.options) for h in hits]
        else:
            out.append(path)
    return out


def mapped_file(path: PathLike | ObjectPath) -> AbstractContextManager[np.ndarray]:
    """``storage_for(path).mapped(path)``: the file as a read-only ``uint8`` array."""
    return storage_for(path).mapped(path)
