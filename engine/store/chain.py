"""The per-session hash chain: ``hash_n = H(hash_{n-1} || canonical bytes of event n)``.

H is SHA-256, or HMAC-SHA256 under a secret key so that whoever can write the
file but does not hold the key cannot recompute the chain after an edit. Hashes
are truncated to 16 bytes (128 bits, like HMAC-SHA-256-128 of RFC 4868): enough
against forgery and collisions, and half the bytes per stored event.
"""

from __future__ import annotations

import functools
import hashlib
import hmac
from collections.abc import Callable, Iterable
from pathlib import Path

HASH_BYTES = 16
GENESIS = bytes(HASH_BYTES)
_sha256 = hashlib.sha256
_hmac_digest = hmac.digest  # the "previous hash" of a root session's first event


class Chain:
    __slots__ = ("algorithm", "key", "link", "links")

    def __init__(self, key: bytes | None) -> None:
        self.key = key
        self.algorithm = "hmac-sha256-128" if key else "sha256-128"
        # ``link(prev, canon)``: the next hash; ``links(prev, canons)``: the hashes of
        # consecutive events. Bound once here, so the per-event step is one digest
        # without re-testing the key kind.
        self.link: Callable[[bytes, bytes], bytes] = (
            _sha_link if key is None else functools.partial(_hmac_link, key))
        self.links: Callable[[bytes, Iterable[bytes]], list[bytes]] = (
            _sha_links if key is None else functools.partial(_hmac_links, key))

    def fingerprint(self) -> str:
        """Names the key without revealing it, so a store can refuse a wrong key early."""
        if self.key is None:
            return ""
        return hmac.digest(self.key, b"convlog key check", "sha256")[:8].hex()


# The rule: hash_n = H(hash_{n-1} || canon_n), truncated. The batch forms repeat the
# one-line digest inside their loop on purpose: a Python call per event there costs
# about a third of a microsecond per stored event (measured).
def _sha_link(prev: bytes, canon: bytes) -> bytes:
    return _sha256(prev + canon).digest()[:HASH_BYTES]


def _hmac_link(key: bytes, prev: bytes, canon: bytes) -> bytes:
    return _hmac_digest(key, prev + canon, "sha256")[:HASH_BYTES]


def _sha_links(prev: bytes, canon: Iterable[bytes]) -> list[bytes]:
    out = []
    for data in canon:
        prev = _sha256(prev + data).digest()[:HASH_BYTES]
        out.append(prev)
    return out


def _hmac_links(key: bytes, prev: bytes, canon: Iterable[bytes]) -> list[bytes]:
    out = []
    for data in canon:
        prev = _hmac_digest(key, prev + data, "sha256")[:HASH_BYTES]
        out.append(prev)
    return out


def read_key(path: str | Path) -> bytes:
    """A key file's bytes, surrounding whitespace stripped (a hex or base64 line works)."""
    data = Path(path).read_bytes().strip()
    if len(data) < 16:
        raise ValueError(f"key file {path} holds {len(data)} bytes; use at least 16")
    return data
