"""Agent credentials: the passkey ``authenticate`` asks for, kept as a slow salted hash.

The log keeps a verifier, never the passkey: ``scrypt$N$r$p$SALT$HASH`` (standard
library :func:`hashlib.scrypt`, a fresh 16-byte salt per credential, base64
without padding). A fast unsalted digest lets anyone who can read the log try
billions of guesses a second and spot two agents sharing a passkey; scrypt makes
every guess cost memory and time. Verifiers written before this format (a bare
SHA-256 hex digest) still verify, so an older log keeps working; setting a new
credential replaces one.

Making a verifier draws a salt (randomness): it belongs to the command, never to
a fold; the decider only checks its shape.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import re
import secrets
from typing import Final, TypeVar

import msgspec

from engine import events as ev

E = TypeVar("E", bound=ev.Event)

# N=2**14, r=8, p=1: about 16 MiB and tens of milliseconds per check on a laptop
# (the parameters the scrypt paper suggests for interactive logins).
N: Final = 2**14
R: Final = 8
P: Final = 1
_SALT_BYTES: Final = 16
_KEY_BYTES: Final = 32
_B64: Final = r"[A-Za-z0-9+/]+"
SHAPE: Final = re.compile(rf"scrypt\$(\d+)\$(\d+)\$(\d+)\$({_B64})\$({_B64})")
_LEGACY: Final = re.compile(r"[0-9a-f]{64}")
REDACTED: Final = "<redacted>"


def _b64(raw: bytes) -> str:
    return base64.b64encode(raw).decode().rstrip("=")


def _unb64(text: str) -> bytes:
    return base64.b64decode(text + "=" * (-len(text) % 4))


def _derive(passkey: str, salt: bytes, n: int, r: int, p: int) -> bytes:
    return hashlib.scrypt(passkey.encode(), salt=salt, n=n, r=r, p=p,
                          maxmem=128 * n * r * (p + 1) + 1024 * 1024, dklen=_KEY_BYTES)


def make_verifier(passkey: str) -> str:
    """A new verifier for ``passkey`` (a fresh salt each time)."""
    salt = secrets.token_bytes(_SALT_BYTES)
    return f"scrypt${N}${R}${P}${_b64(salt)}${_b64(_derive(passkey, salt, N, R, P))}"


def well_formed(verifier: str) -> bool:
    """Whether the log may hold ``verifier`` (the decider's check)."""
    m = SHAPE.fullmatch(verifier)
    if m is None:
        return _LEGACY.fullmatch(verifier) is not None
    n, r, p = int(m[1]), int(m[2]), int(m[3])
    # Bounds keep a forged event from making every later check cost gigabytes.
    return 2 <= n <= 2**20 and n & (n - 1) == 0 and 1 <= r <= 32 and 1 <= p <= 16


def matches(verifier: str, passkey: str) -> bool:
    """Whether ``passkey`` is the credential ``verifier`` was made from
    (constant time in the comparison)."""
    m = SHAPE.fullmatch(verifier)
    if m is None:
        if _LEGACY.fullmatch(verifier) is None:
            return False
        return hmac.compare_digest(verifier, hashlib.sha256(passkey.encode()).hexdigest())
    n, r, p = int(m[1]), int(m[2]), int(m[3])
    got = _derive(passkey, _unb64(m[4]), n, r, p)
    return hmac.compare_digest(got, _unb64(m[5]))


def redacted(event: E) -> E:
    """``event`` as any output may show it: a credential verifier replaced by
    ``<redacted>`` (``convlog tail``, ``show``, ``export``, the viewer). The stored
    event is untouched; only what is printed changes."""
    if isinstance(event, ev.AgentRegistered | ev.AgentCredentialSet) and event.passkey_hash:
        return msgspec.structs.replace(event, passkey_hash=REDACTED)
    return event
