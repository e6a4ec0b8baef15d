"""Check a stored log end to end: seqs, hash chain, decodability, legality, heads, positions.

For each session (through its fork lineage) every stored event must:

1. carry the next seq (own seqs are gapless from the fork point) and its session id;
2. hash to the stored value: ``H(previous hash || canonical bytes)`` (an edit, a
   removal or a swap breaks the chain at the first changed event);
3. decode (after upcasting) into a catalog event;
4. be legal: replayed through :meth:`engine.lifecycle.Lifecycle.apply`, the same
   gate every append passed;

and the log must reach the head the store recorded for the session (a cut tail
shows up there), and global positions must be exactly ``1..last_position``.
What a chain cannot show: someone who rewrites a tail *and* the head record. With
an unkeyed chain they can also recompute hashes; a keyed (HMAC) chain stops that.
Heads kept somewhere else (``anchored``, see :mod:`engine.store.anchor`) catch it.

Damage never escapes as an exception: whatever a damaged file makes the store
raise while a session is read becomes a :class:`Problem` at the first seq that
could not be checked. A keyed store checked without its key raises
:class:`~engine.errors.KeyRequired` up front: its hashes cannot be recomputed,
which is no evidence of tampering.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

import attrs

from engine.codec import canonical, from_stored
from engine.errors import ConvlogError, KeyRequired, StoreError
from engine.events import tag_of
from engine.lifecycle import Lifecycle
from engine.store.base import Store
from engine.store.chain import GENESIS


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
    """Raise :class:`KeyRequired` when the store is keyed and was opened without its key."""
    # Stores keep why they refuse appends in ``_refuse``; opened keyless on a keyed
    # store, that is the only sign (the key itself is never stored).
    if store.chain.key is None and getattr(store, "_refuse", None):
        raise KeyRequired(f"{store.url} is keyed (its hash chain is an HMAC): give its key "
                          "(--key-file) to verify it; without the key nothing can be said "
                          "about tampering")


def verify(store: Store, session_id: str | None = None, *,
           anchored: Mapping[str, tuple[int, bytes]] | None = None,
           progress: Progress | None = None) -> Report:
    """Verify one session (with the ancestors' shared prefix) or the whole store.

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
    positions: list[int] = []
    for info in infos:
        problem = _verify_session(store, info.id, report, positions,
                                  anchored=anchored, progress=progress)
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
    return report


def _what(exc: BaseException) -> str:
    text = str(exc).splitlines()[0] if str(exc) else ""
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _verify_session(store: Store, session_id: str, report: Report, positions: list[int], *,
                    anchored: Mapping[str, tuple[int, bytes]],
                    progress: Progress | None) -> Problem | None:
    """The first problem of one session, or None; whatever damaged bytes make the store
    raise becomes a problem at the first seq that could not be checked."""
    seq = 0
    try:
        anchor_seq, anchor_hash = anchored.get(session_id, (-1, b""))
        lc = Lifecycle(session_id)
        prev = GENESIS
        lineage = store.lineage(session_id)
        seq = 0
        for sid, limit in lineage:
            own = sid == session_id
            expected_seq = (store.session_info(sid).fork_seq or 0) + 1
            if expected_seq != seq + 1:
                return Problem(session_id, seq + 1,
                               f"fork point of {sid} is {expected_seq - 1}, "
                               f"but its parent's prefix ends at {seq}")
            for st in store._own_stored(sid):
                if limit is not None and st.seq > limit:
                    break
                where = session_id if own else f"{session_id} (in ancestor {sid})"
                if st.seq != expected_seq:
                    why = ("is missing" if st.seq > expected_seq
                           else f"is followed by seq {st.seq} (out of order or repeated)")
                    return Problem(where, expected_seq, f"seq {expected_seq} {why}")
                if st.obj is None:
                    return Problem(where, expected_seq, st.error or "unreadable")
                if st.obj.get("session_id") != sid:
                    named = st.obj.get("session_id")
                    return Problem(where, st.seq, f"event names session {named!r}")
                canon = st.canon if st.canon is not None else canonical(st.obj)
                h = store.chain.link(prev, canon)
                if h != st.hash:
                    return Problem(where, st.seq, "hash mismatch: the event was edited, moved or "
                                                  "removed (or the wrong key was given)")
                try:
                    e = from_stored(dict(st.obj))
                except ConvlogError as exc:
                    return Problem(where, st.seq, f"undecodable: {exc}")
                try:
                    if not lc.apply(e):
                        return Problem(where, st.seq, f"{tag_of(type(e))} repeats an earlier "
                                                      "transition (the log never stores no-ops)")
                except ConvlogError as exc:
                    return Problem(where, st.seq, f"illegal transition: {exc}")
                prev = h
                seq = expected_seq
                expected_seq += 1
                if seq == anchor_seq and prev != anchor_hash:
                    return Problem(session_id, seq, "the hash differs from the anchor's: the log "
                                                    "was rewritten up to here")
                report.events += int(own)
                if progress is not None and not report.events & 1023:
                    progress(report.events)
                if own and st.position is not None:
                    positions.append(st.position)
            if limit is not None and seq < limit:
                return Problem(session_id, seq + 1, f"seq {seq + 1} of ancestor {sid} is missing")
        if seq < anchor_seq:
            return Problem(session_id, seq + 1, f"the log ends at seq {seq} but the anchor "
                                                f"records seq {anchor_seq}: the tail was cut")
        recorded = store._recorded_head(session_id)
        if recorded is not None:
            version, head = recorded
            if version > seq:
                return Problem(session_id, seq + 1, f"the log ends at seq {seq} but the session "
                                                    f"head records version {version}: the tail was "
                                                    "cut")
            if version == seq and version and head != prev:
                return Problem(session_id, seq, "the last hash differs from the recorded head")
        report.heads[session_id] = (seq, prev.hex())
        return None
    except Exception as exc:  # any failure to read is damage, reported at the first
        # seq that could not be checked
        return Problem(session_id, seq + 1, f"unreadable: {_what(exc)}")


def _check_positions(store: Store, positions: Iterable[int], report: Report) -> None:
    found = sorted(positions)
    last = store.last_position()
    expected = 1
    for p in found:
        if p != expected:
            if p < expected:
                report.problems.append(Problem("*", 0, f"global position {p} is used twice"))
            else:
                report.problems.append(Problem(
                    "*", 0, f"global positions {expected}..{p - 1} are missing: events were "
                            "removed"))
            return
        expected += 1
    if (found and last > found[-1]) or (not found and last):
        report.problems.append(Problem(
            "*", 0, f"global positions {expected}..{last} are missing: the log was cut"))
