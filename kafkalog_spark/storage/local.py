"""The local file system (storage layer): :class:`LocalStorage`, with read-only ``mmap`` of
large files, ``renameat2(RENAME_EXCHANGE)`` on Linux and ``fcntl`` record locks as a broker
takes them, and :data:`LOCAL`, its one instance.

Methods keep the standard library's contract: they raise ``OSError`` (``FileNotFoundError``,
...) with the file name, which the callers map to typed errors where they know what the file
was for. Callers reach it through :func:`kafkalog_spark.storage.storage_for` (or use
:data:`LOCAL` for process-local files that are never log data: the numba cache, ``/proc``).
"""

from __future__ import annotations

import mmap
import os
import shutil
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO

from ..codec.files.naming import TMP_SUFFIX
from ..errors import Location, LogDirError
from .posix import PosixCalls

if TYPE_CHECKING:  # numpy is imported when a file is first mapped: the CLI's start stays light
    import numpy as np

PathLike = str | os.PathLike[str]

READ_BELOW_BYTES = 256 << 10
"""Files up to this size are read rather than mapped: mapping and unmapping cost more than
copying a few pages (a log dir of 40k small segments: ~50 µs per file mapped)."""

_COPY_CHUNK = 8 << 20


class LocalStorage(PosixCalls):
    """The local file system. Stateless; use the shared instance :data:`LOCAL`."""

    # --- listing and metadata ---------------------------------------------------------------

    def scandir(self, path: PathLike) -> AbstractContextManager[Iterator[os.DirEntry[str]]]:
        """The entries of a folder, each answering ``is_file()``, ``is_dir()``,
        ``is_symlink()`` from the listing and ``stat()`` with one cached call."""
        return os.scandir(path)

    def listdir(self, path: PathLike) -> list[str]:
        """The names in a folder, unsorted."""
        return os.listdir(path)

    def glob(self, path: PathLike, pattern: str) -> list[Path]:
        """Paths below ``path`` matching ``pattern`` (``pathlib`` rules), sorted."""
        return sorted(Path(path).glob(pattern))

    def is_pattern(self, text: str) -> bool:
        """Whether a user-given path is a pattern for :meth:`glob_pattern` (``*``, ``?``, ``[``)."""
        import glob

        return glob.has_magic(text)

    def glob_pattern(self, pattern: str) -> list[str]:
        """Paths matching a user-given shell pattern (``glob.glob`` rules), sorted."""
        import glob

        return sorted(glob.glob(pattern))

    def stat(self, path: PathLike) -> os.stat_result:
        """``stat`` following symlinks."""
        return os.stat(path)

    def lstat(self, path: PathLike) -> os.stat_result:
        """``stat`` of a symlink itself."""
        return os.lstat(path)

    def size(self, path: PathLike) -> int:
        return os.stat(path).st_size

    # exists / is_* answer as pathlib does: False for a missing path, a non-directory parent or
    # a symlink loop; a refused stat (EACCES, EIO) raises instead of reading as "absent"

    def exists(self, path: PathLike) -> bool:
        return Path(path).exists()

    def is_file(self, path: PathLike) -> bool:
        return Path(path).is_file()

    def missing_reason(self, path: PathLike) -> str:
        return "no such file or directory"  # object stores say more: no bucket, no prefix

    def is_dir(self, path: PathLike) -> bool:
        return Path(path).is_dir()

    def is_symlink(self, path: PathLike) -> bool:
        return Path(path).is_symlink()

    def resolve(self, path: PathLike) -> Path:
        """The absolute path with every symlink resolved (``Path.resolve``)."""
        return Path(path).resolve()

    def readlink(self, path: PathLike) -> str:
        return os.readlink(path)

    def writable(self, path: PathLike) -> bool:
        """Whether this process may create files in (or write) ``path``."""
        return os.access(path, os.W_OK)

    def executable(self, path: PathLike) -> bool:
        return os.access(path, os.X_OK)

    # --- reading ----------------------------------------------------------------------------

    def read_bytes(self, path: PathLike, limit: int | None = None) -> bytes:
        """The file's bytes (at most ``limit`` of them when given)."""
        with open(path, "rb") as f:
            return f.read() if limit is None else f.read(limit)

    def read_text(self, path: PathLike, encoding: str = "utf-8") -> str:
        with open(path, encoding=encoding) as f:
            return f.read()

    def open_read(self, path: PathLike) -> BinaryIO:
        """A binary file object for reading (sequential or ``seek``/``read`` ranges)."""
        return open(path, "rb")

    @contextmanager
    def mapped(self, path: PathLike) -> Iterator[np.ndarray]:
        """Yield the whole file as a read-only ``uint8`` array (empty files give an empty array).

        Reading through a read-only map changes no byte and no mtime, and lets the kernels work
        on the page cache directly; files up to :data:`READ_BELOW_BYTES` are read instead. The
        array must not outlive the ``with`` block: the map is closed on exit. OS errors become
        :class:`~kafkalog_spark.errors.LogDirError` naming the file.
        """
        import numpy as np

        path = os.fspath(path)
        try:
            f = open(path, "rb")
        except OSError as exc:
            raise LogDirError(f"cannot open file: {exc.strerror}",
                              Location(file=str(path))) from exc
        with f:
            size = os.fstat(f.fileno()).st_size
            if size == 0:
                yield np.zeros(0, np.uint8)
                return
            if size <= READ_BELOW_BYTES:
                try:
                    data = f.read()
                except OSError as exc:
                    raise LogDirError(f"cannot read file: {exc.strerror}",
                                      Location(file=str(path))) from exc
                yield np.frombuffer(data, np.uint8)
                return
            try:
                mm = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
            except (OSError, ValueError) as exc:
                raise LogDirError(f"cannot map file: {exc}", Location(file=str(path))) from exc
            buf = np.frombuffer(mm, np.uint8)
            try:
                yield buf
            finally:
                del buf
                try:
                    mm.close()
                except BufferError:
                    # a caller kept a view alive; the map closes when that view is collected
                    pass

    def mapped_ranges(self, path: PathLike, ranges: Sequence[tuple[int, int]],
                      size: int | None = None) -> AbstractContextManager[np.ndarray]:
        """The file as an array in which at least the byte ranges ``[start, end)`` of ``ranges``
        hold the file's bytes: locally the whole map; object stores fetch only those ranges."""
        return self.mapped(path)

    def map_readonly(self, path: PathLike) -> mmap.mmap | None:
        """A read-only map of the whole file that the caller closes, or None for an empty
        file (for callers that keep several files mapped at once)."""
        with open(path, "rb") as f:
            if not os.fstat(f.fileno()).st_size:
                return None
            return mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)

    def update_mapped(self, path: PathLike, update: Callable[[np.ndarray], None]) -> None:
        """Call ``update(buf)`` with the file mapped as a writable ``uint8`` array, then flush
        and fsync the changes (nothing for an empty file). ``update`` must not keep the array,
        and must drop its reference before raising (``del buf``): a map with live views
        cannot be closed."""
        import numpy as np

        with open(path, "r+b") as f:
            size = os.fstat(f.fileno()).st_size
            if not size:
                return
            with mmap.mmap(f.fileno(), size) as mm:
                buf = np.frombuffer(mm, dtype=np.uint8)
                try:
                    update(buf)
                finally:
                    del buf
                mm.flush()
            os.fsync(f.fileno())

    # --- writing ----------------------------------------------------------------------------

    def create(self, path: PathLike) -> BinaryIO:
        """A new file for writing; fails with ``FileExistsError`` if ``path`` exists. Close it
        through :meth:`close_durably` to make its bytes durable."""
        return open(path, "xb")

    def open_write(self, path: PathLike) -> BinaryIO:
        """A file for writing from empty (created or truncated)."""
        return open(path, "wb")

    def close_durably(self, f: BinaryIO) -> None:
        """Flush, fsync and close a file opened by :meth:`create` or :meth:`open_write`."""
        try:
            f.flush()
            os.fsync(f.fileno())
        finally:
            f.close()

    def write_whole(self, path: PathLike, data: bytes | memoryview, *,
                    exclusive: bool = False) -> None:
        """Write ``data`` as the file's whole content and fsync it (the folder is not fsynced:
        see :meth:`fsync_dir`)."""
        f = open(path, "xb" if exclusive else "wb")
        try:
            f.write(data)
        except BaseException:
            f.close()
            raise
        self.close_durably(f)

    def replace_whole(self, path: PathLike, data: bytes) -> None:
        """Replace the file's content atomically and durably: write ``<path>.tmp``, fsync,
        rename over ``path``, fsync the folder (KAFKA_FORMATS §11.1). On failure the ``.tmp``
        is removed and the old file is untouched."""
        target = Path(path).absolute()
        tmp = target.with_name(target.name + TMP_SUFFIX)
        try:
            self.write_whole(tmp, data)
            os.replace(tmp, target)
            self.fsync_dir(target.parent)
        except OSError:
            tmp.unlink(missing_ok=True)
            raise

    def truncate(self, path: PathLike, size: int) -> None:
        """Cut the file to ``size`` bytes, durably."""
        with open(path, "r+b") as f:
            f.truncate(size)
            f.flush()
            os.fsync(f.fileno())

    def copy_file(self, src: PathLike, dst: PathLike, *, durable: bool = False) -> None:
        """Copy ``src`` to a new or truncated ``dst`` (fsynced when ``durable``)."""
        if not durable:
            shutil.copyfile(src, dst)
            return
        self.concat([src], dst)

    def concat(self, sources: Sequence[PathLike], dst: PathLike) -> None:
        """Write the bytes of the local files ``sources``, one after the other, into a new or
        truncated ``dst`` and fsync it (an object is downloaded with :meth:`write_stream`)."""
        g = open(dst, "wb")
        try:
            for src in sources:
                with open(src, "rb") as f:
                    shutil.copyfileobj(f, g, _COPY_CHUNK)
        except BaseException:
            g.close()
            raise
        self.close_durably(g)

    def write_stream(self, source: BinaryIO, dst: PathLike) -> None:
        """Write what ``source`` reads (an object being downloaded) into a new or truncated
        ``dst`` and fsync it."""
        g = open(dst, "wb")
        try:
            shutil.copyfileobj(source, g, _COPY_CHUNK)
        except BaseException:
            g.close()
            raise
        self.close_durably(g)

    def set_mtime(self, path: PathLike, mtime: float) -> None:
        os.utime(path, (mtime, mtime))

    def fsync_dir(self, path: PathLike) -> None:
        """fsync a folder so that renames and creations inside it are durable (a no-op where
        the platform cannot open folders, as Kafka's ``Utils.flushDir`` is on Windows)."""
        try:
            fd = os.open(os.fspath(path), os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
        except (IsADirectoryError, PermissionError):
            return
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    # --- renames, removal, folders ----------------------------------------------------------

    def rename(self, src: PathLike, dst: PathLike) -> None:
        """Atomically rename a file or folder (replacing a file at ``dst``)."""
        os.replace(src, dst)

    def remove(self, path: PathLike, *, missing_ok: bool = False) -> None:
        """Remove a file."""
        try:
            os.remove(path)
        except FileNotFoundError:
            if not missing_ok:
                raise

    def remove_tree(self, path: PathLike, *, ignore_errors: bool = False) -> None:
        """Remove a folder and everything in it."""
        shutil.rmtree(path, ignore_errors=ignore_errors)

    def make_dirs(self, path: PathLike, *, exist_ok: bool = True, mode: int = 0o777) -> None:
        """Create a folder and its missing parents."""
        os.makedirs(path, mode=mode, exist_ok=exist_ok)

    def make_dir(self, path: PathLike, *, mode: int = 0o777) -> None:
        """Create one folder; fails with ``FileExistsError`` if it exists."""
        os.mkdir(path, mode)

    def make_dirs_below(self, root: PathLike, path: PathLike) -> None:
        """Create the folders of ``path`` below ``root``, never ``root`` itself: when ``root``
        is gone (a cleaned-up staging folder) this fails with ``FileNotFoundError`` instead of
        re-creating it — what a Spark task attempt that outlived its job must get."""
        root, path = Path(root), Path(path)
        folder = root
        for part in path.relative_to(root).parts:
            folder = folder / part
            try:
                os.mkdir(folder)
            except FileExistsError:
                if not os.path.isdir(folder):
                    raise

    # --- temporary folders (process-local work, never log data) ----------------------------

    def temp_root(self) -> str:
        """The system's folder for temporary files (``tempfile.gettempdir()``)."""
        import tempfile

        return tempfile.gettempdir()

    def make_temp_dir(self, prefix: str) -> str:
        """Create a new private temporary folder (``tempfile.mkdtemp``); the caller removes it."""
        import tempfile

        return tempfile.mkdtemp(prefix=prefix)

    def temp_dir(self, prefix: str) -> AbstractContextManager[str]:
        """A temporary folder removed with everything in it at the end of a ``with`` block."""
        import tempfile

        return tempfile.TemporaryDirectory(prefix=prefix)

    # --- for libraries that open paths themselves -----------------------------------------

    def arrow_path(self, path: PathLike) -> str:
        """``path`` as :attr:`arrow_fs` takes it."""
        return os.fspath(path)

    @property
    def arrow_fs(self):
        """The ``pyarrow.fs.FileSystem`` for this storage, for pyarrow calls that take a path
        (``pq.ParquetWriter(path, ..., filesystem=fs.arrow_fs)``)."""
        from pyarrow.fs import LocalFileSystem

        return LocalFileSystem()


LOCAL = LocalStorage()

