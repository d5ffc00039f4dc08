"""Aiven-layout tiers written to the spec (test harness, not the package): no Aiven plugin jar is
on Maven Central here, so the objects Aiven's RemoteStorageManager (``segment.format=kafka``)
uploads are written from TIERED_STORAGE.md §2 by this independent writer — chunked ``.log``
(zstd per chunk, AES-256-GCM per chunk), ``.indexes``, ``.rsm-manifest`` with a fixed or variable
chunk index, the data key wrapped with RSA-OAEP(SHA3-512, MGF1-SHA3-512) — and checked against
the test vector of Aiven's own tests (``ChunkIndexSerializationTest``: [10, 20, 30]).

    off = aiven_offload(log_dir, "events", 0, tmp_path / "bucket", 3, compression=True,
                        key=rsa_key())
    kl.read_log(log_dir, remote_tier=off.tier, remote_tier_layout="aiven",
                remote_tier_private_key=off.key_file)
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import struct
from dataclasses import dataclass
from pathlib import Path

import zstandard
from tiered_fixtures import (new_uuid, segment_record, set_log_start, topic_id_of, update_record,
                             write_metadata_log)

VECTOR = ("KLUv/SAPeQAAAAAAAwAAAAoBAAoAAAAe", [10, 20, 30])  # Aiven's test vector
_H = hashlib.sha3_512


def rsa_key():
    from cryptography.hazmat.primitives.asymmetric import rsa

    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


def pem(key) -> bytes:
    from cryptography.hazmat.primitives import serialization

    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())


def oaep_wrap(public_key, message: bytes) -> bytes:
    """RSA-OAEP encryption, SHA3-512 as the hash and in MGF1, empty label (RFC 8017 §7.1.1)."""
    n, e = public_key.public_numbers().n, public_key.public_numbers().e
    k, h = (n.bit_length() + 7) // 8, _H().digest_size
    db = _H(b"").digest() + b"\x00" * (k - len(message) - 2 * h - 2) + b"\x01" + message
    seed = os.urandom(h)
    masked_db = bytes(a ^ b for a, b in zip(db, _mgf1(seed, k - h - 1)))
    masked_seed = bytes(a ^ b for a, b in zip(seed, _mgf1(masked_db, h)))
    m = int.from_bytes(b"\x00" + masked_seed + masked_db, "big")
    return pow(m, e, n).to_bytes(k, "big")


def _mgf1(seed: bytes, length: int) -> bytes:
    h = _H().digest_size
    return b"".join(_H(seed + i.to_bytes(4, "big")).digest()
                    for i in range(-(-length // h)))[:length]


def encode_sizes(values: list[int]) -> str:
    """A variable chunk index's ``transformedChunks`` (TIERED_STORAGE.md §2.3)."""
    blob = struct.pack(">i", len(values))
    if len(values) == 1:
        blob += struct.pack(">i", values[0])
    elif len(values) > 1:
        base = min(values[:-1])
        width = max(1, (max(v - base for v in values[:-1]).bit_length() + 7) // 8)
        blob += struct.pack(">ib", base, width)
        blob += b"".join((v - base).to_bytes(width, "big") for v in values[:-1])
        blob += struct.pack(">i", values[-1])
    frame = zstandard.ZstdCompressor(write_content_size=True).compress(blob)
    return base64.b64encode(frame).decode()


def _encrypt(data: bytes, key: bytes, aad: bytes) -> bytes:
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM

    iv = os.urandom(12)
    return iv + AESGCM(key).encrypt(iv, data, aad)


@dataclass
class AivenTier:
    tier: Path  # the bucket folder (no key prefix)
    folder: Path  # <topic>-<topic id>/<partition>
    segments: list[tuple[str, int, int, int]]  # (segment id, start, end, .log size)
    key_file: Path | None = None


LEGACY_OBJECTS = {"offset": "index", "timestamp": "timeindex", "producerSnapshot": "snapshot",
                  "leaderEpoch": "leader-epoch-checkpoint", "transaction": "txnindex"}
"""Before 2023-10 (Aiven commit 107d1653): the object suffix of each index (one object each)."""


def write_segment(base: Path, log: bytes, indexes: dict[str, bytes | None], *,
                  chunk_size: int, compression: bool, key=None, legacy: bool = False,
                  key_id: str | None = "key1") -> dict:
    """The objects of one segment at ``base``.{log,indexes,rsm-manifest}; returns the
    manifest written. ``legacy``: the layout from before 2023-10 — each index an object of its
    own (the whole file, encrypted as one chunk; the transaction index only when there is one,
    an empty index an empty object), no ``segmentIndexes`` in the manifest. ``key_id`` None:
    a manifest from before 2023-07, its dataKey without a key pair id."""
    data_key, aad = (os.urandom(32), os.urandom(32)) if key is not None else (None, None)

    def transform(chunk: bytes, compress: bool) -> bytes:
        if compress:
            chunk = zstandard.ZstdCompressor(write_content_size=True).compress(chunk)
        return _encrypt(chunk, data_key, aad) if data_key is not None else chunk

    chunks = [log[i:i + chunk_size] for i in range(0, len(log), chunk_size)] or [b""]
    stored = [transform(c, compression) for c in chunks]
    if compression:
        index = {"type": "variable", "originalChunkSize": chunk_size,
                 "originalFileSize": len(log),
                 "transformedChunks": encode_sizes([len(s) for s in stored])}
    else:
        index = {"type": "fixed", "originalChunkSize": chunk_size, "originalFileSize": len(log),
                 "transformedChunkSize": len(stored[0]) if len(stored) > 1 else
                 chunk_size + (28 if key is not None else 0),
                 "finalTransformedChunkSize": len(stored[-1])}
    objects, entries, pos = {"log": b"".join(stored), "indexes": b""}, {}, 0
    for name in ("offset", "timestamp", "producerSnapshot", "leaderEpoch", "transaction"):
        raw = indexes.get(name)
        if raw is None:
            entries[name] = None
            continue
        part = transform(raw, False) if raw else b""
        if legacy:
            objects[LEGACY_OBJECTS[name]] = part
            continue
        entries[name] = {"position": pos, "size": len(part)}
        objects["indexes"] += part
        pos += len(part)
    manifest = {"version": "1", "chunkIndex": index, "compression": compression}
    if legacy:
        del objects["indexes"]
    else:
        manifest["segmentIndexes"] = entries
    if key is not None:
        wrapped = base64.b64encode(oaep_wrap(key.public_key(), data_key)).decode()
        manifest["encryption"] = {"dataKey": wrapped if key_id is None else f"{key_id}:{wrapped}",
                                  "aad": base64.b64encode(aad).decode()}
    objects["rsm-manifest"] = json.dumps(manifest).encode()
    base.parent.mkdir(parents=True, exist_ok=True)
    for suffix, data in objects.items():
        Path(f"{base}.{suffix}").write_bytes(data)
    return manifest


def aiven_offload(log_dir: Path, topic: str, partition: int, tier: Path, count: int, *,
                  chunk_size: int = 1000, compression: bool = False, key=None,
                  metadata: bool = True, custom_key: bool = False, legacy: bool = False,
                  key_id: str | None = "key1") -> AivenTier:
    """Upload the partition's ``count`` oldest segments as Aiven's RSM does, record them in
    ``__remote_log_metadata`` (with ``custom_key``: the object key in the custom metadata, the
    objects then under another folder), and delete the local copies. ``legacy``, ``key_id``:
    the layouts of earlier releases (:func:`write_segment`)."""
    pdir = log_dir / f"{topic}-{partition}"
    topic_id = topic_id_of(pdir)
    folder = tier / f"{topic}-{topic_id}" / str(partition)
    logs = sorted(pdir.glob("*.log"))
    done, values = [], []
    for i, log in enumerate(logs[:count]):
        base_offset, end = int(log.stem), int(logs[i + 1].stem) - 1
        seg_id = new_uuid()
        rel = (f"elsewhere/{topic}/{seg_id}" if custom_key
               else f"{topic}-{topic_id}/{partition}/{base_offset:020d}-{seg_id}")
        txn = log.with_suffix(".txnindex")
        snap = pdir / f"{end + 1:020d}.snapshot"
        write_segment(tier / rel, log.read_bytes(), {
            "offset": log.with_suffix(".index").read_bytes(),
            "timestamp": log.with_suffix(".timeindex").read_bytes(),
            "producerSnapshot": snap.read_bytes() if snap.exists() else b"",
            "leaderEpoch": f"0\n1\n0 {base_offset}\n".encode(),
            "transaction": txn.read_bytes() if txn.exists() and txn.stat().st_size else None,
        }, chunk_size=chunk_size, compression=compression, key=key, legacy=legacy,
            key_id=key_id)
        size = log.stat().st_size
        done.append((seg_id, base_offset, end, size))
        values.append(segment_record(topic_id, topic, partition, seg_id, base_offset, end, size,
                                     epochs=((0, base_offset),)))
        custom = None
        if custom_key:  # fields: count 1; tag 2, size, compact string
            text = rel.encode()
            field = bytes([len(text) + 1]) + text
            custom = bytes([1, 2, len(field)]) + field
        values.append(update_record(topic_id, topic, partition, seg_id, 1, custom=custom))
    if metadata:
        write_metadata_log(log_dir, values)
    for log in logs[:count]:
        for f in pdir.glob(f"{log.stem}.*"):
            if not f.name.endswith(".snapshot"):
                f.unlink()
    set_log_start(log_dir, topic, partition, int(logs[0].stem))
    key_file = None
    if key is not None:
        key_file = tier.parent / "rsa-private.pem"
        key_file.write_bytes(pem(key))
    return AivenTier(tier, folder, done, key_file)
