"""Time travel: the WithParts state at any event, the difference between two points.

Three ways to reach a past state, all equal to a replay from the first event:

- :func:`at` reads the nearest stored snapshot (through fork lineage) and folds
  the events after it.
- :class:`Timeline` folds a session once and keeps a frozen state every K events
  in memory, sharing unchanged views; ``at(seq)`` then costs a pointer per
  message plus at most K-1 events.
- :class:`Snapshotter` is a session subscriber that writes a snapshot to the
  store every K events, so later :func:`at` calls start close by.
"""

from __future__ import annotations

import bisect
import functools
import hashlib
import zlib
from typing import Any, Literal

import attrs
import msgspec

from engine.codec import packb
from engine.errors import InvalidArgument
from engine.events import Event
from engine.store import blocks
from engine.store.base import Store, check_id
from projections import views as v
from projections.bulk import collector_paused, read_bulk
from projections.restore_cache import RestoreCache
from projections.snapshot_codec import StaleChunk, decode_chunk, encode_chunk, is_chunk
from projections.text import PREVIEW_FINGERPRINT, render_message
from projections.withparts import FrozenState, WithPartsProjection, decode_message

DEFAULT_EVERY = 1000


def _check_seq(store: Store, session_id: str, seq: int) -> None:
    version = store.version(session_id)
    if not isinstance(seq, int) or not 0 <= seq <= version:
        raise InvalidArgument("at", f"seq {seq!r} is outside 0..{version} for session "
                                    f"{session_id}")


# Stored snapshots are chunked: an index per snapshot, one blob per message version.
INDEX_NAME = f"{WithPartsProjection.NAME}.index"

# A version 2 index record is a msgpack map {"v": 2, "d": digest of "b", "b": the
# msgpack of an _Index}: a map with "v", like version 1, so the previous release
# reads it as an unknown version (a cache miss) instead of failing. A full index
# lists every message; a delta lists only the messages added or changed since its
# base, an earlier index of the same session.
_INDEX_VERSION = 2
_DIGEST = 8
# Compressed message chunks start with a byte msgpack never uses (version 1 chunks
# are plain msgpack maps; only version 2 indexes refer to compressed ones).
_MARK = b"\xc1"
# A delta is written while it lists fewer than this share of the messages (and at
# least a few): so full indexes get rarer as a session grows, their total size stays
# a small multiple of the last one, and a restore decodes at most two records.
_FULL_SHARE = 4
_FULL_MIN = 64
_MAX_CHAIN = 8  # deltas written by other writers may chain; never follow a loop


def _digest(data: bytes | memoryview) -> bytes:
    return hashlib.blake2b(data, digest_size=_DIGEST).digest()


# Message chunks above this size are stored zlib-compressed behind the marker: the
# message still streaming is rewritten at every snapshot, and its text compresses.
_PACK_FROM = 512


def _pack(data: bytes) -> bytes:
    return _MARK + zlib.compress(data, 1) if len(data) >= _PACK_FROM else data


def _unpack(data: bytes) -> bytes:
    return zlib.decompress(memoryview(data)[1:]) if data[:1] == _MARK else data


# Beside each message chunk, under its own name at the same version, its preview: the
# text that ``convlog show`` prints for the message (projections.text.render_message),
# so a restored state prints without fetching, inflating or decoding its chunks
# (projections.text.render_state). A preview record is this head, the fingerprint of
# the renderer (8 bytes), the digest of the rest (8 bytes), then the text's UTF-8 as
# _pack writes it (UTF-8 never holds the byte 0xc1). The chunks are unchanged, and a
# release that knows no previews never reads these names.
_PREVIEW_HEAD = b"\xc1\x02"
_PREVIEW_AT = len(_PREVIEW_HEAD) + 8 + _DIGEST


def _preview_digest(mid: str, version: int, body: bytes | memoryview) -> bytes:
    # Over the message id and version too: a record is the preview of that message
    # version only (another message's whole record, swapped in, is a miss).
    h = hashlib.blake2b(f"{version}/{mid}/".encode(), digest_size=_DIGEST)
    h.update(body)
    return h.digest()


def _pack_preview(fingerprint: bytes, mid: str, version: int, preview: str) -> bytes:
    body = _pack(preview.encode())
    return b"".join((_PREVIEW_HEAD, fingerprint, _preview_digest(mid, version, body), body))


