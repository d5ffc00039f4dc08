"""The POSIX calls the local storage needs beyond Python's ``os`` (storage layer): the atomic
exchange of two paths (Linux ``renameat2(RENAME_EXCHANGE)``) and the broker's record lock
(``fcntl``: who holds it, take it, release it), as methods :class:`~.local.LocalStorage` has."""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import fcntl
import os
import struct
import sys

PathLike = str | os.PathLike[str]

_RENAME_EXCHANGE = 2  # linux/fs.h
_AT_FDCWD = -100

# struct flock, as the kernel reads/writes it for F_GETLK (native alignment, 64-bit off_t).
#   Linux:  short l_type; short l_whence; off_t l_start; off_t l_len; pid_t l_pid;
#   BSD/macOS: off_t l_start; off_t l_len; pid_t l_pid; short l_type; short l_whence;
if sys.platform.startswith("linux"):
    _FLOCK: struct.Struct | None = struct.Struct("@hhqqi4x")
    _TYPE, _PID = 0, 4
elif sys.platform == "darwin" or "bsd" in sys.platform:
    _FLOCK = struct.Struct("@qqihh")
    _TYPE, _PID = 3, 2
else:  # pragma: no cover - platforms without POSIX record locks
    _FLOCK = None
    _TYPE = _PID = -1


class PosixCalls:
    """Exchange and record locks on the local file system (mixed into ``LocalStorage``)."""

    def exchange(self, a: PathLike, b: PathLike) -> bool:
        """Atomically exchange two paths (Linux ``renameat2(RENAME_EXCHANGE)``); False when
        the platform or file system cannot."""
        name = ctypes.util.find_library("c")
        try:
            fn = ctypes.CDLL(name, use_errno=True).renameat2
        except (OSError, AttributeError, TypeError):
            return False
        rc = fn(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE)
        if rc == 0:
            return True
        err = ctypes.get_errno()
        if err in (errno.EINVAL, errno.ENOSYS, errno.EPERM, errno.ENOTSUP):
            return False
        raise OSError(err, os.strerror(err), os.fspath(b))

    # --- the broker's record lock -----------------------------------------------------------

    def lock_owner(self, path: PathLike) -> int | None:
        """The pid holding a POSIX record lock on the file, asked with ``F_GETLK`` on a
        read-only descriptor (the file is neither created nor changed); ``None`` when the
        file is missing or nobody holds it; ``-1`` for an open-file-description lock."""
        if _FLOCK is None:  # pragma: no cover
            raise OSError(errno.ENOSYS, "POSIX record locks are not available on this platform",
                          os.fspath(path))
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
        except FileNotFoundError:
            return None
        try:
            fields = [0] * len(_FLOCK.unpack(bytes(_FLOCK.size)))
            fields[_TYPE] = fcntl.F_WRLCK  # "could I take an exclusive lock on the whole file?"
            answer = _FLOCK.unpack(fcntl.fcntl(fd, fcntl.F_GETLK, _FLOCK.pack(*fields)))
        finally:
            os.close(fd)
        if answer[_TYPE] == fcntl.F_UNLCK:
            return None
        return int(answer[_PID])

    def lock(self, path: PathLike, *, record: bool = True) -> int | None:
        """Take an exclusive, non-blocking lock on the file (created empty if missing, never
        through a symlink when ``record``) and return its descriptor, or ``None`` when another
        process holds it; :meth:`unlock` releases it.

        ``record=True`` takes a POSIX record lock (``lockf``), the kind a broker's
        ``FileChannel.tryLock()`` takes; ``record=False`` a BSD ``flock``.
        """
        flags = os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | (os.O_NOFOLLOW if record else 0)
        fd = os.open(path, flags, 0o644)
        try:
            if record:
                fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            else:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            os.close(fd)
            if exc.errno in (errno.EACCES, errno.EAGAIN, errno.EWOULDBLOCK):
                return None
            raise
        return fd

    def unlock(self, fd: int) -> None:
        """Release a lock from :meth:`lock` (closing the descriptor releases it)."""
        os.close(fd)
