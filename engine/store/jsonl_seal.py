"""Sealing a JSONL session's tail (``engine.store.jsonl``): its lines become gzip
members of ``<id>.blocks`` of up to ``SEAL_AT`` events each, made by the store's
member codec (by default :mod:`engine.store.jsonl_blocks`). A member is made only
when its events, decoded, reproduce the stored hashes exactly, so sealing never
changes the chain."""

from __future__ import annotations

import os
from pathlib import Path

import msgspec

from engine.codec import canonical
from engine.errors import StoreError
from engine.events import Event
from engine.logging import get_logger
from engine.store import jsonl_files, jsonl_lines
from engine.store.chain import Chain
from engine.store.codec_protocol import MemberCodec
from engine.store.jsonl_blocks import BlockRef

log = get_logger("convlog.store.jsonl")


def members(codec: MemberCodec, chain: Chain, session_id: str, sealed_head: bytes,
            lines: list[bytes]) -> list[tuple[bytes, BlockRef]] | None:
    """The gzip members of these tail lines (and what they will index), or None
    (with a warning) when their events, decoded, would not reproduce the stored
    hashes exactly."""
    events: list[Event] = []
    hashes: list[bytes] = []
    positions: list[int] = []
    prev = sealed_head
    try:
        for line in lines:
            rec = jsonl_lines.line_dec.decode(line)
            e = jsonl_lines.typed_event(rec.event)
            h = bytes.fromhex(rec.hash)
            if chain.link(prev, canonical(e)) != h:
                raise ValueError(f"seq {e.seq} would not hash to its stored hash")
            events.append(e)
            hashes.append(h)
            positions.append(rec.pos)
            prev = h
    except (msgspec.DecodeError, msgspec.ValidationError, ValueError) as exc:
        log.warning("jsonl_seal_skipped", session_id=session_id, reason=str(exc))
        return None
    out = []
    before = sealed_head
    seal_at, encode, scan = codec.SEAL_AT, codec.encode, codec.scan
    for i in range(0, len(events), seal_at):
        chunk = events[i:i + seal_at]
        head = hashes[i + len(chunk) - 1]
        member = encode(chunk, session_id, head, positions[i:i + seal_at],
                        link=chain.link, prev=before)
        before = head
        refs, bad = scan(member, 0, chunk[0].seq)
        if bad is not None or len(refs) != 1:  # never: the member was just made
            raise StoreError(f"a new block does not read back: {bad}")
        out.append((member, refs[0]))
    return out


def write(blocks_path: Path, tail: Path, members: list[bytes], rest: bytes) -> int:
    """Append ``members`` to the blocks file (fsynced), then replace the tail file by
    ``rest`` (what followed the sealed lines); the offset the members start at."""
    new_file = not blocks_path.exists()
    with open(blocks_path, "ab") as f:
        start = f.seek(0, os.SEEK_END)
        f.write(b"".join(members))
        f.flush()
        os.fsync(f.fileno())
    if new_file:
        jsonl_files.fsync_dir(tail.parent)
    # The blocks are durable: now the tail may lose its lines. The new tail is
    # normally empty (nothing to fsync); the rename itself must last before a
    # later append lands in the new file.
    jsonl_files.write_atomic(tail, rest, durable=bool(rest))
    if not rest:
        jsonl_files.fsync_dir(tail.parent)
    return start
