"""Aiven's ``.rsm-manifest`` and chunk index (tier layer): where each byte of a remote segment's
``.log`` and indexes sits in its objects, and how they were transformed.

Facts (TIERED_STORAGE.md §2.2-2.5, from Aiven's tiered-storage-for-apache-kafka)::

    .rsm-manifest  JSON, never encrypted:
      version "1"
      chunkIndex     {"type": "fixed", originalChunkSize, originalFileSize, transformedChunkSize,
                      finalTransformedChunkSize}
                   | {"type": "variable", originalChunkSize, originalFileSize, transformedChunks}
      segmentIndexes {offset, timestamp, producerSnapshot, leaderEpoch, transaction (or null)}:
                     each {"position", "size"} in the .indexes object (sizes as stored);
                     absent before 2023-10 (Aiven commit 107d1653): one object per index,
                     .index .timeindex .snapshot .txnindex (optional) .leader-epoch-checkpoint
      compression    true: every .log chunk is one zstd frame
      encryption     {"dataKey": "<key pair id>:<base64 RSA-wrapped AES key>", "aad": base64}
                     (absent: not encrypted; before 2023-07, commit 84ee2143, the dataKey is
                     the base64 alone, with no key pair id)
      remoteLogSegmentMetadata  (manifests from 2023-09 on; not needed to read)

    .log      the original segment cut in chunks of originalChunkSize bytes (the last one
              shorter), each transformed on its own (compress, then encrypt), concatenated
    transformedChunks  base64 of one zstd frame of: int32 count; count 1: int32 value;
              count >= 2: int32 base, int8 bytesPerValue, (count - 1) values - base in
              bytesPerValue big-endian bytes, then the last value as a plain int32
"""

from __future__ import annotations

import base64
import json
import struct
from dataclasses import dataclass

from ..codec.compression.codecs import decompress
from ..errors import CompressionError, CorruptIndexError, Location

INDEX_KEYS = {"offset": "index", "timestamp": "timeindex", "producerSnapshot": "snapshot",
              "leaderEpoch": "leader_epoch_checkpoint", "transaction": "txnindex"}
"""Manifest index names -> the broker file suffix each one is a copy of."""
INDEX_OBJECTS = {"index": "index", "timeindex": "timeindex", "snapshot": "snapshot",
                 "txnindex": "txnindex", "leader_epoch_checkpoint": "leader-epoch-checkpoint"}
"""Before 2023-10: broker file suffix -> the suffix of the object holding that index whole
(encrypted as one chunk when the segment is; an empty index is an empty object)."""
ZSTD = 4  # Kafka's codec id of zstd (the chunks' frames are plain zstd frames)


@dataclass(frozen=True)
class ChunkIndex:
    """Original ``.log`` bytes -> transformed byte ranges of the ``.log`` object."""

    original_chunk_size: int
    original_file_size: int
    transformed_sizes: tuple[int, ...]  # per chunk, as stored

    def chunks(self, start: int, end: int) -> list[tuple[int, int, int, int]]:
        """``(original start, original end, object start, object end)`` of each chunk holding
        original bytes ``[start, end)``, in order."""
        size, ocs = self.original_file_size, self.original_chunk_size
        end = min(end, size)
        if end <= start:
            return []
        first, last = start // ocs, (end - 1) // ocs
        pos = sum(self.transformed_sizes[:first])
        out = []
        for i in range(first, last + 1):
            t = self.transformed_sizes[i]
            out.append((i * ocs, min((i + 1) * ocs, size), pos, pos + t))
            pos += t
        return out

    @property
    def object_size(self) -> int:
        return sum(self.transformed_sizes)


@dataclass(frozen=True)
class Encryption:
    """A segment's data key, wrapped with the key pair ``key_id``'s public key, and the AAD."""

    key_id: str | None  # None: a manifest from before key pair ids
    wrapped_key: bytes
    aad: bytes


