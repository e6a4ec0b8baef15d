"""The block codec as one object: what the SQL recorders and their readers ask of it.

SQLite and PostgreSQL store events in blocks (:mod:`engine.store.blocks`): tail
blocks and sealed, compressed ones. The recorders and readers never call that
module by name; each holds a ``codec`` (a :class:`BlockCodec`, by default the module
``engine.store.blocks`` itself, which satisfies the protocol as it stands) and calls
``self.codec.decode(...)``, like eventsourcing's mapper holds a swappable
``Compressor``. A store built with another codec (``SQLiteStore(path,
codec=mine)``) writes and reads through it: a codec that wraps ``blocks`` to count or
trace, or a new block layout with its legacy reader kept in ``engine.store.legacy``.

The protocol lists exactly the functions and constants the recorders and readers
use, so mypy checks a replacement against what is really called.

The JSONL store's sealed part is the same idea over another layout: gzip members
(:mod:`engine.store.jsonl_blocks`), held as a :class:`MemberCodec` by the JSONL
recorder, its tail reader, its sealer and its verification reader
(``JSONLStore(dir, codec=mine)``). Its calls differ from a SQL block's (a member
is found in a file by scanning headers, its payload inflated apart from decoding),
so it is a protocol of its own rather than a stretched :class:`BlockCodec`.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, Protocol

from engine.events import AnyEvent, Event
from engine.store import jsonl_blocks
from engine.store.blocks import Link, Sealed
from engine.store.jsonl_blocks import BadMember, BlockRef
from engine.store.runs import Run


class BlockCodec(Protocol):
    """Encode, seal, decode and inspect the block rows of a SQL store."""

    # Constants: read-only, so a module's plain ints and an object's attributes both fit.
    @property
    def SEAL_AT(self) -> int: ...  # noqa: N802 - named as the module's constant
    @property
    def BLOCK_MAX(self) -> int: ...  # noqa: N802
    @property
    def TAIL(self) -> bytes: ...  # noqa: N802 - the first byte of a tail block

    # Writing: tail blocks, their merge, sealing.
    def encode(self, canon: Sequence[bytes], hashes: Sequence[bytes], maxv: int) -> bytes: ...
    def join_tail(self, rows: Iterable[tuple[int, bytes]]
                  ) -> tuple[list[bytes], list[bytes], list[int]]: ...
    def sealed_rows(self, link: Link, session_id: str, prev: bytes, *, first: int,
                    canon: Sequence[bytes], hashes: Sequence[bytes], times: Sequence[int],
                    maxv: int) -> list[tuple[int, int, int, bytes]]: ...
    def max_version(self, events: Sequence[Event]) -> int: ...
    def id_key(self, event_id: str) -> bytes: ...
    def low_keys(self, event_ids: list[str | None]) -> list[int] | None: ...

    # Reading.
    def decode(self, body: bytes, session_id: str = "") -> list[AnyEvent]: ...
    def decode_range(self, body: bytes, lo: int, hi: int,
                     session_id: str = "") -> list[AnyEvent]: ...
    def decode_events_range(self, body: bytes, lo: int, hi: int,
                            session_id: str = "") -> list[AnyEvent]: ...
    def decode_runs(self, body: bytes, session_id: str = "", *, ids: bool = True
                    ) -> list[AnyEvent | Run]: ...
    def decode_runs_range(self, body: bytes, lo: int, hi: int,
                          session_id: str = "") -> list[AnyEvent | Run]: ...
    def raw_events(self, body: bytes, session_id: str = "") -> list[bytes]: ...

    # Inspecting and verifying.
    def is_sealed(self, body: bytes) -> bool: ...
    def sealed_head(self, body: bytes) -> Sealed: ...
    def split(self, body: bytes) -> tuple[list[bytes], list[bytes]]: ...
    def link_holds(self, link: Link, session_id: str, prev: bytes, body: bytes) -> bool: ...
    def typed_events(self, body: bytes, session_id: str) -> list[AnyEvent] | None: ...
    def stored_events(self, body: bytes, session_id: str
                      ) -> list[tuple[bytes, dict[str, Any] | None, AnyEvent | None]]: ...
    def canonical_events(self, body: bytes, session_id: str) -> list[bytes]: ...
    def canonical_all(self, events: list[AnyEvent]) -> list[bytes]: ...
    def builtins(self, canon: bytes) -> dict[str, Any]: ...


class MemberCodec(Protocol):
    """Seal, find, inflate, decode and check the gzip members of a JSONL ``.blocks`` file."""

    # Constants: when a tail is sealed (events or bytes), and at most how many per member.
    @property
    def SEAL_AT(self) -> int: ...  # noqa: N802 - named as the module's constant
    @property
    def SEAL_BYTES(self) -> int: ...  # noqa: N802

    # Writing.
    def encode(self, events: Sequence[Event], session_id: str, head: bytes,
               positions: Sequence[int], *, link: jsonl_blocks.Link, prev: bytes) -> bytes: ...

    # Finding and opening members.
    def scan(self, data: bytes, offset: int, next_seq: int
             ) -> tuple[list[BlockRef], BadMember | None]: ...
    def payload(self, member: bytes) -> bytes: ...

    # Decoding a payload.
    def decode(self, body: bytes, session_id: str, first_seq: int) -> list[AnyEvent]: ...
    def decode_range(self, body: bytes, session_id: str, first_seq: int, lo: int,
                     hi: int) -> list[AnyEvent]: ...
    def builtins(self, body: bytes, session_id: str, first_seq: int
                 ) -> list[dict[str, Any]]: ...

    # Verifying.
    def link_holds(self, link: jsonl_blocks.Link, session_id: str, prev: bytes,
                   member: bytes) -> bool: ...
