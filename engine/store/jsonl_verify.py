"""The verification walk of a JSONL session (``engine.store.jsonl``): a reader over
the bytes of its two files, giving ``engine.store.verify`` what it checks.

Sealed members with a block link are given as :class:`Span` (one digest proves
the stored bytes) and, at depth, their events (each one's link recomputed); members
of index version 1 (no link) give their events with the chain recomputed inside
them; tail lines give their stored hash and event. Nothing here opens a file or
holds a lock: the recorder reads both files under its lock and hands them in
(:class:`JSONLReader`, what ``engine.store.verify`` is given for a JSONL store).
"""

from __future__ import annotations

from collections.abc import Generator, Iterator
from typing import Any, Protocol

import msgspec

from engine.codec import canonical
from engine.errors import CorruptLog, EventDecodeError
from engine.events import AnyEvent
from engine.store import jsonl_lines
from engine.store.base import Span, Stored
from engine.store.chain import HASH_BYTES, Chain
from engine.store.codec_protocol import MemberCodec
from engine.store.jsonl_blocks import BadMember, BlockRef
from engine.store.jsonl_tail import position_ranges


class SessionMeta(Protocol):
    """What the walk reads of a session's meta record."""

    @property
    def genesis(self) -> str: ...
    @property
    def fork_seq(self) -> int | None: ...


class JSONLFiles(Protocol):
    """What the reader needs of a JSONL recorder (``engine.store.jsonl.JSONLRecorder``
    provides it; named by shape so the two modules do not import each other)."""

    @property
    def chain(self) -> Chain: ...
    @property
    def codec(self) -> MemberCodec: ...
    def meta(self, session_id: str) -> SessionMeta: ...
    def files(self, session_id: str) -> tuple[SessionMeta, bytes, bytes]: ...
    def head_file(self, session_id: str) -> bytes | None: ...


def walk(chain: Chain, codec: MemberCodec, session_id: str, genesis: str,  # noqa: PLR0917
         base: int, data: bytes, sealed_data: bytes, ranges: list[tuple[int, int, int]], *,
         spans: bool, deep: bool) -> Generator[Stored | Span, None, bool]:
    """The units of a session whose chain starts at ``genesis`` (hex) after seq
    ``base``, from its tail file ``data`` and its blocks file ``sealed_data`` (its
    members read by ``codec``); the position ranges read go to ``ranges``. True when
    the walk reached the end (no unreadable block cut it short)."""
    refs, bad = codec.scan(sealed_data, 0, base + 1)
    payload, builtins = codec.payload, codec.builtins  # once, not per member
    try:
        prev = bytes.fromhex(genesis)
    except ValueError:
        prev = b""  # verify reports the meta file (_recorded_genesis)
    sealed = base
    for ref in refs:
        member = sealed_data[ref.offset:ref.offset + ref.length]
        found: list[AnyEvent] | str | None = None
        if spans and ref.link and deep:
            found = _typed_block(codec, session_id, ref, member)
        if spans and ref.link:
            # At depth, typed events go whole with their span: its last hash is what
            # they must reach.
            yield Span(ref.first_seq, ref.last_seq, ref.head, member,
                       row_first=ref.first_seq, row_last=ref.last_seq,
                       events=found if isinstance(found, list) else None)
        if isinstance(found, str):
            yield Stored(ref.first_seq, b"", None, found)
            return False
        if found is not None:
            prev, sealed = ref.head, ref.last_seq
            ranges.extend(position_ranges(ref))
            continue
        if not (spans and ref.link) or deep:
            try:
                objs = builtins(payload(member), session_id, ref.first_seq)
                if len(objs) != ref.size:
                    raise BadMember(-1, f"it holds {len(objs)} events, its index "
                                        f"{ref.size}")
            except (BadMember, EventDecodeError) as exc:
                yield Stored(ref.first_seq, b"", None,
                             f"unreadable block at byte {ref.offset}: {exc}")
                return False
            if spans and ref.link:  # the span's last hash is what these must reach
                for i, built in enumerate(objs):
                    yield Stored(ref.first_seq + i, b"", built, None, canon=canonical(built))
            else:
                # Only a block's last hash is stored: the others are the chain's own
                # links, so a change anywhere in the block shows at its last seq.
                last = len(objs) - 1
                for i, (built, pos) in enumerate(zip(objs, ref.positions, strict=True)):
                    c = canonical(built)
                    h = ref.head if i == last else chain.link(prev, c)
                    yield Stored(ref.first_seq + i, h, built, None, pos, c)
                    prev = h
        prev, sealed = ref.head, ref.last_seq
        ranges.extend(position_ranges(ref))
    lines = data.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    first = base + 1
    if (refs or bad is not None) and lines:
        first = _tail_seq(lines[0], base, sealed)
    if bad is not None and (not lines or first > sealed + 1):
        yield Stored(sealed + 1, b"", None, f"unreadable sealed block: {bad}")
        return False
    for i, line in enumerate(lines):
        seq = first + i
        if seq <= sealed:
            continue  # a line a block holds already (a seal cut short)
        try:
            rec = jsonl_lines.line_dec.decode(line)
            h = bytes.fromhex(rec.hash)
        except (msgspec.DecodeError, ValueError) as exc:
            yield Stored(seq, b"", None, f"unreadable line: {exc}")
            continue
        try:
            obj: Any = jsonl_lines.event_obj(rec.event)
        except msgspec.DecodeError as exc:
            yield Stored(seq, h, None, f"unreadable event: {exc}", rec.pos)
            continue
        if not isinstance(obj, dict):
            yield Stored(seq, h, None, "the event is not a JSON object", rec.pos)
            continue
        at = int(obj.get("seq", seq)) if isinstance(obj.get("seq", seq), int) else seq
        if ranges and ranges[-1][0] + ranges[-1][2] == at \
                and ranges[-1][1] + ranges[-1][2] == rec.pos:
            ranges[-1] = (ranges[-1][0], ranges[-1][1], ranges[-1][2] + 1)
        else:
            ranges.append((at, rec.pos, 1))
        yield Stored(int(obj.get("seq", seq)), h, obj, None, rec.pos)
    return True