@dataclass(frozen=True)
class SegmentManifest:
    """One ``.rsm-manifest``."""

    chunk_index: ChunkIndex
    # broker suffix -> (position, stored size) in .indexes; None: one object per index
    indexes: dict[str, tuple[int, int] | None] | None
    compression: bool
    encryption: Encryption | None


def parse_manifest(raw: bytes, file: str) -> SegmentManifest:
    """Parse a manifest's bytes.

    Raises
    ------
    CorruptIndexError
        Not JSON, another version, or a field missing or of the wrong type (naming it).
    """
    where = Location(file)
    try:
        doc = json.loads(raw.decode("utf-8"))
        if doc.get("version") != "1":
            raise CorruptIndexError(f"manifest version {doc.get('version')!r} is not \"1\"",
                                    where)
        index = _chunk_index(doc["chunkIndex"], where)
        indexes: dict[str, tuple[int, int] | None] | None = None
        if "segmentIndexes" in doc:
            indexes = {}
            for key, suffix in INDEX_KEYS.items():
                entry = doc["segmentIndexes"].get(key)
                indexes[suffix] = None if entry is None else (int(entry["position"]),
                                                              int(entry["size"]))
        enc = doc.get("encryption")
        encryption = None
        if enc is not None:
            text = str(enc["dataKey"])
            key_id, sep, wrapped = text.rpartition(":") if ":" in text else (None, "", text)
            if sep and (not key_id or ":" in key_id):
                raise CorruptIndexError("encryption.dataKey is not [<key pair id>:]<base64 "
                                        "key>", where)
            encryption = Encryption(key_id, base64.b64decode(wrapped),
                                    base64.b64decode(enc["aad"]))
        return SegmentManifest(index, indexes, bool(doc["compression"]), encryption)
    except (KeyError, TypeError, AttributeError, ValueError, UnicodeDecodeError) as exc:
        if isinstance(exc, CorruptIndexError):
            raise
        raise CorruptIndexError(f"not an Aiven segment manifest: {type(exc).__name__}: {exc}",
                                where) from None


def _chunk_index(doc: dict, where: Location) -> ChunkIndex:
    ocs, size = int(doc["originalChunkSize"]), int(doc["originalFileSize"])
    if ocs <= 0 or size < 0:
        raise CorruptIndexError(f"chunk index with chunk size {ocs}, file size {size}", where)
    n = max(1, -(-size // ocs))  # an empty file is one empty chunk
    if doc["type"] == "fixed":
        sizes = (int(doc["transformedChunkSize"]),) * (n - 1) + \
            (int(doc["finalTransformedChunkSize"]),)
    elif doc["type"] == "variable":
        sizes = tuple(transformed_chunk_sizes(doc["transformedChunks"], where))
    else:
        raise CorruptIndexError(f"chunk index type {doc['type']!r} is neither fixed nor "
                                "variable", where)
    if len(sizes) != n:
        raise CorruptIndexError(f"chunk index lists {len(sizes)} chunks; a {size}-byte file in "
                                f"{ocs}-byte chunks has {n}", where)
    return ChunkIndex(ocs, size, sizes)


def transformed_chunk_sizes(text: str, where: Location) -> list[int]:
    """A variable chunk index's ``transformedChunks`` decoded (module docstring)."""
    try:
        blob = bytes(decompress(ZSTD, base64.b64decode(text)))
        (count,) = struct.unpack_from(">i", blob, 0)
        if count == 0:
            return []
        if count == 1:
            return [struct.unpack_from(">i", blob, 4)[0]]
        base, width = struct.unpack_from(">ib", blob, 4)
        if not 1 <= width <= 4:
            raise ValueError(f"{width} bytes per value")
        values = [base + int.from_bytes(blob[9 + k * width:9 + (k + 1) * width], "big")
                  for k in range(count - 1)]
        values.append(struct.unpack_from(">i", blob, 9 + (count - 1) * width)[0])
        return values
    except (ValueError, struct.error, CompressionError) as exc:
        raise CorruptIndexError(f"transformedChunks does not decode: {exc}", where) from None
