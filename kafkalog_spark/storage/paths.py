"""Object-store paths (storage layer): ``s3://``, ``gs://``, ``abfs[s]://`` URIs as path objects.

:class:`ObjectPath` behaves like the ``pathlib`` paths the package joins and names (``/``,
``name``, ``parent``, ``suffix``...) but is *not* ``os.PathLike``: handing one to ``open`` or
``Path`` fails at once instead of touching a local file of that name. It carries its store
options (endpoint, region, keys), so every path derived from it — and every Spark task that
receives one — reaches the same store with the same credentials; ``str``/``repr`` show only the
URI, never an option.
"""

from __future__ import annotations

import os
import posixpath
from collections.abc import Mapping
from pathlib import Path, PurePosixPath
from urllib.parse import urlsplit

from ..errors import InvalidOptionError
from .options import normalize_options

SCHEMES = {"s3": "s3", "s3a": "s3", "gs": "gs", "gcs": "gs", "abfs": "abfs", "abfss": "abfs",
           "az": "abfs"}
"""URI schemes read in place, and the store each one selects."""


class ObjectPath:
    """A path in an object store: scheme, bucket (container) and key, plus the store options.

    Immutable and hashable (equality ignores the options). Supports the ``PurePath`` subset the
    package uses; ``str()`` is the URI. It is deliberately not ``os.PathLike``.
    """

    __slots__ = ("scheme", "bucket", "key", "account", "options")

    def __init__(self, uri: str, options: Mapping[str, str] | None = None) -> None:
        parts = urlsplit(uri)
        scheme = parts.scheme.lower()
        if scheme not in SCHEMES:
            raise InvalidOptionError(f"not an object-store URI: {uri!r} (schemes: "
                                     f"{', '.join(sorted(SCHEMES))})")
        bucket, account = parts.netloc, ""
        if SCHEMES[scheme] == "abfs" and "@" in bucket:
            bucket, host = bucket.split("@", 1)
            account = host.split(".", 1)[0]
        if not bucket:
            raise InvalidOptionError(f"{uri!r} names no bucket (container)")
        self.scheme, self.bucket, self.account = scheme, bucket, account
        self.key = posixpath.normpath(parts.path).strip("/") if parts.path.strip("/") else ""
        if self.key == ".":
            self.key = ""
        self.options = dict(options or {})

    def _with_key(self, key: str) -> "ObjectPath":
        out = object.__new__(ObjectPath)
        out.scheme, out.bucket, out.account, out.options = (self.scheme, self.bucket,
                                                             self.account, self.options)
        out.key = key
        return out

    @property
    def store(self) -> str:
        """``s3``, ``gs`` or ``abfs``."""
        return SCHEMES[self.scheme]

    @property
    def arrow_path(self) -> str:
        """The path as ``pyarrow.fs`` takes it: ``bucket/key``."""
        return f"{self.bucket}/{self.key}" if self.key else self.bucket

    def __str__(self) -> str:
        host = f"{self.bucket}@{self.account}.dfs.core.windows.net" if self.account \
            else self.bucket
        return f"{self.scheme}://{host}/{self.key}" if self.key else f"{self.scheme}://{host}"

    def __repr__(self) -> str:
        return f"ObjectPath({str(self)!r})"

    def _identity(self) -> tuple[str, str, str, str]:
        return (self.store, self.account, self.bucket, self.key)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ObjectPath) and self._identity() == other._identity()

    def __hash__(self) -> int:
        return hash(self._identity())

    def __lt__(self, other: "ObjectPath") -> bool:
        return str(self) < str(other)

    def __truediv__(self, name: str | os.PathLike[str]) -> "ObjectPath":
        rel = str(name).strip("/")
        key = posixpath.normpath(f"{self.key}/{rel}" if self.key else rel).lstrip("/")
        if key == ".." or key.startswith("../"):
            raise InvalidOptionError(f"{name!r} leads above the bucket of {self}")
        return self._with_key("" if key == "." else key)

    def joinpath(self, *names: str) -> "ObjectPath":
        out = self
        for n in names:
            out = out / n
        return out

    @property
    def name(self) -> str:
        return self.key.rsplit("/", 1)[-1] if self.key else ""

    @property
    def suffix(self) -> str:
        name = self.name
        i = name.rfind(".")
        return name[i:] if 0 < i < len(name) - 1 else ""

    @property
    def stem(self) -> str:
        suffix = self.suffix
        return self.name[:-len(suffix)] if suffix else self.name

    @property
    def parent(self) -> "ObjectPath":
        return self._with_key(self.key.rsplit("/", 1)[0] if "/" in self.key else "")

    @property
    def parts(self) -> tuple[str, ...]:
        return (f"{self.scheme}://{self.bucket}", *(self.key.split("/") if self.key else ()))

    def with_name(self, name: str) -> "ObjectPath":
        return self.parent / name

    def with_suffix(self, suffix: str) -> "ObjectPath":
        return self.parent / (self.stem + suffix)

    def is_relative_to(self, other: "ObjectPath") -> bool:
        if not isinstance(other, ObjectPath) or other._identity()[:3] != self._identity()[:3]:
            return False
        return not other.key or self.key == other.key or self.key.startswith(other.key + "/")

    def relative_to(self, other: "ObjectPath") -> PurePosixPath:
        if not self.is_relative_to(other):
            raise ValueError(f"{self} is not below {other}")
        return PurePosixPath(self.key[len(other.key):].lstrip("/") if other.key else self.key)

    def absolute(self) -> "ObjectPath":
        return self

    def as_uri(self) -> str:
        return str(self)


UserPath = str | os.PathLike[str] | ObjectPath


def is_remote(path: object) -> bool:
    """Whether ``path`` is an :class:`ObjectPath` or a string URI of an object store."""
    if isinstance(path, ObjectPath):
        return True
    if isinstance(path, str) and "://" in path:
        return path.split("://", 1)[0].lower() in SCHEMES
    return False


class VirtualPath:
    """Base of paths served by a storage an upper layer registers
    (:func:`~.seam.register_storage`): files built from stored objects, such as an Aiven remote
    segment's ``.log``. Not ``os.PathLike``; :func:`as_path` passes them through."""

    __slots__ = ()


def as_path(path: UserPath,
            storage_options: Mapping[str, str] | None = None) -> Path | ObjectPath:
    """A user-given path as the package handles it: an ``ObjectPath`` carrying the normalised
    ``storage_options`` for an object-store URI, else a local ``Path`` (``file://`` too)."""
    if isinstance(path, ObjectPath):
        return path if storage_options is None else ObjectPath(
            str(path), normalize_options(storage_options))
    if isinstance(path, VirtualPath):
        return path  # type: ignore[return-value]
    text = os.fspath(path)
    if is_remote(text):
        return ObjectPath(text, normalize_options(storage_options))
    if text.startswith("file://"):
        return Path(text[len("file://"):])
    return Path(text)


def absolute_name(path: UserPath) -> str:
    """The absolute path (``os.path.abspath``) or the URI, as reports name a file."""
    return str(path) if is_remote(path) or isinstance(path, VirtualPath) \
        else os.path.abspath(path)