def _preview(data: bytes, fingerprint: bytes, mid: str, version: int) -> str | None:
    """The text of the preview record of message ``mid`` at ``version``, if
    ``fingerprint``'s renderer wrote it and it is whole; else None (a cache miss)."""
    if data[:_PREVIEW_AT - _DIGEST] != _PREVIEW_HEAD + fingerprint:
        return None
    body = memoryview(data)[_PREVIEW_AT:]
    if _preview_digest(mid, version, body) != data[_PREVIEW_AT - _DIGEST:_PREVIEW_AT]:
        return None
    try:
        return str(zlib.decompress(body[1:]) if body[:1] == _MARK else body, "utf-8")
    except (zlib.error, UnicodeDecodeError):
        return None


class _Index(msgspec.Struct, array_like=True):
    seq: int
    session: str
    base: int | None  # None: a full index
    count: int  # messages in the state, once the base is applied
    messages: list[tuple[str, int, bytes]]  # (message id, chunk version, chunk digest)
    tool_added: list[tuple[str, str, int]]


class _Record(msgspec.Struct):
    v: int
    d: bytes
    b: bytes


class _IndexV1(msgspec.Struct):
    v: int
    seq: int
    session: str
    messages: list[tuple[str, int]]
    tool_added: list[tuple[str, str, int]]


_encode = functools.partial(packb, encoder=msgspec.msgpack.Encoder())
_index_dec = msgspec.msgpack.Decoder(_Index)
_record_dec = msgspec.msgpack.Decoder(_Record)
_index_v1_dec = msgspec.msgpack.Decoder(_IndexV1)

def encode_index(index: _Index) -> bytes:
    body = _encode(index)
    return _encode(_Record(_INDEX_VERSION, _digest(body), body))


def decode_index(data: bytes) -> _Index | None:
    """The index in a stored record, or None when it is damaged or of an unknown format."""
    try:
        try:
            record = _record_dec.decode(data)
        except msgspec.ValidationError:  # no digest: a version 1 record, or junk
            old = _index_v1_dec.decode(data)
            if old.v != 1:
                return None
            return _Index(old.seq, old.session, None, len(old.messages),
                          [(mid, ver, b"") for mid, ver in old.messages], old.tool_added)
        if record.v != _INDEX_VERSION or _digest(record.b) != record.d:
            return None
        return _index_dec.decode(record.b)
    except (msgspec.DecodeError, msgspec.ValidationError):
        return None


def message_snapshot_name(message_id: str) -> str:
    return f"{WithPartsProjection.NAME}.msg/{message_id}"


def preview_snapshot_name(message_id: str) -> str:
    return f"{WithPartsProjection.NAME}.preview/{message_id}"


