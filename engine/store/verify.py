"""Check a stored log end to end: seqs, hash chain, decodability, legality, heads, positions.

For each session (through its fork lineage) every stored event must:

1. carry the next seq (own seqs are gapless from the fork point) and its session id;
2. hash to the stored value: ``H(previous hash || canonical bytes)`` (an edit, a
   removal or a swap breaks the chain at the first changed event). A sealed block
   (:mod:`engine.store.blocks`) stores only its last event's hash and a block link
   over its stored bytes: the link is checked, and the hashes inside are recomputed
   and must end at the stored last one;
3. decode (after upcasting) into a catalog event;
4. be legal: replayed through :meth:`engine.lifecycle.Lifecycle.apply`, the same
   gate every append passed (a sealed block's events as one
   :meth:`~engine.lifecycle.Lifecycle.apply_batch`, an append's own gate, and one
   by one when that batch does not accept them all, to name the first problem);

and the log must reach the head the store recorded for the session (a cut tail
shows up there), and global positions must be exactly ``1..last_position``.
What a chain cannot show: someone who rewrites a tail *and* the head record. With
an unkeyed chain they can also recompute hashes; a keyed (HMAC) chain stops that.
Heads kept somewhere else (``anchored``, see :mod:`engine.store.anchor`) catch it.

Two depths. The default (``deep=True``) does all of the above. The chain walk
(``deep=False``, ``convlog verify --fast``) checks seqs, block links, every event's
chain hash (inside a sealed block too: recomputed from the stored events' canonical
bytes and required to end at the block's last hash), heads, anchors and positions;
it skips 3 and 4 and the id index. Against tampering it is as strong as the deep
check, keyed or not, with or without anchors: an unkeyed block link anyone can
recompute, so it is never trusted alone for the events inside. What it does not
re-check is that the events decode into the catalog and that their transitions
are legal.

Damage never escapes as an exception: whatever a damaged file makes the store
raise while a session is read becomes a :class:`Problem` at the first seq that
could not be checked. A keyed store checked without its key raises
:class:`~engine.errors.KeyRequired` up front: its hashes cannot be recomputed,
which is no evidence of tampering.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

import attrs

from engine.codec import canonical, from_stored, upcasting_active
from engine.errors import ConvlogError, KeyRequired, StoreError
from engine.events import AnyEvent, Event, tag_of
from engine.lifecycle import Lifecycle
from engine.store import blocks
from engine.store.base import Span, Store, Stored
from engine.store.chain import GENESIS
from engine.store.composed import ComposedStore, VerifyReader


@attrs.frozen
class Problem:
    session_id: str
    seq: int
    reason: str

    def __str__(self) -> str:
        return f"session {self.session_id} seq {self.seq}: {self.reason}"


@attrs.define
class Report:
    sessions: int = 0
    events: int = 0
    problems: list[Problem] = attrs.field(factory=list)
    heads: dict[str, tuple[int, str]] = attrs.field(factory=dict)

    @property
    def ok(self) -> bool:
        return not self.problems

    @property
    def first(self) -> Problem | None:
        return self.problems[0] if self.problems else None


Progress = Callable[[int], None]


def require_key(store: Store) -> None:
    """Raise :class:`KeyRequired` when the store is keyed and was opened without its
    key, and :class:`StoreError` when it is unkeyed and was opened with one."""
    # Stores keep why they refuse appends in ``_refuse``; opened keyless on a keyed
    # store, that is the only sign (the key itself is never stored).
    if store.chain.key is not None and getattr(store, "_refuse", None):
        # An unkeyed store opened with a key: every recomputed hash would be an HMAC
        # and differ, which says nothing about tampering (a wrong option, exit 2).
        raise StoreError(f"{store.url} was created without a key (its chain is plain "
                         "SHA-256): --key-file does not apply; verify it without one")
    if store.chain.key is None and getattr(store, "_refuse", None):
        raise KeyRequired(f"{store.url} is keyed (its hash chain is an HMAC): give its key "
                          "(--key-file) to verify it; without the key nothing can be said "
                          "about tampering")


def reader_of(store: Store) -> VerifyReader:
    """What verification walks: the store's reader, over what its recorder selects
    (every built-in store is a :class:`ComposedStore`)."""
    if not isinstance(store, ComposedStore):
        raise StoreError(f"{store.url} cannot be verified: it is no store composed of a "
                         "recorder and a verification reader")
    return store.reader


def verify(store: Store, session_id: str | None = None, *,
           anchored: Mapping[str, tuple[int, bytes]] | None = None,
           progress: Progress | None = None, deep: bool = True) -> Report:
    """Verify one session (with the ancestors' shared prefix) or the whole store.

    ``deep`` (the default) checks everything below. ``deep=False`` is the chain walk
    only: seqs, the hash chain (per event, inside sealed blocks too, plus each block's
    link), the heads, the anchors and the positions, without decoding events into the
    catalog or replaying transitions.

    ``anchored`` maps session ids to a (seq, hash) head kept elsewhere: the log must
    still hold that seq with that hash, so a cut or rewritten tail is caught even
    when the head record beside the log was rewritten too. ``progress`` is called
    now and then with the number of events checked so far.
    """
    require_key(store)
    report = Report()
    anchored = dict(anchored or {})
    try:
        infos = [store.session_info(session_id)] if session_id else store.sessions()
    except ConvlogError as exc:
        if session_id is not None and not isinstance(exc, StoreError):
            raise  # an unknown or malformed session id is the caller's mistake
        report.problems.append(Problem("*", 0, f"cannot list the sessions: {exc}"))
        return report
    except Exception as exc:  # any failure to read is damage, reported as such
        report.problems.append(Problem("*", 0, f"cannot list the sessions: {_what(exc)}"))
        return report
    positions: list[tuple[int, int]] = []
    id_positions: dict[int, str] = {}  # global position -> event id (deep)
    for info in infos:
        problem = _verify_session(store, info.id, report, positions, id_positions,
                                  anchored=anchored, progress=progress, deep=deep)
        report.sessions += 1
        if problem is not None:
            report.problems.append(problem)
    known = {info.id for info in infos}
    for sid, (seq, _) in sorted(anchored.items()):
        if sid not in known and (session_id is None or sid == session_id):
            report.problems.append(Problem(sid, seq, "the anchored session is not in the "
                                                     "store: it was removed"))
    if session_id is None and report.ok:
        try:
            _check_positions(store, positions, report)
        except Exception as exc:  # unreadable positions are damage too
            report.problems.append(Problem("*", 0, f"unreadable positions: {_what(exc)}"))
    if session_id is None and report.ok and deep:
        try:
            wrong = reader_of(store).verify_ids(id_positions)
        except Exception as exc:
            wrong = f"unreadable: {_what(exc)}"
        if wrong is not None:
            report.problems.append(Problem("*", 0, f"the event id index: {wrong}"))
    return report


def _what(exc: BaseException) -> str:
    text = str(exc).splitlines()[0] if str(exc) else ""
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _verify_session(store: Store, session_id: str, report: Report,
                    positions: list[tuple[int, int]], id_positions: dict[int, str], *,
                    anchored: Mapping[str, tuple[int, bytes]], progress: Progress | None,
                    deep: bool) -> Problem | None:
    """The first problem of one session, or None; whatever damaged bytes make the store
    raise becomes a problem at the first seq that could not be checked."""
    seq = 0
    try:
        walk = _Walk(store, session_id, report, anchored=anchored, progress=progress, deep=deep)
        problem = walk.run()
        seq = walk.seq
        if problem is None:
            problem = _check_own_positions(store, session_id, walk, positions, id_positions)
        return problem
    except Exception as exc:  # any failure to read is damage, reported at the first
        # seq that could not be checked
        return Problem(session_id, seq + 1, f"unreadable: {_what(exc)}")


class _Walk:
    """One session's walk through its lineage: ``prev`` is the chain hash so far,
    ``seq`` the last seq checked."""

    def __init__(self, store: Store, session_id: str, report: Report, *,
                 anchored: Mapping[str, tuple[int, bytes]], progress: Progress | None,
                 deep: bool) -> None:
        self.store = store
        self.reader = reader_of(store)
        self.session_id = session_id
        self.report = report
        self.anchor_seq, self.anchor_hash = anchored.get(session_id, (-1, b""))
        self.progress = progress
        self.deep = deep
        self.prev = GENESIS
        self.seq = 0
        self.own_first = 1  # the first own seq
        self.own_positions: list[tuple[int, int]] = []  # per event, where Stored has them
        self.own_ids: list[tuple[int, str]] = []  # (seq, id) of own events walked deep
        self._tick = 1024

    def _counted(self, own: bool, n: int) -> None:
        if own:
            self.report.events += n
            if self.progress is not None and self.report.events >= self._tick:
                self.progress(self.report.events)
                self._tick = self.report.events + 1024

    def run(self) -> Problem | None:
        store, session_id = self.store, self.session_id
        lc = Lifecycle(session_id) if self.deep else None
        upcast = upcasting_active()  # packed events are stored as they were written
        for sid, limit in store.lineage(session_id):
            own = sid == session_id
            expected_seq = (store.session_info(sid).fork_seq or 0) + 1
            if own:
                self.own_first = expected_seq
            if expected_seq != self.seq + 1:
                return Problem(session_id, self.seq + 1,
                               f"fork point of {sid} is {expected_seq - 1}, "
                               f"but its parent's prefix ends at {self.seq}")
            if own:
                genesis = self.reader.recorded_genesis(sid)
                if genesis is not None and genesis != self.prev:
                    return Problem(session_id, expected_seq,
                                   "the chain start recorded for the session (its genesis) "
                                   + ("is not its parent's hash at the fork point"
                                      if expected_seq > 1 else "is not the root's"))
            where = session_id if own else f"{session_id} (in ancestor {sid})"
            units = iter(self.reader.units(sid, deep=self.deep))
            for st in units:
                if isinstance(st, Span):
                    if limit is not None and st.seq > limit:
                        break
                    problem = self._span(st, sid, where, expected_seq, limit=limit, own=own)
                    if problem is not None:
                        return problem
                    if lc is not None:
                        problem = self._span_events(units, st, sid, where, lc=lc, upcast=upcast,
                                                    limit=limit, own=own)
                        if problem is not None:
                            return problem
                    expected_seq = self.seq + 1
                    if limit is not None and self.seq >= limit:
                        break
                    continue
                if limit is not None and st.seq > limit:
                    break
                if st.seq != expected_seq:
                    return _out_of_order(where, st.seq, expected_seq)
                stored_event = st.event
                if stored_event is not None:
                    named: object = stored_event.session_id
                    canon = st.canon if st.canon is not None else canonical(stored_event)
                elif st.obj is None:
                    return Problem(where, expected_seq, st.error or "unreadable")
                else:
                    named = st.obj.get("session_id")
                    canon = st.canon if st.canon is not None else canonical(st.obj)
                if named != sid:
                    return Problem(where, st.seq, f"event names session {named!r}")
                h = store.chain.link(self.prev, canon)
                if h != st.hash:
                    return Problem(where, st.seq, "hash mismatch: the event was edited, moved or "
                                                  "removed (or the wrong key was given)")
                if lc is not None:
                    try:
                        e = (from_stored(dict(st.obj or {})) if stored_event is None
                             else blocks.current(stored_event) if upcast else stored_event)
                    except ConvlogError as exc:
                        return Problem(where, st.seq, f"undecodable: {exc}")
                    problem = _judge(lc, e, where, st.seq)
                    if problem is not None:
                        return problem
                self.prev = h
                self.seq = expected_seq
                expected_seq += 1
                if self.seq == self.anchor_seq and self.prev != self.anchor_hash:
                    return self._rewritten()
                self._counted(own, 1)
                if own:
                    if st.position is not None:
                        self.own_positions.append((st.position, 1))
                    self.own_ids.append((self.seq, stored_event.id if stored_event is not None
                                         else str((st.obj or {}).get("id"))))
            if limit is not None and self.seq < limit:
                return Problem(session_id, self.seq + 1,
                               f"seq {self.seq + 1} of ancestor {sid} is missing")
        return self._ends()

    def _span(self, span: Span, sid: str, where: str, expected_seq: int, *,
              limit: int | None, own: bool) -> Problem | None:
        """A sealed block: its place, its block link; unless deep (its events follow
        then), every event's chain hash inside it, recomputed from the stored events."""
        if span.seq != expected_seq:
            return _out_of_order(where, span.seq, expected_seq)
        if (span.row_first, span.row_last) != (span.seq, span.last) or span.last < span.seq:
            return Problem(where, span.seq, f"the block of seqs {span.seq}..{span.last} is "
                                            f"stored as seqs {span.row_first}..{span.row_last}")
        if not self.reader.link_holds(sid, self.prev, span):
            return Problem(where, span.seq, f"block link mismatch: the sealed block of seqs "
                                            f"{span.seq}..{span.last} was edited, moved or "
                                            "replaced (or the wrong key was given)")
        if self.deep:
            return None
        stop = span.last if limit is None else min(limit, span.last)
        # Every event's chain hash, recomputed from the stored events: the block link
        # alone proves the bytes unchanged only to whoever cannot recompute it, and an
        # unkeyed link anyone can (an event edited inside the block, its link redone,
        # would still end at the stored last hash and satisfy an anchor).
        links = self.reader.span_links(sid, self.prev, span)
        if len(links) != span.last - span.seq + 1 or links[-1] != span.head:
            return Problem(where, span.seq, f"the events of seqs {span.seq}..{span.last} "
                                            "do not chain to their block's last hash")
        if span.seq <= self.anchor_seq <= stop and links[self.anchor_seq - span.seq] != \
                self.anchor_hash:
            self.seq = self.anchor_seq
            return self._rewritten()
        self.prev = links[stop - span.seq]
        self._counted(own, stop - self.seq)
        self.seq = stop
        if self.seq == self.anchor_seq and self.prev != self.anchor_hash:
            return self._rewritten()
        return None

    def _span_events(self, units: Iterator[Stored | Span], span: Span, sid: str, where: str,
                     *, lc: Lifecycle, upcast: bool, limit: int | None,
                     own: bool) -> Problem | None:
        """The events of a sealed block, which follow its span in a deep walk, checked
        as one batch: their hashes recomputed in one call and required to end at the
        block's last hash, then each decoded and replayed (up to ``limit``)."""
        n = span.last - span.seq + 1
        if span.events is not None:  # the block's typed events, handed over whole
            typed: list[AnyEvent | None] = list(span.events)
            objs: list[dict[str, Any] | None] = [None] * len(typed)
            if len(typed) != n:
                return Problem(where, span.seq + min(len(typed), n), f"the sealed block of "
                               f"seqs {span.seq}..{span.last} holds {len(typed)} event(s)")
            if set(map(_session_of, span.events)) != {sid}:
                i = next(i for i, e in enumerate(span.events) if e.session_id != sid)
                return Problem(where, span.seq + i,
                               f"event names session {span.events[i].session_id!r}")
            canons = blocks.canonical_all(span.events)
        else:
            problem, canons, typed, objs = self._collect(units, span, sid, where, n)
            if problem is not None:
                return problem
        links = self.store.chain.links(self.prev, canons)
        stop = n if limit is None else min(n, limit - span.seq + 1)
        # Up to the block's last event when the hashes do not end at its last hash:
        # that is reported below, after the events before it (as a walk would).
        todo = stop if links[-1] == span.head else min(stop, n - 1)
        decoded: list[Event] = []
        undecodable: Problem | None = None
        if span.events is not None and not upcast:  # as stored is as read: no decode
            decoded = list(span.events[:todo])
            todo_typed = 0
        else:
            todo_typed = todo
        for i in range(todo_typed):
            event = typed[i]
            try:
                decoded.append(from_stored(dict(objs[i] or {})) if event is None
                               else blocks.current(event) if upcast else event)
            except ConvlogError as exc:
                undecodable = Problem(where, span.seq + i, f"undecodable: {exc}")
                break
        problem = _replayed(lc, decoded, where)
        if problem is not None or undecodable is not None:
            return problem or undecodable
        if own and span.events is not None:
            self.own_ids += zip(range(span.seq, span.seq + todo),
                                map(_id_of, span.events[:todo]), strict=True)
        elif own:
            for i in range(todo):
                event = typed[i]
                self.own_ids.append((span.seq + i, event.id if event is not None
                                     else str((objs[i] or {}).get("id"))))
        if links[-1] != span.head:
            return Problem(where, span.seq, f"the events of seqs {span.seq}..{span.last} "
                                            "do not chain to their block's last hash")
        if span.seq <= self.anchor_seq < span.seq + stop \
                and links[self.anchor_seq - span.seq] != self.anchor_hash:
            self.seq = self.anchor_seq
            return self._rewritten()
        self.prev = links[stop - 1]
        self.seq = span.seq + stop - 1
        self._counted(own, stop)
        return None

    @staticmethod
    def _collect(units: Iterator[Stored | Span], span: Span, sid: str, where: str, n: int
                 ) -> tuple[Problem | None, list[bytes], list[AnyEvent | None],
                            list[dict[str, Any] | None]]:
        """A sealed block's events as they follow its span, one Stored each (builtins,
        or a format whose events come one by one): the first problem, or their
        canonical bytes, typed events and builtins."""
        canons: list[bytes] = []
        typed: list[AnyEvent | None] = []
        objs: list[dict[str, Any] | None] = []
        for unit in units:
            if isinstance(unit, Span):
                break
            seq = span.seq + len(canons)
            if unit.seq != seq:
                return _out_of_order(where, unit.seq, seq), [], [], []
            event = unit.event
            if event is not None:
                named: object = event.session_id
                canons.append(unit.canon if unit.canon is not None else canonical(event))
            elif unit.obj is None:
                return Problem(where, seq, unit.error or "unreadable"), [], [], []
            else:
                named = unit.obj.get("session_id")
                canons.append(unit.canon if unit.canon is not None else canonical(unit.obj))
            if named != sid:
                return Problem(where, seq, f"event names session {named!r}"), [], [], []
            typed.append(event)
            objs.append(unit.obj)
            if len(canons) == n:
                break
        if len(canons) != n:
            return (Problem(where, span.seq + len(canons), f"the sealed block of seqs "
                            f"{span.seq}..{span.last} holds {len(canons)} event(s)"),
                    [], [], [])
        return None, canons, typed, objs

    def _rewritten(self) -> Problem:
        return Problem(self.session_id, self.seq, "the hash differs from the anchor's: the log "
                                                  "was rewritten up to here")

    def _ends(self) -> Problem | None:
        """The walk's end against the anchor and the recorded head."""
        session_id, seq, prev = self.session_id, self.seq, self.prev
        if seq < self.anchor_seq:
            return Problem(session_id, seq + 1, f"the log ends at seq {seq} but the anchor "
                                                f"records seq {self.anchor_seq}: the tail was cut")
        recorded = self.reader.recorded_head(session_id)
        if recorded is not None:
            version, head = recorded
            if version > seq:
                return Problem(session_id, seq + 1, f"the log ends at seq {seq} but the session "
                                                    f"head records version {version}: the tail was "
                                                    "cut")
            if version == seq and version and head != prev:
                return Problem(session_id, seq, "the last hash differs from the recorded head")
            # (A fork without own events records version 0: its head is the fork point.)
            version = max(version, self.own_first - 1)
            if version < seq and self.reader.head_with_events:
                # Reads stop at the recorded version: the events after it are stored but
                # hidden, and the next append would reuse their seqs.
                return Problem(session_id, version + 1,
                               f"the log continues to seq {seq} but the session head records "
                               f"version {version}: the events after it are hidden from reads")
        wrong = self.reader.write_state_problem(session_id)
        if wrong is not None:  # sound events, but the next append would damage them
            return Problem(session_id, seq, wrong)
        self.report.heads[session_id] = (seq, prev.hex())
        return None


def _session_of(e: AnyEvent) -> str:
    return e.session_id


def _id_of(e: AnyEvent) -> str:
    return e.id


def _replayed(lc: Lifecycle, events: list[Event], where: str) -> Problem | None:
    """The first illegal or repeated transition among consecutive ``events``, or None.
    They are replayed as one batch, as an append's batch is (deltas and plain part
    moves decided inline); when the batch does not accept every event as it is, the
    batch is rolled back and the events are replayed one by one through
    :meth:`Lifecycle.apply`, which names the first problem exactly."""
    if not events:
        return None
    lc.begin()
    try:
        accepted = lc.apply_batch(events)
        if len(accepted) == len(events) and all(map(operator.is_, accepted, events)):
            lc.commit()
            return None
    except ConvlogError:
        pass
    lc.rollback()
    for e in events:
        problem = _judge(lc, e, where, e.seq)
        if problem is not None:
            return problem
    return None  # (unreachable while apply_batch and apply agree)


def _judge(lc: Lifecycle, e: Event, where: str, seq: int) -> Problem | None:
    """The problem of folding ``e`` (judged as append judges it), or None."""
    try:
        if not lc.apply(e):
            return Problem(where, seq, f"{tag_of(type(e))} repeats an earlier "
                                       "transition (the log never stores no-ops)")
    except ConvlogError as exc:
        return Problem(where, seq, f"illegal transition: {exc}")
    return None


def _out_of_order(where: str, seq: int, expected_seq: int) -> Problem:
    why = ("is missing" if seq > expected_seq
           else f"is followed by seq {seq} (out of order or repeated)")
    return Problem(where, expected_seq, f"seq {expected_seq} {why}")


def _check_own_positions(store: Store, session_id: str, walk: _Walk,
                         positions: list[tuple[int, int]],
                         id_positions: dict[int, str]) -> Problem | None:
    """The session's own events each have one global position: a store that keeps them
    as ranges must cover exactly the seqs walked. Adds them to ``positions`` (and the
    ids of the events walked deep to ``id_positions``)."""
    ranges = walk.reader.own_positions(session_id)
    if ranges is None:
        positions += walk.own_positions
        return None
    ids = iter(walk.own_ids)
    pending = next(ids, None)
    expected = walk.own_first
    for seq, pos, n in sorted(ranges):
        while pending is not None and pending[0] < seq + n:
            if pending[0] >= seq:
                id_positions[pos + pending[0] - seq] = pending[1]
            pending = next(ids, None)
        if seq != expected or n < 1:
            return Problem(session_id, min(seq, expected),
                           f"the position log does not match the events: seq {expected} "
                           f"{'has no position' if seq > expected else 'has two'}")
        positions.append((pos, n))
        expected = seq + n
    if expected != walk.seq + 1 and expected > walk.own_first:
        return Problem(session_id, min(expected, walk.seq + 1),
                       f"the position log covers seqs up to {expected - 1} but the log ends at "
                       f"seq {walk.seq}")
    if expected == walk.own_first and walk.seq >= walk.own_first:
        return Problem(session_id, walk.own_first, "the session's events have no positions")
    return None


def _check_positions(store: Store, positions: Iterable[tuple[int, int]],
                     report: Report) -> None:
    """(first position, count) ranges of every event must tile 1..last_position."""
    found = sorted(positions)
    last = store.last_position()
    expected = 1
    for p, n in found:
        if p != expected:
            if p < expected:
                report.problems.append(Problem("*", 0, f"global position {p} is used twice"))
            else:
                report.problems.append(Problem(
                    "*", 0, f"global positions {expected}..{p - 1} are missing: events were "
                            "removed"))
            return
        expected += n
    if (found and last > expected - 1) or (not found and last):
        report.problems.append(Problem(
            "*", 0, f"global positions {expected}..{last} are missing: the log was cut"))
    elif last < expected - 1:  # where the next append places its events (PostgreSQL, JSONL)
        report.problems.append(Problem(
            "*", 0, f"the last position is recorded as {last}, but events hold positions up "
                    f"to {expected - 1}: the next append would reuse a position"))
