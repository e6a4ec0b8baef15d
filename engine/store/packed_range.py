"""Partial reads of a packed payload: the events ``lo..hi`` of a block, as runs.

``at(seq)`` folds the events after its snapshot, which are usually a short stretch
in the middle of one sealed block of up to 1,024 events. Decoding the whole block
to use a few dozen of its events cost more than the rest of the ``at`` call: every
body string of the block is built, and every event before ``lo`` is walked to learn
the state it leaves (time, the id generator, the message and part in force).

Here the columns are decoded with the bodies left as msgpack (``msgspec.Raw``; the
bare strings are one ``text`` anyway, sliced at the range), and
the state at ``lo`` is computed from the columns in bulk: counts and last positions
of the flag bits (bytes.translate), a sum of the time steps, and the id generator
from the last stored id before ``lo`` stepped over the time steps after it
(``packed._advance_ids``). Only the bodies of ``lo..hi`` are decoded, and the row
loop (``packed._rows``) then reads them from that state, so the result is exactly
what the whole block's decode gives there, runs cut at ``lo`` and ``hi``.

A prefix the shortcut does not cover (an absolute time among its events, or times
so large that the sums are checked event by event) is walked as before, and so is a
payload of format 1 (``packed._open`` upcasts it).
"""

from __future__ import annotations

from typing import Any, Final

import msgspec

from engine.codec import OnFirstUse, ext_hook
from engine.errors import EventDecodeError
from engine.events import AnyEvent
from engine.store import columns, packed
from engine.store.columns import Block, LazyBlock
from engine.store.packed import (
    _DAMAGE,
    FORMAT,
    FORMAT_1,
    _IdGuess,
    _NotRuns,
    _State,
)
from engine.store.runs import Run

_lazy_dec = OnFirstUse(lambda: msgspec.msgpack.Decoder(LazyBlock))  # built on first use
_body_dec = msgspec.msgpack.Decoder(ext_hook=ext_hook)  # big ints, lone surrogates
# Per flag bit: a translation of the flags column to 1 where the bit is set, else 0.
_BIT: Final = {bit: bytes(1 if i & bit else 0 for i in range(256))
               for bit in (columns.ID_STORED, columns.ACTOR_STORED, columns.MSG_NEW,
                           columns.PART_NEW, columns.V_STORED, columns.NO_BODY, columns.TIME_ABS)}


def unpack_runs_range(data: bytes | bytearray | memoryview, session_id: str,
                      first_seq: int, lo: int, hi: int) -> list[AnyEvent | Run]:
    """Seqs ``lo..hi`` (inclusive) of a payload as ``packed.unpack_runs`` gives them,
    each run cut at ``lo`` and ``hi``; any damage is :class:`EventDecodeError`."""
    return _range(data, session_id, first_seq, lo, hi, runs=True)


def unpack_events_range(data: bytes | bytearray | memoryview, session_id: str,
                        first_seq: int, lo: int, hi: int) -> list[AnyEvent]:
    """Seqs ``lo..hi`` (inclusive) of a payload as ``packed.unpack`` gives them (events,
    ids included, no runs), decoding only their bodies: the viewer's event under the
    slider, one event in the middle of a block (a whole block's decode is ~10x more)."""
    return _range(data, session_id, first_seq, lo, hi, runs=False)


def _range(data: bytes | bytearray | memoryview, session_id: str,
           first_seq: int, lo: int, hi: int, *, runs: bool) -> list[Any]:
    raw = bytes(data)
    if not raw or raw[0] not in (FORMAT, FORMAT_1):
        head = raw[:1].hex() or "empty"
        raise EventDecodeError(f"packed block: unknown format {head}")
    a, b = max(lo - first_seq, 0), max(hi - first_seq + 1, 0)
    try:
        if raw[0] == FORMAT_1:
            raise _Walk
        try:
            lazy = _lazy_dec.decode(memoryview(raw)[1:])
        except msgspec.ValidationError:  # a lone surrogate's extension in the text?
            raise _Walk from None  # (packed._open reads it, or names the damage)
        packed.check_columns(lazy.kinds, lazy.codes, lazy.flags, lazy.times, lazy.text,
                             lazy.lens)
        n = len(lazy.codes)
        a, b = min(a, n), min(b, n)
        if a >= b:
            return []
        start = _state_at(lazy, a, b)
        if start is not None:
            state, before = start
            _, after = _counts(lazy, b)
            try:
                return packed._decoded(_sub(lazy, a, b, before, after), session_id,
                                       first_seq + a, runs=runs, start=state)
            except _NotRuns:  # (the bodies were filled in place: decode them again)
                return packed._decoded(_sub(lazy, a, b, before, after), session_id,
                                       first_seq + a, runs=False, start=state)
    except (EventDecodeError, _NotRuns):
        raise
    except _Walk:
        pass
    except (msgspec.DecodeError, *_DAMAGE) as exc:
        raise EventDecodeError(f"packed block: {type(exc).__name__}: {exc}") from None
    # A prefix the shortcut does not cover: decode the columns whole and walk it.
    cut = (a, b)
    try:
        return packed._decoded(packed._open(raw), session_id, first_seq, runs=runs, cut=cut)
    except _NotRuns:
        return packed._decoded(packed._open(raw), session_id, first_seq, runs=False, cut=cut)


