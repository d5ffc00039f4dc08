"""Undoing Aiven's per-chunk transforms (tier layer): AES-GCM decryption with the segment's data
key (unwrapped with the RSA private key of its key pair), then zstd decompression.

Facts (TIERED_STORAGE.md §2.4): a chunk is compressed, then encrypted; an encrypted chunk (and
an encrypted index) is ``IV (12 bytes) | ciphertext | GCM tag (16 bytes)``, AES-256, with the
manifest's AAD. The data key is the raw 32-byte AES key, wrapped with
``RSA/NONE/OAEPWithSHA3-512AndMGF1Padding`` (OAEP with SHA3-512 as the hash and in MGF1, empty
label). ``cryptography`` reads the PEM key and runs AES-GCM (``pip install cryptography``, needed
only when an encrypted segment is met); its OAEP does not take SHA3, so the RSA step and the OAEP
unpadding (RFC 8017 §7.1.2) are done here with Python integers and ``hashlib``.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Sequence

from ..codec.compression.codecs import decompress
from ..errors import CompressionError, Location, MissingCodecError
from .aiven_manifest import ZSTD, Encryption

IV_BYTES, TAG_BYTES = 12, 16
_HASH = hashlib.sha3_512
_H = _HASH().digest_size


def _crypto():
    try:
        from cryptography.hazmat.primitives import serialization
        from cryptography.hazmat.primitives.ciphers.aead import AESGCM
    except ImportError:
        raise MissingCodecError("reading an encrypted Aiven segment needs the cryptography "
                                "package: pip install cryptography") from None
    return serialization, AESGCM


def unwrap_data_key(enc: Encryption, private_keys: Sequence[bytes], where: Location) -> bytes:
    """The segment's AES key, unwrapped with whichever of ``private_keys`` (PEM, PKCS#8) opens
    it; the keys are never printed.

    Raises
    ------
    CompressionError
        No key given, or none of them unwraps the data key (naming the key pair id).
    """
    serialization, _ = _crypto()
    for pem in private_keys:
        key = serialization.load_pem_private_key(pem, password=None)
        numbers = key.private_numbers()  # type: ignore[union-attr]
        n, d = numbers.public_numbers.n, numbers.d
        k = (n.bit_length() + 7) // 8
        c = int.from_bytes(enc.wrapped_key, "big")
        if len(enc.wrapped_key) != k or c >= n:
            continue
        found = _oaep_decode(pow(c, d, n).to_bytes(k, "big"))
        if found is not None:
            return found
    how = "no private key given (remote_tier_private_key / --remote-tier-private-key)" \
        if not private_keys else "none of the private keys given unwraps it"
    pair = f"of key pair {enc.key_id!r}" if enc.key_id is not None else "(no key pair id)"
    raise CompressionError(f"encrypted segment: data key {pair}: {how}", where)


def _oaep_decode(em: bytes) -> bytes | None:
    """EME-OAEP decoding (empty label): the message, or ``None`` when it does not decode."""
    if len(em) < 2 * _H + 2 or em[0] != 0:
        return None
    masked_seed, masked_db = em[1:1 + _H], em[1 + _H:]
    seed = bytes(a ^ b for a, b in zip(masked_seed, _mgf1(masked_db, _H)))
    db = bytes(a ^ b for a, b in zip(masked_db, _mgf1(seed, len(masked_db))))
    if not hmac.compare_digest(db[:_H], _HASH(b"").digest()):
        return None
    rest = db[_H:].lstrip(b"\x00")
    return rest[1:] if rest[:1] == b"\x01" else None


def _mgf1(seed: bytes, length: int) -> bytes:
    out = b"".join(_HASH(seed + i.to_bytes(4, "big")).digest()
                   for i in range(-(-length // _H)))
    return out[:length]


def decrypt(data: bytes, key: bytes, aad: bytes, where: Location) -> bytes:
    """One encrypted chunk or index: ``IV | ciphertext | tag``.

    Raises
    ------
    CompressionError
        Too short, or the tag does not verify (a wrong key, or damaged bytes).
    """
    _, AESGCM = _crypto()
    if len(data) < IV_BYTES + TAG_BYTES:
        raise CompressionError(f"encrypted chunk of {len(data)} bytes is shorter than its IV "
                               "and tag", where)
    try:
        return AESGCM(key).decrypt(data[:IV_BYTES], data[IV_BYTES:], aad)
    except Exception as exc:  # cryptography's InvalidTag: the only failure left here
        raise CompressionError(f"encrypted chunk does not decrypt ({type(exc).__name__}): a "
                               "wrong key or damaged bytes", where) from None


def detransform(data: bytes, *, key: bytes | None, aad: bytes | None, compressed: bool,
                where: Location) -> bytes:
    """A stored chunk back to its original bytes: decrypt (``key`` given), then zstd."""
    if key is not None:
        data = decrypt(data, key, aad or b"", where)
    if compressed:
        data = bytes(decompress(ZSTD, data, location=where))
    return data
