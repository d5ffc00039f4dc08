"""The one storage seam (storage layer).

Every byte the package reads from or writes to a file system passes through here — listings, stats, reads and maps, whole-file and streamed writes,
fsync, atomic renames and exchanges, removal, directories, locks, and the crash-safe write
protocols built on them (atomic file replacement, marked uploads).

May import: ``errors`` and ``codec`` (Kafka's file names). Imported by everything above.

Callers never open a path themselves (``tests/test_layers.py`` walks the package's syntax trees
and fails on a direct file-system call anywhere else). They ask :func:`storage_for` for the
storage that holds a user-given path and call its methods. The local file system is
:mod:`.local`; object stores (S3, GCS, Azure through ``pyarrow.fs``) are :mod:`.remote`, with
the same methods: what they cannot do atomically (rename, exchange, lock) they refuse.
Object-store paths are :class:`~.paths.ObjectPath`, which carry their store options and are not
``os.PathLike``, so no code can open one as a local file by mistake.

Rooms: :mod:`.local`, :mod:`.remote` (+ :mod:`.remote_io`), :mod:`.paths`, :mod:`.options`
(object-store options), :mod:`.seam` (which storage holds a path), :mod:`.atomic`, :mod:`.lock`,
:mod:`.upload`. This module re-exports the seam's API; modules inside the room import their
siblings directly, never this package.
"""

from .local import LOCAL, LocalStorage
from .paths import ObjectPath, UserPath, absolute_name, as_path, is_remote
from .seam import is_local, mapped_file, storage_for, user_paths

__all__ = ["LOCAL", "LocalStorage", "ObjectPath", "UserPath", "absolute_name", "as_path",
           "is_local", "is_remote", "mapped_file", "storage_for", "user_paths"]
