"""Anchors: a session's head (seq and chain hash) written down somewhere else.

The hash chain shows an edit, a removal or a swap anywhere in a log, but not a
cut tail whose head record beside the log was rewritten too: what is left is a
sound, shorter log. An anchor taken earlier and kept elsewhere (a ticket, a
commit, another machine) catches that: the log must still reach the anchored
seq with the anchored hash. On a keyed store the anchor carries an HMAC under
the store's key, so whoever can edit the anchor file but lacks the key cannot
make it agree with a cut log.

A token is one line: ``convlog-anchor-1/<session>/<seq>/<hash>[/<mac>]`` (session
ids never hold ``/``).
"""

from __future__ import annotations

import hmac
from collections.abc import Iterable

import attrs

from engine.errors import ConvlogError, CorruptLog, KeyRequired
from engine.store.base import Store
from engine.store.verify import Problem, Progress, Report, verify

PREFIX = "convlog-anchor-1"
MAC_BYTES = 16


class BadAnchor(ConvlogError):
    """A string that is not an anchor token."""


@attrs.frozen
class Anchor:
    session_id: str
    seq: int
    hash: bytes
    mac: bytes | None = None

    def token(self) -> str:
        parts = [PREFIX, self.session_id, str(self.seq), self.hash.hex()]
        if self.mac is not None:
            parts.append(self.mac.hex())
        return "/".join(parts)

    def signed(self, key: bytes | None) -> Anchor:
        """This anchor with an HMAC under ``key`` (unchanged without a key)."""
        return self if key is None else attrs.evolve(self, mac=_mac(key, self))

    def authentic(self, key: bytes) -> bool:
        return self.mac is not None and hmac.compare_digest(self.mac, _mac(key, self))


def _mac(key: bytes, anchor: Anchor) -> bytes:
    msg = b"\0".join([PREFIX.encode(), anchor.session_id.encode(), str(anchor.seq).encode(),
                      anchor.hash])
    return hmac.digest(key, msg, "sha256")[:MAC_BYTES]


def parse(token: str) -> Anchor:
    parts = token.strip().split("/")
    if len(parts) not in (4, 5) or parts[0] != PREFIX:
        raise BadAnchor(f"not an anchor token: {token.strip()[:120]!r} (expected "
                        f"{PREFIX}/SESSION/SEQ/HASH[/MAC], as `convlog anchor` prints)")
    try:
        seq = int(parts[2])
        digest = bytes.fromhex(parts[3])
        mac = bytes.fromhex(parts[4]) if len(parts) == 5 else None
    except ValueError as exc:
        raise BadAnchor(f"malformed anchor token {token.strip()[:120]!r}: {exc}") from None
    if seq < 0 or not parts[1]:
        raise BadAnchor(f"malformed anchor token {token.strip()[:120]!r}")
    return Anchor(parts[1], seq, digest, mac)


def parse_many(text: str, source: str = "the anchor text") -> list[Anchor]:
    """Anchors from text with one token per line (blank lines and ``#`` comments
    skipped). Text without a token is an error: checking against it would check
    nothing, and an emptied anchor file must not read as "every anchor holds"."""
    lines = (line.strip() for line in text.splitlines())
    found = [parse(line) for line in lines if line and not line.startswith("#")]
    if not found:
        raise BadAnchor(f"{source} holds no anchor token (expected lines of "
                        f"{PREFIX}/SESSION/SEQ/HASH[/MAC], as `convlog anchor` prints)")
    return found


def from_heads(heads: Iterable[tuple[str, int, bytes]], key: bytes | None) -> list[Anchor]:
    """Anchors for (session id, seq, head hash) triples, signed when there is a key."""
    return [Anchor(sid, seq, head).signed(key) for sid, seq, head in heads]


def take(store: Store, session_id: str | None = None) -> list[Anchor]:
    """Verify the store (or one session) and return an anchor for each session's head,
    HMAC'd under the store's key when it has one. A damaged log gets no anchor: that
    would vouch for the damage."""
    report = verify(store, session_id)
    if not report.ok:
        first = report.first
        assert first is not None
        raise CorruptLog(first.session_id, first.seq, f"not anchored: {first.reason}")
    return [Anchor(sid, seq, bytes.fromhex(head)).signed(store.chain.key)
            for sid, (seq, head) in sorted(report.heads.items())]


def check(store: Store, anchors: Iterable[Anchor], session_id: str | None = None, *,
          progress: Progress | None = None, deep: bool = True) -> Report:
    """Verify the store against anchors kept elsewhere (see :func:`verify`). A keyed
    anchor needs the store's key; one whose MAC does not match is reported, not used.
    On a keyed store every anchor must carry a MAC: the head hash of a restored older
    copy is readable by anyone, so an unsigned token of it proves nothing, and
    accepting it would let whoever can edit the anchor file vouch for a cut log."""
    chosen = {a.session_id: a for a in anchors}
    forged: list[Problem] = []
    for a in list(chosen.values()):
        if a.mac is None:
            if store.chain.key is not None:
                del chosen[a.session_id]
                forged.append(Problem(a.session_id, a.seq, "the anchor carries no MAC, but "
                                      "the store is keyed: every anchor `convlog anchor` "
                                      "takes of it is signed, so this one was written by "
                                      "someone without the key"))
            continue
        if store.chain.key is None:
            raise KeyRequired(f"the anchor for session {a.session_id} is keyed (HMAC): give "
                              "the store's key (--key-file) to check it")
        if not a.authentic(store.chain.key):
            del chosen[a.session_id]
            forged.append(Problem(a.session_id, a.seq, "the anchor's MAC does not match: "
                                  "the anchor was edited or made under another key"))
    report = verify(store, session_id, progress=progress, deep=deep,
                    anchored={sid: (a.seq, a.hash) for sid, a in chosen.items()})
    report.problems[:0] = [p for p in forged
                           if session_id is None or p.session_id == session_id]
    return report
