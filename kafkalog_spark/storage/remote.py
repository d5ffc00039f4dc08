"""Object storage behind the storage seam (storage layer): S3, GCS and Azure through ``pyarrow.fs``.

:class:`RemoteStorage` implements the seam's methods (see ``storage.py``) on a
``pyarrow.fs.FileSystem`` for paths given as :class:`~.paths.ObjectPath`. What an object
store cannot do atomically (rename, exchange, record locks, truncate, in-place update) it
refuses with :class:`~kafkalog_spark.errors.RemoteStorageError`: in-place maintenance needs a
local copy. Reads keep the seam's contract: ``OSError``s naming the URI (never a secret), with
what to do (:func:`store_error`). Every request is counted (:class:`RequestCounter`).

Why ``pyarrow.fs`` rather than fsspec: it is already a dependency, its S3/GCS/Azure clients are
C++ (ranged reads release the GIL, retries and timeouts are built in), and pyarrow's Parquet
writer takes the same file system object.
"""

from __future__ import annotations

import errno
import fnmatch
import os
import stat as stat_module
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, nullcontext
from typing import Any, BinaryIO

from .local import LOCAL
from .options import build_filesystem, refuse, store_error
from .paths import ObjectPath, is_remote
from .remote_io import RemoteEntry, RemoteStat, RequestCounter, match_parts, remote_stat
from .remote_reads import RemoteReads, _obj