class _Walk(Exception):
    """A payload the shortcut does not read: decoded whole, its prefix walked."""


# How many values of each side column the events before an index use: ids, actors,
# ref indexes, versions, bodies, bare strings.
_Counts = tuple[int, int, int, int, int, int]


def _counts(block: LazyBlock, k: int) -> tuple[dict[int, bytes], _Counts]:
    head = block.flags[:k]
    marks = {bit: head.translate(table) for bit, table in _BIT.items()}
    bare = block.codes[:k].translate(packed.bare_table(tuple(block.kinds))).count(1)
    return marks, (marks[columns.ID_STORED].count(1), marks[columns.ACTOR_STORED].count(1),
                   marks[columns.MSG_NEW].count(1) + marks[columns.PART_NEW].count(1),
                   marks[columns.V_STORED].count(1),
                   k - marks[columns.NO_BODY].count(1) - bare, bare)


def _state_at(block: LazyBlock, k: int, end: int) -> tuple[_State, _Counts] | None:
    """The row loop's state before the event at index ``k``, and the side columns'
    values used by then, for a read up to index ``end``; None when the prefix needs
    a walk."""
    marks, counts = _counts(block, k)
    times = block.times
    head = times[:end]
    if marks[columns.TIME_ABS].count(1) or (
            head and (len(head) + 1) * max(*head, -min(head)) >= 1 << 63):
        return None  # times the walk checks event by event (sums may leave int64)
    msg_marks, part_marks = marks[columns.MSG_NEW], marks[columns.PART_NEW]
    refs, refidx = block.refs, block.refidx
    msg = part = ""
    j = msg_marks.rfind(1)
    if j >= 0:  # (an event's message id is taken before its part id)
        msg = refs[refidx[msg_marks.count(1, 0, j) + part_marks.count(1, 0, j)]]
    i = part_marks.rfind(1)
    if i >= 0:
        part = refs[refidx[msg_marks.count(1, 0, i + 1) + part_marks.count(1, 0, i)]]
    # The id generator: from the last stored id of ours before k (it resets every
    # count), else from the cold start, stepped over the time steps since.
    ids_marks = marks[columns.ID_STORED]
    gen = (-1, 0, 0, 0)
    since = 0
    t = 0
    n = counts[0]
    at = k
    while (at := ids_marks.rfind(1, 0, at)) >= 0:
        n -= 1
        guess = _IdGuess()
        guess.lo = -1  # resync sets it from an id of ours, never to -1
        guess.resync(packed._id_text(block.ids[n]))
        if guess.lo != -1:
            gen = (guess.ms, guess.cnt, guess.lo, guess.hi)
            since = at + 1
            t = sum(times[:since])
            break
    if since < k:
        gen = packed._advance_ids(gen, t, times[since:k])[:4]
        t += sum(times[since:k])
    ms, cnt, low, high = gen
    return (t, ms, cnt, low, high, msg, part, j >= 0, i >= 0), counts


def _sub(block: LazyBlock, a: int, b: int, before: _Counts, after: _Counts) -> Block:
    """Events ``a..b-1`` as a payload of their own, their bodies decoded."""
    lens = block.lens[before[5]:after[5]]
    start = sum(block.lens[:before[5]])
    return Block(block.kinds, block.refs, block.codes[a:b], block.flags[a:b],
                  block.times[a:b], block.ids[before[0]:after[0]],
                  block.actors[before[1]:after[1]], block.refidx[before[2]:after[2]],
                  block.vs[before[3]:after[3]],
                  packed.check_keys([_body_dec.decode(r)
                                     for r in block.bodies[before[4]:after[4]]]),
                  block.text[start:start + sum(lens)], lens)


__all__ = ["unpack_events_range", "unpack_runs_range"]