def _typed_block(codec: MemberCodec, session_id: str, ref: BlockRef, member: bytes
                 ) -> list[AnyEvent] | str | None:
    """A sealed member's events as stored, decoded in bulk (a seal wrote only
    events whose typed form hashes to the chain); None when they do not decode
    typed (an older shape: read as builtins instead), a reason when unreadable."""
    try:
        body = codec.payload(member)
    except BadMember as exc:
        return f"unreadable block at byte {ref.offset}: {exc}"
    try:
        events = codec.decode(body, session_id, ref.first_seq)
    except EventDecodeError:
        return None
    if len(events) != ref.size:
        return (f"unreadable block at byte {ref.offset}: it holds {len(events)} events, "
                f"its index {ref.size}")
    return events

def _tail_seq(line: bytes, base: int, sealed: int) -> int:
    """The seq of the tail's first line after sealed blocks (sealed + 1 when it
    cannot be read or is not a seq of the session: the line is then reported)."""
    try:
        seq = jsonl_lines.envelope(jsonl_lines.line_dec.decode(line).event).seq
    except (msgspec.DecodeError, ValueError):
        return sealed + 1
    return seq if seq > base else sealed + 1


class JSONLReader:
    """The verification reader of a JSONL store: :func:`walk` over the files the
    recorder hands it (:meth:`JSONLFiles.files`), its meta and head records."""

    # The head file is written after the lines (a crash between leaves it behind, and
    # reads follow the lines anyway): a head behind the log is not damage here.
    head_with_events = False

    def __init__(self, recorder: JSONLFiles) -> None:
        self.recorder = recorder
        self.chain = recorder.chain
        self.codec = recorder.codec
        # Position ranges the last walk of a session saw (units), for own_positions.
        self._walked_positions: dict[str, list[tuple[int, int, int]]] = {}

    def stored(self, session_id: str) -> Iterator[Stored]:
        """Every own event with its chain hash (those inside a sealed block recomputed:
        only a block's last hash is stored)."""
        return (u for u in self._walk(session_id, spans=False, deep=True)
                if isinstance(u, Stored))

    def units(self, session_id: str, *, deep: bool) -> Iterator[Stored | Span]:
        """A :class:`Span` per linked (version 2) sealed member, followed when ``deep``
        by its events; per event a :class:`Stored` for version 1 members and the tail.
        The position ranges seen are kept for :meth:`own_positions`."""
        return self._walk(session_id, spans=True, deep=deep)

    def own_positions(self, session_id: str) -> list[tuple[int, int, int]] | None:
        # The ranges of the files the walk read, not of a later state of them.
        return self._walked_positions.pop(session_id, None)

    def recorded_genesis(self, session_id: str) -> bytes | None:
        try:
            return bytes.fromhex(self.recorder.meta(session_id).genesis)
        except ValueError as exc:
            raise CorruptLog(session_id, 0, f"unreadable genesis in its meta file: {exc}"
                             ) from None

    def link_holds(self, session_id: str, prev: bytes, span: Span) -> bool:
        return self.codec.link_holds(self.chain.link, session_id, prev, span.body)

    def span_links(self, session_id: str, prev: bytes, span: Span) -> list[bytes]:
        objs = self.codec.builtins(self.codec.payload(span.body), session_id, span.seq)
        return self.chain.links(prev, [canonical(o) for o in objs])

    def verify_ids(self, ids: dict[int, str]) -> str | None:
        return None  # the id index is rebuilt from the files themselves

    def write_state_problem(self, session_id: str) -> str | None:
        return None

    def _walk(self, session_id: str, *, spans: bool, deep: bool) -> Iterator[Stored | Span]:
        self._walked_positions.pop(session_id, None)
        m, data, sealed_data = self.recorder.files(session_id)
        ranges: list[tuple[int, int, int]] = []
        whole = yield from walk(self.chain, self.codec, session_id, m.genesis,
                                m.fork_seq or 0, data, sealed_data, ranges, spans=spans,
                                deep=deep)
        if spans and whole:
            self._walked_positions[session_id] = ranges

    def recorded_head(self, session_id: str) -> tuple[int, bytes] | None:
        """(own version, hash) from the head file, None when there is none yet; a damaged
        head file is damage (CorruptLog), not a missing head."""
        data = self.recorder.head_file(session_id)
        if data is None:
            return None
        try:
            version, head = data.decode("ascii").split()
            if not version.isdigit() or len(head) != 2 * HASH_BYTES:
                raise ValueError("not '<version> <hash>'")
            return int(version), bytes.fromhex(head)
        except ValueError as exc:  # UnicodeDecodeError included
            raise CorruptLog(session_id, 0, f"unreadable {session_id}.head: {exc}") from None