class RemoteStorage(RemoteReads):
    """The seam's methods on one object store (one ``pyarrow.fs.FileSystem``).

    Obtain through :func:`~kafkalog_spark.storage.storage_for`; instances are cached per
    store and options, so the client (connection pool, credentials) is built once per process.
    """

    def __init__(self, store: str, options: Mapping[str, str], account: str = "") -> None:
        self.store, self.options, self.account = store, dict(options), account
        self._fs = None
        self._lock = threading.Lock()
        self.requests = RequestCounter()

    # --- the client ---------------------------------------------------------------------------

    @property
    def arrow_fs(self):
        """The ``pyarrow.fs.FileSystem`` (built on first use; paths are ``bucket/key``)."""
        with self._lock:
            if self._fs is None:
                self._fs = build_filesystem(self.store, self.options, self.account)
            return self._fs

    def arrow_path(self, path: ObjectPath | str) -> str:
        return _obj(path).arrow_path

    def _call(self, path: ObjectPath | str, what: str, fn: Callable[[], Any]) -> Any:
        """Run one store call, mapping its errors to ``OSError``s that name the URI."""
        try:
            return fn()
        except OSError as exc:
            raise store_error(exc, str(path), what) from None

    # --- listing and metadata -----------------------------------------------------------------

    def _info(self, path: ObjectPath | str):
        p = _obj(path)
        self.requests.count("head")
        return self._call(p, "stat", lambda: self.arrow_fs.get_file_info(p.arrow_path))

    def scandir(self, path: ObjectPath | str) -> AbstractContextManager[Iterator[RemoteEntry]]:
        """The objects and folders (common prefixes) right below ``path``. pyarrow's GCS
        listing shows no folder that has no marker object (what other tools upload), so on
        GCS the prefix is listed recursively and its folders taken from the object names."""
        p = _obj(path)
        from pyarrow.fs import FileSelector, FileType

        deep = self.store == "gs"
        self.requests.count("list")
        infos = self._call(p, "list", lambda: self.arrow_fs.get_file_info(
            FileSelector(p.arrow_path, recursive=deep, allow_not_found=False)))
        entries: dict[str, RemoteEntry] = {}
        prefix = p.arrow_path.rstrip("/") + "/"
        for info in infos:
            name, _, below = info.path[len(prefix):].partition("/")
            if not name:
                continue
            is_dir = bool(below) or info.type == FileType.Directory
            if name not in entries or is_dir:
                stat = remote_stat(info) if not below else RemoteStat(0, 0.0, stat_module.S_IFDIR)
                entries[name] = RemoteEntry(name, str(p / name), is_dir, stat)
        return nullcontext(iter(entries.values()))

    def listdir(self, path: ObjectPath | str) -> list[str]:
        with self.scandir(path) as it:
            return [e.name for e in it]

    def glob(self, path: ObjectPath | str, pattern: str) -> list[ObjectPath]:
        """Objects below ``path`` whose relative key matches ``pattern`` (``*`` stays inside
        one level; a leading ``**/`` matches any depth), sorted."""
        p = _obj(path)
        from pyarrow.fs import FileSelector

        self.requests.count("list")
        infos = self._call(p, "list", lambda: self.arrow_fs.get_file_info(
            FileSelector(p.arrow_path, recursive=True, allow_not_found=True)))
        prefix = p.arrow_path + "/"
        deep = pattern.startswith("**/")
        tail = pattern[3:] if deep else pattern
        hits = []
        for info in infos:
            rel = info.path[len(prefix):] if info.path.startswith(prefix) else None
            if rel is None:
                continue
            if deep:
                ok = fnmatch.fnmatchcase(rel.rsplit("/", 1)[-1], tail) if "/" not in tail else \
                    match_parts(rel, tail, any_depth=True)
            else:
                ok = match_parts(rel, tail)
            if ok:
                hits.append(p / rel)
        return sorted(hits)

    def list_files(self, path: ObjectPath | str) -> list[ObjectPath]:
        """Every object below ``path`` (any depth), sorted; no folders."""
        p = _obj(path)
        from pyarrow.fs import FileSelector, FileType

        self.requests.count("list")
        infos = self._call(p, "list", lambda: self.arrow_fs.get_file_info(
            FileSelector(p.arrow_path, recursive=True, allow_not_found=True)))
        prefix = p.arrow_path.rstrip("/") + "/"
        return sorted(p / i.path[len(prefix):] for i in infos
                      if i.type == FileType.File and i.path.startswith(prefix))

    def is_pattern(self, text: str) -> bool:
        return any(c in text for c in "*?[")

    def glob_pattern(self, pattern: str) -> list[str]:
        """URIs matching a user pattern such as ``s3://b/logs-*/orders-*`` (sorted)."""
        root = ObjectPath(pattern.split("*")[0].split("?")[0].split("[")[0].rsplit("/", 1)[0],
                          self.options)
        rel = pattern[len(str(root)):].lstrip("/")
        from pyarrow.fs import FileSelector

        self.requests.count("list")
        infos = self._call(root, "list", lambda: self.arrow_fs.get_file_info(
            FileSelector(root.arrow_path, recursive=True, allow_not_found=True)))
        prefix = root.arrow_path + "/"
        out = {str(root / info.path[len(prefix):].rstrip("/"))
               for info in infos if info.path.startswith(prefix)
               and match_parts(info.path[len(prefix):], rel)}
        return sorted(out)

    def stat(self, path: ObjectPath | str) -> RemoteStat:
        from pyarrow.fs import FileType

        info = self._info(path)
        if info.type == FileType.NotFound:
            raise FileNotFoundError(errno.ENOENT, "no such object", str(path))
        return remote_stat(info)

    lstat = stat

    def size(self, path: ObjectPath | str) -> int:
        return self.stat(path).st_size

    def exists(self, path: ObjectPath | str) -> bool:
        from pyarrow.fs import FileType

        p = _obj(path)
        return not p.key or self._info(p).type != FileType.NotFound

    def is_file(self, path: ObjectPath | str) -> bool:
        from pyarrow.fs import FileType

        return bool(_obj(path).key) and self._info(path).type == FileType.File

    def missing_reason(self, path: ObjectPath | str) -> str:
        from pyarrow.fs import FileType

        p = _obj(path)
        if self._call(p, "stat", lambda: self.arrow_fs.get_file_info(p.bucket)).type \
                == FileType.NotFound:
            return f"no such bucket {p.bucket!r} (or no access to it)"
        return "no such object or folder under this prefix"

    def is_dir(self, path: ObjectPath | str) -> bool:
        from pyarrow.fs import FileType

        p = _obj(path)
        return self._info(p).type == FileType.Directory

    def is_symlink(self, path: ObjectPath | str) -> bool:
        return False

    def resolve(self, path: ObjectPath | str) -> ObjectPath:
        return _obj(path, self.options)

    def readlink(self, path: ObjectPath | str) -> str:
        raise OSError(errno.EINVAL, "object stores have no symlinks", str(path))

    def writable(self, path: ObjectPath | str) -> bool:
        return True  # known only by trying; a refused write names the URI

    def executable(self, path: ObjectPath | str) -> bool:
        return False

    # --- writing ------------------------------------------------------------------------------

    def create(self, path: ObjectPath | str) -> BinaryIO:
        """A new object, put whole when closed (refused if it exists)."""
        if self.exists(path):
            raise FileExistsError(errno.EEXIST, "object exists", str(path))
        return self.open_write(path)

    def open_write(self, path: ObjectPath | str) -> BinaryIO:
        p = _obj(path)
        self.requests.count("put")
        return self._call(p, "write", lambda: self.arrow_fs.open_output_stream(p.arrow_path))

    def close_durably(self, f: BinaryIO) -> None:
        f.close()  # the put completes on close: the object is durable or absent

    def write_whole(self, path: ObjectPath | str, data: bytes | memoryview, *,
                    exclusive: bool = False) -> None:
        f = self.create(path) if exclusive else self.open_write(path)
        try:
            f.write(data)
        finally:
            self._call(path, "write", f.close)

    def replace_whole(self, path: ObjectPath | str, data: bytes) -> None:
        """An object put is atomic: readers see the old or the new content, never a part."""
        self.write_whole(path, data)

    def truncate(self, path: ObjectPath | str, size: int) -> None:
        raise refuse(path, "truncate a file")

    def copy_file(self, src: ObjectPath | str, dst: ObjectPath | str, *,
                  durable: bool = False) -> None:
        self.concat([src], dst)

    def concat(self, sources: Sequence[ObjectPath | str | os.PathLike[str]],
               dst: ObjectPath | str) -> None:
        """Put the bytes of ``sources`` (objects or local files), one after the other, as
        ``dst`` (streamed; the object is visible once complete)."""
        out = self.open_write(dst)
        try:
            for src in sources:
                # a local file or an object (of this store or another); not seam.storage_for,
                # which imports this module
                fs = remote_storage(src) if is_remote(src) else LOCAL
                with fs.open_read(src) as f:
                    while chunk := f.read(8 << 20):
                        out.write(chunk)
        finally:
            self._call(dst, "write", out.close)

    def set_mtime(self, path: ObjectPath | str, mtime: float) -> None:
        raise refuse(path, "set a file's modification time")

    def fsync_dir(self, path: ObjectPath | str) -> None:
        return None  # no folders to make durable: every completed put is

    # --- renames, removal, folders ------------------------------------------------------------

    def rename(self, src: ObjectPath | str, dst: ObjectPath | str) -> None:
        raise refuse(src, "rename atomically")

    def exchange(self, a: ObjectPath | str, b: ObjectPath | str) -> bool:
        raise refuse(a, "exchange two files atomically")

    def remove(self, path: ObjectPath | str, *, missing_ok: bool = False) -> None:
        p = _obj(path)
        try:
            self._call(p, "delete", lambda: self.arrow_fs.delete_file(p.arrow_path))
        except FileNotFoundError:
            if not missing_ok:
                raise

    def remove_tree(self, path: ObjectPath | str, *, ignore_errors: bool = False) -> None:
        p = _obj(path)
        try:
            self._call(p, "delete", lambda: self.arrow_fs.delete_dir(p.arrow_path))
        except OSError:
            if not ignore_errors:
                raise

    def make_dirs(self, path: ObjectPath | str, *, exist_ok: bool = True,
                  mode: int = 0o777) -> None:
        p = _obj(path)
        if not exist_ok and self.exists(p):
            raise FileExistsError(errno.EEXIST, "exists", str(p))
        self._call(p, "create", lambda: self.arrow_fs.create_dir(p.arrow_path, recursive=True))

    def make_dir(self, path: ObjectPath | str, *, mode: int = 0o777) -> None:
        self.make_dirs(path, exist_ok=False)

    def make_dirs_below(self, root: ObjectPath | str, path: ObjectPath | str) -> None:
        if not self.exists(root):
            raise FileNotFoundError(errno.ENOENT, "no such folder", str(root))
        self.make_dirs(path)

    # --- process-local temporary folders: the local file system's ------------------------------

    def temp_root(self) -> str:
        return LOCAL.temp_root()

    def make_temp_dir(self, prefix: str) -> str:
        return LOCAL.make_temp_dir(prefix)

    def temp_dir(self, prefix: str) -> AbstractContextManager[str]:
        return LOCAL.temp_dir(prefix)

    # --- locks: none on object stores ------------------------------------------------------------

    def lock_owner(self, path: ObjectPath | str) -> int | None:
        return None  # no broker holds an object store's files open

    def lock(self, path: ObjectPath | str, *, record: bool = True) -> int | None:
        raise refuse(path, "hold a lock")

    def unlock(self, fd: int) -> None:  # pragma: no cover - lock() never succeeds
        return None


_CLIENTS: dict[tuple, RemoteStorage] = {}
_CLIENTS_LOCK = threading.Lock()


def remote_storage(path: ObjectPath | str) -> RemoteStorage:
    """The (cached) storage for an object-store path."""
    p = _obj(path)
    key = (p.store, p.account, tuple(sorted(p.options.items())))
    with _CLIENTS_LOCK:
        storage = _CLIENTS.get(key)
        if storage is None:
            storage = _CLIENTS[key] = RemoteStorage(p.store, p.options, p.account)
        return storage
