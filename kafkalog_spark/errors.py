"""Exception family (all layers): one root, a few children, every message locates the problem.

Every error carries where it happened — file, byte position, base offset — so an operator can
go straight to the bytes. Low-level exceptions (struct, zlib, codec libraries) are mapped to
these in one place per layer with ``raise ... from``.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Location:
    """Where a problem sits: a file (or ``None`` for an in-memory buffer), a byte position, and
    the base offset of the batch or segment concerned (``None`` when unknown)."""

    file: str | None = None
    position: int | None = None
    base_offset: int | None = None

    def describe(self) -> str:
        parts = [f"file {self.file}" if self.file else "in-memory buffer"]
        if self.position is not None:
            parts.append(f"byte position {self.position}")
        if self.base_offset is not None:
            parts.append(f"base offset {self.base_offset}")
        return ", ".join(parts)


class KafkaLogError(Exception):
    """Root of every error this package raises on purpose."""

    def __init__(self, message: str, location: Location | None = None) -> None:
        self.reason = message
        self.location = location or Location()
        super().__init__(f"{message} ({self.location.describe()})")

    @property
    def file(self) -> str | None:
        return self.location.file

    @property
    def position(self) -> int | None:
        return self.location.position

    @property
    def base_offset(self) -> int | None:
        return self.location.base_offset

    def at(self, file: str | None = None, position_shift: int = 0) -> "KafkaLogError":
        """The same error re-located: a file name added and/or the position shifted by where
        the buffer started inside that file. Used when a buffer-level error surfaces in a
        file-level caller."""
        loc = self.location
        new = Location(
            file=file if file is not None else loc.file,
            position=None if loc.position is None else loc.position + position_shift,
            base_offset=loc.base_offset,
        )
        err = type(self).__new__(type(self))
        KafkaLogError.__init__(err, self.reason, new)
        return err


class CorruptRecordError(KafkaLogError):
    """Bytes that are not a valid batch/message: bad CRC, bad size, bad structure."""


class TruncatedDataError(CorruptRecordError):
    """Data ends in the middle of a structure (a partial trailing batch, a short file)."""


class UnsupportedFormatError(KafkaLogError):
    """Valid-looking data this version cannot handle: unknown magic, codec or file version."""


class CompressionError(CorruptRecordError):
    """A compressed payload that does not decompress, or decompresses beyond the allowed bound."""


class MissingCodecError(KafkaLogError):
    """The Python library for a codec is not installed; the message says what to install."""


class CorruptIndexError(KafkaLogError):
    """An index, time index, transaction index or snapshot inconsistent with itself or its log."""


class CorruptCheckpointError(KafkaLogError):
    """A checkpoint / metadata text file that does not parse."""


class LogDirError(KafkaLogError):
    """A directory that is not a valid Kafka log dir / partition dir, or a naming problem."""


class PathNotSharedError(LogDirError):
    """A path the driver planned from is missing where a Spark task runs: log dirs and
    destinations must be on storage every executor reaches under the same path."""


class RemoteStorageError(LogDirError):
    """An operation an object store cannot do safely (atomic rename, lock, in-place change):
    in-place maintenance of a log dir on S3/GCS/Azure is refused; run it on a local copy."""


class RemoteTierError(LogDirError):
    """A remote tier (tiered storage) that does not hold what a read needs: a remote segment
    the metadata lists is missing or of another size, remote segments that overlap each other,
    or offsets of the partition's history in no segment (a gap)."""


class TieredPartitionError(LogDirError):
    """A command that would change the local log of a tiered partition (tiered storage): the
    broker owns its log start offset, its retention across both tiers and its remote copies."""


class LogDirLockedError(LogDirError):
    """A live process (a broker) holds the log dir's ``.lock``."""


class InvalidOptionError(KafkaLogError, ValueError):
    """A bad option name or value; the message lists the valid choices."""

    def __init__(self, message: str) -> None:
        KafkaLogError.__init__(self, message, Location())

    def __str__(self) -> str:  # options have no file location
        return self.reason


class SparkSetupError(KafkaLogError):
    """Spark cannot start here (no Java, or a Java too old for this PySpark); the message says
    how to fix it. Local commands without ``--spark`` do not need Java."""

    def __init__(self, message: str) -> None:
        KafkaLogError.__init__(self, message, Location())

    def __str__(self) -> str:  # about the machine, not a file
        return self.reason
