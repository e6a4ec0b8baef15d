"""Reading a JSONL session's files incrementally (``engine.store.jsonl``): the index of
its sealed members (``<id>.blocks``) and the offsets of its live tail lines
(``<id>.jsonl``), kept per session and caught up with what other processes
appended or sealed, with every event id seen put in the store's id index."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import msgspec

from engine.errors import CorruptLog, EventDecodeError
from engine.store import jsonl_lines
from engine.store.codec_protocol import MemberCodec
from engine.store.jsonl_blocks import BadMember, BlockRef

# event id -> (session id, seq, global position)
Ids = dict[str, tuple[str, int, int]]


class TailState:
    """What this process knows of one session's files (parsed incrementally): the
    sealed members' index and the tail lines' offsets, caught up by ``parse_blocks``
    and ``read_tail`` with what other processes appended or sealed."""

    __slots__ = ("bad_block", "base", "blocks", "blocks_size", "gap", "genesis", "head",
                 "offsets", "paths", "positions", "sealed", "sealed_head", "size", "stale",
                 "stale_end", "tail_ino", "version")

    def __init__(self, base: int, genesis: bytes) -> None:
        self.base = base  # own seqs start after it (a fork's fork_seq)
        self.genesis = genesis
        self.blocks: list[BlockRef] = []
        self.blocks_size = 0  # bytes of .blocks parsed
        self.bad_block: BadMember | None = None  # the first unreadable member
        self.sealed = base  # the last seq in blocks
        self.sealed_head = genesis
        self.tail_ino = -1
        self.paths = ("", "")  # the tail's and the blocks' file names
        self.reset_tail()

    def reset_tail(self) -> None:
        self.size = 0  # bytes of the tail parsed
        self.stale = 0  # tail lines a block holds already (a seal cut short)
        self.stale_end = 0  # byte offset of the first tail line after them
        self.offsets: list[int] = []  # of the tail lines after the stale ones
        self.positions: list[int] = []
        self.version = self.sealed
        self.head = self.sealed_head
        self.gap: str | None = None

    def own(self) -> bool:
        return bool(self.blocks or self.offsets)

    def unchanged(self) -> bool:
        """Two stats instead of two reads when no one wrote since ``st`` was read."""
        try:
            tail = os.stat(self.paths[0])
        except FileNotFoundError:
            return False
        if tail.st_ino != self.tail_ino or tail.st_size != self.size:
            return False
        try:
            return os.stat(self.paths[1]).st_size == self.blocks_size
        except FileNotFoundError:
            return self.blocks_size == 0

    def blocks_grew(self) -> bool:
        try:
            size = Path(self.paths[1]).stat().st_size
        except FileNotFoundError:
            return False
        return self.bad_block is None and size > self.blocks_size

    def read_tail(self, session_id: str, ids: Ids) -> None:
        """Parse the lines appended to the tail since the last call (ids into ``ids``)."""
        path = self.paths[0]
        try:
            with open(path, "rb") as f:
                info = os.fstat(f.fileno())
                if info.st_ino != self.tail_ino:  # new, or replaced by a seal
                    self.tail_ino = info.st_ino
                    self.reset_tail()
                data = b""
                if info.st_size > self.size:
                    f.seek(self.size)
                    data = f.read(info.st_size - self.size)
        except FileNotFoundError:
            self.tail_ino = -1
            self.reset_tail()
            return
        end = data.rfind(b"\n") + 1  # a partial last line is being written (or torn)
        offset = self.size
        for line in data[:end].split(b"\n")[:-1]:
            try:
                rec = jsonl_lines.line_dec.decode(line)
                env = jsonl_lines.envelope(rec.event)
                h = bytes.fromhex(rec.hash)
            except (msgspec.DecodeError, ValueError) as exc:
                raise CorruptLog(session_id, self.version + 1,
                                 f"unreadable line at byte {offset}: {exc}") from None
            if offset == 0 and (self.blocks or self.bad_block is not None):
                self.place_tail(env.seq)
            if self.stale_end == offset and self.base < env.seq <= self.sealed and self.stale:
                self.stale_end = offset + len(line) + 1  # a line a block holds already
            else:
                self.version += 1
                self.head = h
                self.offsets.append(offset)
                self.positions.append(rec.pos)
                ids[env.id] = (session_id, env.seq, rec.pos)
            offset += len(line) + 1
        self.size = offset
        if self.bad_block is not None and not self.offsets and not self.stale and self.gap is None:
            self.gap = f"sealed events after seq {self.sealed} are unreadable: {self.bad_block}"

    def place_tail(self, first_seq: int) -> None:
        """Where the tail starts, from its first line's seq: right after the blocks, or
        earlier when a seal was cut short (those lines are skipped)."""
        if self.base < first_seq <= self.sealed:
            self.stale = self.sealed - first_seq + 1
        elif first_seq > self.sealed + 1:
            self.gap = (f"sealed events from seq {self.sealed + 1} are unreadable: "
                      f"{self.bad_block}" if self.bad_block is not None else
                      f"the tail starts at seq {first_seq}, but the sealed blocks end at "
                      f"seq {self.sealed}")

    def parse_blocks(self, codec: MemberCodec, session_id: str, ids: Ids) -> bool:
        """Index new members of ``.blocks`` (each one's ids: members are inflated once,
        through the store's member ``codec``). True when there were new ones."""
        if self.bad_block is not None:
            return False
        path = Path(self.paths[1])
        try:
            with open(path, "rb") as f:
                f.seek(self.blocks_size)
                data = f.read()
        except FileNotFoundError:
            return False
        if not data:
            return False
        before = len(self.blocks)
        refs, bad = codec.scan(data, 0, self.sealed + 1)
        payload, decode = codec.payload, codec.decode
        for found in refs:
            member = data[found.offset:found.offset + found.length]
            ref = found._replace(offset=found.offset + self.blocks_size)
            try:
                events = decode(payload(member), session_id, ref.first_seq)
            except (BadMember, EventDecodeError) as exc:
                bad = BadMember(ref.offset, str(exc))
                break
            for e, pos in zip(events, ref.positions, strict=True):
                ids[e.id] = (session_id, e.seq, pos)
            self.blocks.append(ref)
            self.sealed = ref.last_seq
            self.sealed_head = ref.head
        if bad is not None:
            self.bad_block = BadMember(bad.offset + self.blocks_size if bad.offset < len(data)
                                     else bad.offset, str(bad), torn=bad.torn)
        self.blocks_size = self.blocks[-1].offset + self.blocks[-1].length if self.blocks else 0
        return len(self.blocks) > before

    def tail_lines(self, lo: int, hi: int) -> list[bytes] | None:
        """Tail lines with index lo..hi-1 (index 0: seq ``self.sealed + 1``); None when the
        tail file was replaced (sealed by another process) since ``st`` was read."""
        hi = min(hi, len(self.offsets))
        if lo >= hi:
            return []
        start = self.offsets[lo]
        stop = self.offsets[hi] if hi < len(self.offsets) else self.size
        try:
            with open(self.paths[0], "rb") as f:
                if os.fstat(f.fileno()).st_ino != self.tail_ino:
                    return None
                f.seek(start)
                data = f.read(stop - start)
        except FileNotFoundError:
            return None
        return data.split(b"\n")[:-1]


def position_ranges(ref: BlockRef) -> Iterator[tuple[int, int, int]]:
    """(first seq, first position, count) of a sealed member's position runs."""
    seq = ref.first_seq
    for pos, n in ref.runs:
        yield seq, pos, n
        seq += n