class SnapshotWriter:
    """Writes chunked snapshots of one session's projection into its store.

    A snapshot is an index of (message id, version, digest) plus one blob per
    message that changed since the previous snapshot: a completed message is
    written once, however many snapshots follow. The index itself is usually a
    delta: the messages added or changed since the last full index, so a snapshot
    costs what changed, not the length of the session.
    """

    def __init__(self, store: Store, session_id: str) -> None:
        self.store = store
        self.session_id = session_id
        self._written: dict[str, tuple[v.WithParts, int, bytes]] = {}
        self._base_seq: int | None = None
        self._base: dict[str, tuple[int, bytes]] = {}

    def write(self, projection: WithPartsProjection) -> None:
        seq = projection.seq
        refs: list[tuple[str, int, bytes]] = []
        for message in projection.messages():
            mid = message.info.id
            known = self._written.get(mid)
            if known is None or known[0] is not message:  # views are cached until changed
                data = _pack(encode_chunk(message))
                self.store.put_snapshot(self.session_id, message_snapshot_name(mid), seq, data)
                self.store.put_snapshot(self.session_id, preview_snapshot_name(mid), seq,
                                        _pack_preview(PREVIEW_FINGERPRINT, mid, seq,
                                                      render_message(message)))
                known = self._written[mid] = (message, seq, _digest(data))
            refs.append((mid, known[1], known[2]))
        base = self._base
        changed = [r for r in refs if base.get(r[0]) != (r[1], r[2])]
        # A delta only when the base's messages are all still here, in the same order,
        # before the new ones (a fold only ever appends messages; checked all the same).
        delta = (self._base_seq is not None and self._base_seq < seq
                 and len(changed) < max(_FULL_MIN, len(refs) // _FULL_SHARE)
                 and [r[0] for r in refs[:len(base)]] == list(base))
        index = _Index(seq, self.session_id, self._base_seq if delta else None, len(refs),
                       changed if delta else refs, projection.tool_added_items())
        self.store.put_snapshot(self.session_id, INDEX_NAME, seq, encode_index(index))
        if not delta:
            self._base_seq = seq
            self._base = {mid: (ver, dig) for mid, ver, dig in refs}


def _lacks_raw(message: dict[str, Any]) -> bool:
    """A format 2 chunk with a call that ran: it was written before tool parts kept the
    model's argument text once the call ran (``ToolPart.raw``), so a replay rebuilds it."""
    return any(p.get("type") == "tool" and "raw" not in p
               and p.get("state", {}).get("status") != "pending"
               for p in message.get("parts", ()))


class _ChunkLoader:
    """Loads a restored state's message chunks: one by one as each is first used, or
    all of them in one read (:meth:`prefetch`, which ``messages()`` calls first).

    One per restored state, or (with a :class:`RestoreCache`) one per index record: a
    delta's messages that its base lists then load through the base's loader (the
    message at the base's seq is the one at the delta's: a changed message is listed
    again), and the loaders of one chain share what :meth:`prefetch` fetched."""

    def __init__(self, store: Store, owner: str, session_id: str,  # noqa: PLR0917
                 rename: str | None, seq: int, cache: RestoreCache | None = None) -> None:
        self.store, self.owner, self.session_id, self.rename = store, owner, session_id, rename
        self.seq = seq  # the seq of the index record that lists the loader's messages
        self.fetched: dict[tuple[str, int], bytes] = {}
        self.replayed: WithPartsProjection | None = None
        self.cache = cache

    def prefetch(self, keys: list[tuple[str, int, bytes]]) -> None:
        """Fetch the chunks of ``(message id, version, digest)`` in one read; those the
        cache holds are not fetched."""
        cache = self.cache
        wanted = [(mid, ver) for mid, ver, dig in keys if cache is None or cache.view(
            (self.owner, mid, ver, dig, self.rename)) is None]
        names = [(message_snapshot_name(mid), version) for mid, version in wanted]
        found = self.store.snapshots_at(self.owner, names)
        self.fetched.update({key: found[name] for key, name in zip(wanted, names, strict=True)
                             if name in found})

    def previews(self, fingerprint: bytes, keys: list[tuple[str, int, bytes]]
                 ) -> dict[str, str]:
        """The previews stored beside the chunks of ``(message id, version, digest)``,
        by message id, in one read: those ``fingerprint``'s renderer wrote and that are
        whole (the rest are misses: build those messages). A fork's renaming is not
        needed: a preview prints no session id."""
        names = [(preview_snapshot_name(mid), version) for mid, version, _ in keys]
        found = self.store.snapshots_at(self.owner, names)
        out = {}
        for (mid, version, _), name in zip(keys, names, strict=True):
            data = found.get(name)
            text = None if data is None else _preview(data, fingerprint, mid, version)
            if text is not None:
                out[mid] = text
        return out

    def __call__(self, mid: str, version: int, digest: bytes) -> Any:
        key = (self.owner, mid, version, digest, self.rename)
        cache = self.cache
        if cache is not None:
            kept = cache.view(key)
            if kept is not None:
                return kept
        body = self.fetched.pop((mid, version), None)
        if body is None:
            found = self.store.latest_snapshot(self.owner, message_snapshot_name(mid), version)
            body = found[1] if found is not None and found[0] == version else None
        if body is not None and (not digest or _digest(body) == digest):
            try:
                data = _unpack(body)
                if is_chunk(data):  # format 3: the view itself
                    view = decode_chunk(data, self.rename)
                    if view.info.id == mid:
                        if cache is not None:
                            cache.keep_view(key, view)
                        return view
                else:  # format 2 (the previous release): the JSON view as a map
                    raw = decode_message(data, self.rename)
                    if raw["info"]["id"] == mid and not _lacks_raw(raw):
                        return raw
            except (msgspec.DecodeError, zlib.error, LookupError, TypeError, StaleChunk):
                pass
        if not digest:  # a version 1 index cannot tell a stale chunk from a good one
            raise LookupError(f"snapshot chunk {mid}@{version} is missing from {self.owner}")
        # A missing, damaged or stale chunk: the message by replay. The index says the
        # message at the record's seq is the one written at ``version`` (a changed message
        # is written again), so one replay to that seq serves every such message: after
        # the views change shape every chunk is stale, and a replay each was quadratic
        # (2,388 of them at the middle of a 1M-event session: minutes, not a second).
        # A cache keeps only its last replay (a whole state; the loader may live on in it).
        replayed = self.replayed if cache is None else cache.replayed(self.session_id, self.seq)
        if replayed is None:
            replayed = at(self.store, self.session_id, self.seq, use_snapshots=False)
            if cache is None:
                self.replayed = replayed
            else:
                cache.keep_replayed(self.session_id, self.seq, replayed)
        return replayed.message(mid)


def latest_snapshot(store: Store, session_id: str, seq: int, *,
                    cache: RestoreCache | None = None) -> WithPartsProjection | None:
    """The stored snapshot nearest below ``seq``, searching the fork lineage too.

    Messages load lazily from the store, so keep it open while reading them. None
    when there is none, or when the nearest one is damaged (then replay instead).
    ``cache`` keeps decoded indexes and message views between calls (a server's).
    """
    best: tuple[str, int, bytes] | None = None
    for sid, limit in store.lineage(session_id):
        cap = seq if limit is None else min(seq, limit)
        found = store.latest_snapshot(sid, INDEX_NAME, cap)
        if found is not None and (best is None or found[0] > best[1]):
            best = (sid, found[0], found[1])
    if best is None:
        return None
    owner, found_seq, record = best
    got = _refs(store, session_id, owner, (found_seq, record), cache)
    if got is None:
        return None  # an unreadable index is only a cache miss: replay instead
    index, refs = got
    return WithPartsProjection.from_refs(
        session_id, index.seq, dict(refs) if cache is not None else refs,  # (a cache's own)
        {(m, p): t for m, p, t in index.tool_added})


Refs = dict[str, tuple[Any, ...]]


def _refs(store: Store, session_id: str, owner: str, found: tuple[int, bytes],  # noqa: PLR0917
          cache: RestoreCache | None, depth: int = 0, load: _ChunkLoader | None = None
          ) -> tuple[_Index, Refs] | None:
    """The index record at ``found`` and its messages in order, each as the tuple
    ``WithPartsProjection.from_refs`` takes, with the bases of its delta applied
    (oldest first: a delta's messages replace or follow its base's). None when a
    record is damaged, missing or inconsistent.

    Without ``cache`` one loader serves the whole chain (``load``, made for its newest
    record: stale chunks then cost one replay, to the state's seq). With ``cache``
    each record gets its own loader and its result is kept by the record's bytes: the
    deltas of a session share one full base (a new state copies the base's dict, and
    makes tuples only for its delta's messages), and a scrub comes back to the same
    records."""
    seq, record = found
    kept = cache.refs(session_id, owner, seq, record) if cache is not None else None
    if kept is not None:
        return kept
    index = decode_index(record)
    if index is None or index.seq != seq:
        return None
    rename = None if index.session == session_id else session_id
    if cache is not None or load is None:
        load = _ChunkLoader(store, owner, session_id, rename, index.seq, cache)
    if index.base is None:
        refs = {mid: (load, mid, ver, dig) for mid, ver, dig in index.messages}
    else:
        if depth >= _MAX_CHAIN or index.base >= index.seq:
            return None  # deltas written by other writers may chain; never follow a loop
        hit = store.latest_snapshot(owner, INDEX_NAME, index.base)
        if hit is None or hit[0] != index.base:
            return None
        base = _refs(store, session_id, owner, hit, cache, depth + 1,
                     None if cache is not None else load)
        if base is None:
            return None
        if cache is not None and base[1]:  # the chain's loaders share what is prefetched
            load.fetched = next(iter(base[1].values()))[0].fetched
        refs = dict(base[1])
        refs.update({mid: (load, mid, ver, dig) for mid, ver, dig in index.messages})
    if len(refs) != index.count:
        return None
    if cache is not None:
        cache.keep_refs(session_id, owner, seq, record, (index, refs))
    return index, refs


def at(store: Store, session_id: str, seq: int | None = None, *,
       use_snapshots: bool = True, cache: RestoreCache | None = None) -> WithPartsProjection:
    """The WithParts projection as of event ``seq`` (the latest when None); ``cache``
    keeps decoded snapshot indexes and message views for the next calls."""
    check_id("session", session_id)  # a typed refusal of a wrong type, before any lookup
    seq = store.version(session_id) if seq is None else seq
    _check_seq(store, session_id, seq)
    proj = latest_snapshot(store, session_id, seq, cache=cache) if use_snapshots else None
    if proj is None:
        proj = WithPartsProjection(session_id)
    if proj.seq < seq:
        # As WithPartsProjection.replay reads: the fold reads no event id (a store then
        # makes none: half the read of a replay), and the collector waits for the end.
        with collector_paused():
            proj.apply_all(read_bulk(store, session_id, proj.seq + 1, seq, ids=False))
    return proj


def at_time(store: Store, session_id: str, time_ms: int, *,
            use_snapshots: bool = True) -> WithPartsProjection:
    """The state after the longest prefix of events whose times are <= ``time_ms``."""
    return at(store, session_id, store.seq_at_time(session_id, time_ms),
              use_snapshots=use_snapshots)


class Snapshotter:
    """A session subscriber: folds events into a projection, snapshots it every K events."""

    def __init__(self, store: Store, projection: WithPartsProjection, *,
                 every: int = DEFAULT_EVERY) -> None:
        if every < 1:
            raise ValueError("every must be >= 1")
        self.store = store
        self.projection = projection
        self.every = every
        self._writer = SnapshotWriter(store, projection.session_id)

    def __call__(self, e: Event) -> None:
        self.projection.apply(e)
        if e.seq % self.every == 0:
            self._writer.write(self.projection)


def write_snapshots(store: Store, session_id: str, *, every: int = DEFAULT_EVERY) -> int:
    """Fold a stored session and snapshot it every K events; below the block size
    (``engine.store.blocks.BLOCK_MAX``) also at the end of each sealed block, where
    the store has them. Returns how many were written.

    An ``at(seq)`` decodes each sealed block its tail touches; with a snapshot at
    every block's end, no tail crosses into a second one."""
    proj = WithPartsProjection(session_id)
    writer = SnapshotWriter(store, session_id)
    sealed_ends = getattr(store, "sealed_ends", None)
    ends = (set(sealed_ends(session_id))
            if sealed_ends is not None and every < blocks.BLOCK_MAX else set())
    written = 0
    for e in store.read(session_id):
        proj.apply(e)
        if e.seq % every == 0 or e.seq in ends:
            writer.write(proj)
            written += 1
    return written


class Timeline:
    """Random access to every past state of a session, in memory.

    Built by one fold over the log; keeps a frozen state every ``every`` events.
    Frozen states share each message view that did not change in between.
    """

    def __init__(self, store: Store, session_id: str, *, every: int = DEFAULT_EVERY) -> None:
        if every < 1:
            raise ValueError("every must be >= 1")
        self.store = store
        self.session_id = session_id
        self.every = every
        proj = WithPartsProjection(session_id)
        self._frozen: list[FrozenState] = [proj.freeze()]
        self._times: list[int] = []
        for e in store.read(session_id):
            proj.apply(e)
            self._times.append(e.time)
            if e.seq % every == 0:
                self._frozen.append(proj.freeze())
        self.version = proj.seq
        self.latest = proj

    def at(self, seq: int) -> WithPartsProjection:
        if not isinstance(seq, int) or not 0 <= seq <= self.version:
            raise InvalidArgument("Timeline.at", f"seq {seq!r} is outside 0..{self.version}")
        state = self._frozen[min(seq // self.every, len(self._frozen) - 1)]
        proj = WithPartsProjection.thaw(self.session_id, state)
        if state.seq < seq:
            proj.apply_all(read_bulk(self.store, self.session_id, state.seq + 1, seq))
        return proj

    def seq_at_time(self, time_ms: int) -> int:
        """Length of the longest prefix whose events all have time <= time_ms."""
        running = -(1 << 62)
        for i, t in enumerate(self._times):
            running = max(running, t)
            if running > time_ms:
                return i
        return len(self._times)

    def at_time(self, time_ms: int) -> WithPartsProjection:
        # Times are usually non-decreasing; bisect when they are, scan when not.
        if all(a <= b for a, b in zip(self._times, self._times[1:], strict=False)):
            return self.at(bisect.bisect_right(self._times, time_ms))
        return self.at(self.seq_at_time(time_ms))


# --------------------------------------------------------------------------- diff

ChangeKind = Literal[
    "message-added", "message-removed", "message-completed", "message-changed",
    "part-added", "part-removed", "part-ended", "text-grown", "tool-state", "part-changed",
]


@attrs.frozen
class Change:
    kind: ChangeKind
    message_id: str
    part_id: str | None = None
    before: str | None = None
    after: str | None = None
    detail: str = ""

    def render(self) -> str:
        where = self.message_id[-12:] + (f"/{self.part_id}" if self.part_id else "")
        move = (f" {self.before or '-'} -> {self.after or '-'}"
                if self.before or self.after else "")
        extra = f" ({self.detail})" if self.detail else ""
        return f"{self.kind:<18} {where}{move}{extra}"


@attrs.frozen
class Diff:
    a: int
    b: int
    changes: tuple[Change, ...]

    def render(self) -> str:
        head = f"diff {self.a} -> {self.b}: {len(self.changes)} change(s)"
        return "\n".join([head, *("  " + c.render() for c in self.changes)])

    def as_json(self) -> dict[str, Any]:
        return {"a": self.a, "b": self.b, "changes": [attrs.asdict(c) for c in self.changes]}


def _part_label(p: v.Part) -> str:
    if isinstance(p, v.ToolPart):
        return f"tool {p.tool} {p.state.TAG}"
    return p.TAG


def _part_changes(mid: str, pa: v.Part, pb: v.Part) -> list[Change]:
    if pa == pb:
        return []
    out: list[Change] = []
    if isinstance(pa, v.ToolPart) and isinstance(pb, v.ToolPart):
        if pa.state.TAG != pb.state.TAG:
            detail = pb.state.error if isinstance(pb.state, v.ToolStateError) else ""
            out.append(Change("tool-state", mid, pa.id, pa.state.TAG, pb.state.TAG, detail))
        elif pa.state != pb.state or pa.approval != pb.approval:
            out.append(Change("part-changed", mid, pa.id, detail=f"tool {pa.tool} updated"))
        return out
    if isinstance(pa, v.TextPart | v.ReasoningPart) and type(pa) is type(pb):
        assert isinstance(pb, v.TextPart | v.ReasoningPart)
        if pa.text != pb.text:
            if pb.text.startswith(pa.text):
                out.append(Change("text-grown", mid, pa.id, detail=f"+{len(pb.text) - len(pa.text)}"
                                  f" chars, now {len(pb.text)}"))
            else:
                out.append(Change("part-changed", mid, pa.id, detail="text rewritten"))
        end_a = pa.time.end if pa.time else None
        end_b = pb.time.end if pb.time else None
        if end_a is None and end_b is not None:
            out.append(Change("part-ended", mid, pa.id))
        if not out:
            out.append(Change("part-changed", mid, pa.id))
        return out
    return [Change("part-changed", mid, pa.id, _part_label(pa), _part_label(pb))]


def diff_states(a: list[v.WithParts], b: list[v.WithParts], *, seq_a: int = 0,
                seq_b: int = 0) -> Diff:
    """What changed from state ``a`` to state ``b`` (either may be the later one)."""
    before = {m.info.id: m for m in a}
    after = {m.info.id: m for m in b}
    changes: list[Change] = []
    for mid, mb in after.items():
        ma = before.get(mid)
        if ma is None:
            changes.append(Change("message-added", mid, after=mb.info.role,
                                  detail=f"{len(mb.parts)} part(s)"))
            changes += [Change("part-added", mid, p.id, after=_part_label(p)) for p in mb.parts]
            if mb.info.time.completed is not None:
                changes.append(Change("message-completed", mid))
            continue
        if ma.info != mb.info:
            if ma.info.time.completed is None and mb.info.time.completed is not None:
                err = getattr(mb.info, "error", None)
                changes.append(Change("message-completed", mid,
                                      detail=f"error {err.kind}" if err else ""))
            else:
                changes.append(Change("message-changed", mid))
        parts_a = {p.id: p for p in ma.parts}
        parts_b = {p.id: p for p in mb.parts}
        for pid, pb in parts_b.items():
            pa = parts_a.get(pid)
            if pa is None:
                changes.append(Change("part-added", mid, pid, after=_part_label(pb)))
            else:
                changes += _part_changes(mid, pa, pb)
        changes += [Change("part-removed", mid, pid, before=_part_label(pa))
                    for pid, pa in parts_a.items() if pid not in parts_b]
    changes += [Change("message-removed", mid, before=ma.info.role)
                for mid, ma in before.items() if mid not in after]
    return Diff(seq_a, seq_b, tuple(changes))


def diff(store: Store, session_id: str, a: int, b: int) -> Diff:
    """Which messages and parts were added, changed or ended between seq ``a`` and ``b``."""
    return diff_states(at(store, session_id, a).messages(), at(store, session_id, b).messages(),
                       seq_a=a, seq_b=b)
