"""The write side: a session turns commands into checked events and appends them.

Every command builds events, passes each through the lifecycle's table check,
appends the accepted batch to the store with the expected version, and only then
notifies subscribers. A rejection rolls the lifecycle back and leaves the log as
it was.
"""

from __future__ import annotations

import functools
import time as _time
import types
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from typing import Any, NamedTuple

import msgspec

from engine import events as ev
from engine import settle
from engine.codec import upgrade
from engine.errors import (
    ConvlogError,
    DuplicateEventId,
    EventIdConflict,
    IllegalTransition,
    InvalidArgument,
    InvalidEvent,
    PartValidationError,
)
from engine.events import DEFAULT_ACTOR, SCHEMA_VERSION, Event, tag_of
from engine.ids import EventIds, is_uuid, part_id, uuid7
from engine.lifecycle import Lifecycle
from engine.logging import get_logger
from engine.store.base import SessionInfo, Stamped, Store
from engine.store.door import INT_MAX

_FUNCTION = types.FunctionType
# Runs an iterator to its end, keeping nothing.
_drain: Callable[[Iterable[object]], None] = deque[object](maxlen=0).extend

log = get_logger("convlog.session")

Clock = Callable[[], int]
Subscriber = Callable[[Event], None]


def system_clock() -> int:
    """Milliseconds since the epoch."""
    return _time.time_ns() // 1_000_000


class StepClock:
    """A deterministic clock for reproducible sessions (tests, demos, benchmarks, imports).

    Each reading is ``step`` ms after the previous one; ``advance`` jumps ahead and
    ``now`` may be set directly.
    """

    def __init__(self, start: int = 1_700_000_000_000, step: int = 1) -> None:
        self.now = start
        self.step = step

    def __call__(self) -> int:
        self.now += self.step
        return self.now

    def advance(self, ms: int) -> None:
        """Jump forward: the next reading is at least ``now + ms``."""
        self.now += ms


class PartRef(NamedTuple):
    """Addresses a part: part ids are unique within their message (BR-02)."""

    message_id: str
    part_id: str


class Session:
    """One session's write side. Not thread-safe; one writer object per session."""

    def __init__(self, store: Store, info: SessionInfo, lifecycle: Lifecycle,
                 clock: Clock | None = None) -> None:
        self.store = store
        self.info = info
        self.id = info.id
        self._lc = lifecycle
        self._clock: Clock = clock or system_clock
        self._ids = EventIds()
        self._subscribers: list[Subscriber] = []

    # ------------------------------------------------------------------ opening

    @classmethod
    def create(cls, store: Store, session_id: str | None = None, *,
               clock: Clock | None = None) -> Session:
        clock = clock or system_clock
        sid = session_id or uuid7(clock())
        if not is_uuid(sid):
            raise PartValidationError("BR-04", f"session id {sid!r} is not a UUID")
        info = store.create_session(sid, created=clock())
        return cls(store, info, Lifecycle(sid), clock)

    @classmethod
    def open(cls, store: Store, session_id: str, *, clock: Clock | None = None) -> Session:
        info = store.session_info(session_id)
        lc = Lifecycle(session_id)
        # The version first, then the events up to it: another writer appending in
        # between must not leave the version ahead of what was folded.
        latest = store.version(session_id)
        for e in store.read(session_id, 1, latest):
            lc.replay(e)
        lc.version = latest
        return cls(store, info, lc, clock)

    @classmethod
    def open_or_create(cls, store: Store, session_id: str, *,
                       clock: Clock | None = None) -> Session:
        if any(s.id == session_id for s in store.sessions()):
            return cls.open(store, session_id, clock=clock)
        return cls.create(store, session_id, clock=clock)

    def fork(self, at: int | None = None, *, session_id: str | None = None) -> Session:
        """A new session whose history is this one's first ``at`` events (shared, not copied)."""
        at = self.version if at is None else at
        if at.__class__ is not int or not 0 <= at <= self.version:
            raise InvalidArgument("Session.fork", f"fork point {at!r} is outside (or not "
                                                  f"an int in) 0..{self.version}")
        sid = session_id or uuid7(self._clock())
        if not is_uuid(sid):
            raise PartValidationError("BR-04", f"session id {sid!r} is not a UUID")
        self.store.create_session(sid, created=self._clock(), parent=self.id, fork_seq=at)
        return type(self).open(self.store, sid, clock=self._clock)  # a subclass forks its own

    # ------------------------------------------------------------------ state

    @property
    def version(self) -> int:
        """The seq of the last event in this session's log (0 when empty)."""
        return self._lc.version

    @property
    def lifecycle(self) -> Lifecycle:
        return self._lc

    def subscribe(self, fn: Subscriber) -> Callable[[], None]:
        """Call ``fn`` with every event after it is durably appended. Returns an unsubscribe.

        A subscriber object with an ``apply_many`` method gets a committed batch of
        several events through it, in one call (it must do what calling it with each
        event in order does)."""
        self._subscribers.append(fn)
        return lambda: self._subscribers.remove(fn)

    # ------------------------------------------------------------------ appending

    def _stamp(self, e: Event, actor: str | None = None, *, seq: int = 0,
               now: int | None = None) -> Event:
        """Fill the envelope: id, session, seq (0: assigned at commit), time, actor."""
        if now is None:
            now = self._clock()
        cls = type(e)
        return msgspec.structs.replace(
            e, id=e.id or self._ids(now), session_id=self.id, seq=seq,
            time=e.time or now,
            # A raw message.started names its writer by role (a user message is the user's).
            actor=e.actor or actor or (cls is ev.MessageStarted and e.role)  # type: ignore[attr-defined]
            or DEFAULT_ACTOR[cls],
        )

    def _commit(self, events: Sequence[Event], *, own: bool = False) -> list[Event]:
        """Check, append atomically, notify. Events need not carry seqs yet. ``own``:
        every envelope field but ``v`` was stamped here (``record``'s fresh events)."""
        lc = self._lc
        lc.begin()
        try:
            accepted = lc.apply_batch(events)
            self.store.append(self.id, Stamped(accepted) if own else accepted,
                              lc.version - len(accepted))
        except BaseException as exc:
            lc.rollback()
            if isinstance(exc, IllegalTransition):
                log.warning("transition_rejected", **exc.as_dict())
            elif isinstance(exc, ConvlogError):
                log.warning("event_rejected", session_id=self.id, error=str(exc))
            raise
        lc.commit()
        if self._subscribers:
            self._notify(accepted)
        return accepted

    def _notify(self, accepted: list[Event]) -> None:
        # The events are durable now: every subscriber sees them even if one fails;
        # the first failure is re-raised afterwards so the caller still learns of it.
        failure: BaseException | None = None
        for fn in list(self._subscribers):
            try:
                if len(accepted) == 1:
                    fn(accepted[0])
                elif (many := getattr(fn, "apply_many", None)) is not None:
                    # A fold that takes a whole batch (WithPartsProjection): its own
                    # loop, one call per event less than a call of each.
                    many(accepted)
                else:
                    # A C-level loop: a streamed batch has dozens. An object whose
                    # __call__ is a Python function is called through that function,
                    # bound once (calling the object finds it on its type every time).
                    dunder = fn.__class__.__call__
                    call = dunder.__get__(fn) if dunder.__class__ is _FUNCTION else fn
                    _drain(map(call, accepted))
            except Exception as exc:
                log.error("subscriber_failed", session_id=self.id, subscriber=repr(fn),
                          error=repr(exc))
                failure = failure or exc
        if failure is not None:
            raise failure

    def _one(self, e: Event) -> int:
        accepted = self._commit((e,))
        return accepted[0].seq if accepted else self._entered_seq(e)

    def _entered_seq(self, e: Event) -> int:
        return self._lc.entered_seq(e)

    def append(self, events: Iterable[Event], *, keep_stored: bool = False) -> list[int]:
        """Append raw events (importers, adapters): one atomic, table-checked batch.

        Empty envelope fields are filled in (id, session, time, actor); ``seq`` is
        always assigned here. An event already in this session's history (same id,
        same content) is a no-op and reports its original seq; the same id with
        other content raises :class:`EventIdConflict`, unless ``keep_stored``: then
        the stored event stands, whatever the new content (importers re-reading a
        grown source under stable ids keep what the first import wrote). Returns
        one seq per event.
        """
        stamped: list[Event] = []
        positions: dict[str, int] = {}
        seqs: list[int | None] = []
        seen: dict[str, int] = {}
        for position, given in enumerate(events, start=1):
            if not isinstance(given, Event):
                bad = InvalidArgument("Session.append", f"item {position} is a "
                                      f"{type(given).__name__}, not an event (one of "
                                      "engine.events' types)")
                bad.batch_index = position
                raise bad
            raw = given
            if raw.v != SCHEMA_VERSION[type(raw)]:
                try:  # an old version is upcast; a newer or unknown one is refused
                    raw = upgrade(raw)
                except ConvlogError as exc:
                    exc.batch_index = position
                    raise
            if raw.session_id and raw.session_id != self.id:
                mismatch = PartValidationError(
                    "session", f"the event belongs to session {raw.session_id}, not {self.id}",
                    event_id=raw.id, event_type=tag_of(type(raw)),
                )
                mismatch.batch_index = position
                raise mismatch
            if raw.id:
                if raw.id in seen:
                    dup = DuplicateEventId(raw.id, "another event of the same batch")
                    dup.batch_index = position
                    raise dup
                seen[raw.id] = len(seqs)
                try:  # the store's one duplicate-id rule: a retry, a conflict or new
                    known = self.store.stored_seqs(self.id, [raw],
                                                   same_content=not keep_stored)[0]
                except ConvlogError as exc:
                    exc.batch_index = position
                    raise
                if known is not None:
                    seqs.append(known)
                    continue
            stamped.append(self._stamp(raw))
            positions[stamped[-1].id] = position
            seqs.append(None)
        try:
            accepted = iter(self._commit(stamped))
        except (IllegalTransition, PartValidationError, InvalidEvent, EventIdConflict) as exc:
            exc.batch_index = positions.get(exc.event_id)
            raise
        accepted_ids = {}
        for e in accepted:
            accepted_ids[e.id] = e.seq
        out: list[int] = []
        pending = iter(stamped)
        for s in seqs:
            if s is not None:
                out.append(s)
                continue
            e = next(pending)
            out.append(accepted_ids.get(e.id) or self._entered_seq(e))
        return out

    def record(self, events: Sequence[Event]) -> list[Event]:
        """Append events an adapter has just built, as one checked, atomic batch.

        Unlike :meth:`append` there is no duplicate-id lookup: the events must
        carry no id (each gets a fresh one here). Events without a time get the
        batch's commit time, one clock reading for all. Returns the accepted events.
        """
        # Stamped with the seqs they will get, so _commit need not copy them again.
        now = self._clock()  # one atomic batch, one commit time
        seq = self._lc.version
        stamped: list[Event] = []
        append = stamped.append
        replace = msgspec.structs.replace
        sid, actors, started = self.id, DEFAULT_ACTOR, ev.MessageStarted
        # What _stamp does, inlined for the common case (an adapter's fresh event: no
        # id, time or actor yet); anything else goes through _stamp itself.
        # The whole envelope is this session's own (fresh ids, a commit time of the
        # right type) unless an event brought part of it: then the store checks it all.
        own = now.__class__ is int and 0 <= now <= INT_MAX
        for e, eid in zip(events, self._ids.many(now, len(events)), strict=True):
            seq += 1
            cls = e.__class__
            if e.id or e.time or e.actor or cls is started:
                own = False
                append(self._stamp(e if e.id else replace(e, id=eid), seq=seq, now=now))
            else:
                append(replace(e, id=eid, session_id=sid, seq=seq, time=now,
                               actor=actors[cls]))
        return self._commit(stamped, own=own)

    # ------------------------------------------------------------------ envelope helpers

    def _new(self, cls: type[Event], actor: str | None = None, **fields: Any) -> Event:
        now = self._clock()
        return cls(id=self._ids(now), session_id=self.id, seq=self._lc.version + 1, time=now,
                   actor=actor or DEFAULT_ACTOR[cls], **fields)

    def _new_part_id(self, given: str | None) -> str:
        return given or part_id(self._clock())

    # ------------------------------------------------------------------ messages

    def start_message(
        self, role: ev.Role, *, message_id: str | None = None, agent: str = "",
        model: ev.ModelRef | None = None, system: str | None = None,
        tools: dict[str, bool] | None = None, variant: str | None = None,
        summary: ev.UserSummary | None = None, path: ev.PathInfo | None = None,
        parent_id: str | None = None, actor: str | None = None,
    ) -> str:
        mid = message_id or uuid7(self._clock())
        self._one(self._new(
            ev.MessageStarted, actor or role, message_id=mid, role=role, agent=agent,
            model=model, system=system, tools=tools, variant=variant, summary=summary,
            path=path, parent_id=parent_id,
        ))
        return mid

    def complete_message(
        self, message_id: str, *, cost: float = 0.0, tokens: ev.Tokens | None = None,
        finish: str | None = None, error: ev.MessageError | None = None,
    ) -> int:
        """Close a message. An ``aborted`` error settles unfinished parts first."""
        if error is not None and error.kind == "aborted":
            return self.abort(message_id, error.message or "aborted")
        role = self._lc.messages[message_id].role if message_id in self._lc.messages else None
        return self._one(self._new(
            ev.MessageCompleted, role, message_id=message_id, cost=cost, tokens=tokens,
            finish=finish, error=error,
        ))

    def abort(self, message_id: str, reason: str = "The operation was aborted") -> int:
        """Fail unfinished tools (kind aborted), end streaming parts, complete as aborted."""
        if message_id not in self._lc.messages:
            self._one(self._new(ev.MessageCompleted, message_id=message_id))  # raises
        planned = [self._stamp(e) for e in settle.abort(self._lc, message_id, reason)]
        accepted = self._commit(planned)
        return accepted[-1].seq if accepted else self.version

    def user_message(self, text: str, *, agent: str = "", model: ev.ModelRef | None = None,
                     system: str | None = None, message_id: str | None = None) -> str:
        """Convenience: a user message with one finished text part, completed."""
        mid = message_id or uuid7(self._clock())
        pid = part_id(self._clock())
        self._commit([
            self._stamp(ev.MessageStarted(message_id=mid, role="user", agent=agent, model=model,
                                          system=system), "user"),
            self._stamp(ev.TextAdded(message_id=mid, part_id=pid, text=text), "user"),
            self._stamp(ev.PartEnded(message_id=mid, part_id=pid), "user"),
            self._stamp(ev.MessageCompleted(message_id=mid), "user"),
        ])
        return mid

    # ------------------------------------------------------------------ text and reasoning

    def add_text(
        self, message_id: str, text: str = "", *, streaming: bool = True,
        synthetic: bool = False, ignored: bool = False, metadata: dict[str, Any] | None = None,
        part_id: str | None = None, actor: str | None = None,
    ) -> PartRef:
        pid = self._new_part_id(part_id)
        added = self._new(ev.TextAdded, actor, message_id=message_id, part_id=pid, text=text,
                          synthetic=synthetic, ignored=ignored, metadata=metadata)
        if streaming:
            self._one(added)
        else:
            ended = self._stamp(ev.PartEnded(message_id=message_id, part_id=pid), actor)
            self._commit([added, ended])
        return PartRef(message_id, pid)

    def text_delta(self, ref: PartRef, delta: str) -> int:
        """O(1): one small event; the part's text is never copied."""
        now = self._clock()
        return self._one(ev.TextDelta(
            id=self._ids(now), session_id=self.id, seq=self._lc.version + 1, time=now,
            actor="assistant", message_id=ref[0], part_id=ref[1], delta=delta,
        ))

    def add_reasoning(
        self, message_id: str, text: str = "", *, streaming: bool = True,
        metadata: dict[str, Any] | None = None, part_id: str | None = None,
    ) -> PartRef:
        pid = self._new_part_id(part_id)
        added = self._new(ev.ReasoningAdded, message_id=message_id, part_id=pid, text=text,
                          metadata=metadata)
        if streaming:
            self._one(added)
        else:
            self._commit([added, self._stamp(ev.PartEnded(message_id=message_id, part_id=pid))])
        return PartRef(message_id, pid)

    def reasoning_delta(self, ref: PartRef, delta: str) -> int:
        now = self._clock()
        return self._one(ev.ReasoningDelta(
            id=self._ids(now), session_id=self.id, seq=self._lc.version + 1, time=now,
            actor="assistant", message_id=ref[0], part_id=ref[1], delta=delta,
        ))

    def end_part(self, ref: PartRef, *, metadata: dict[str, Any] | None = None) -> int:
        return self._one(self._new(ev.PartEnded, message_id=ref[0], part_id=ref[1],
                                   metadata=metadata))

    # ------------------------------------------------------------------ files and other parts

    def add_file(self, message_id: str, mime: str, url: str, *, filename: str | None = None,
                 source: ev.FilePartSource | None = None, part_id: str | None = None) -> PartRef:
        return self._add_part(ev.FileAdded, message_id, part_id, mime=mime, url=url,
                              filename=filename, source=source)

    def add_snapshot(self, message_id: str, snapshot: str, *, part_id: str | None = None
                     ) -> PartRef:
        return self._add_part(ev.SnapshotAdded, message_id, part_id, snapshot=snapshot)

    def add_patch(self, message_id: str, hash: str, files: Sequence[str], *,
                  part_id: str | None = None) -> PartRef:
        return self._add_part(ev.PatchAdded, message_id, part_id, hash=hash, files=list(files))

    def add_agent(self, message_id: str, name: str, *, source: ev.SourceText | None = None,
                  part_id: str | None = None) -> PartRef:
        return self._add_part(ev.AgentAdded, message_id, part_id, name=name, source=source)

    def add_subtask(self, message_id: str, prompt: str, description: str, agent: str, *,
                    model: ev.ModelRef | None = None, command: str | None = None,
                    part_id: str | None = None) -> PartRef:
        return self._add_part(ev.SubtaskAdded, message_id, part_id, prompt=prompt,
                              description=description, agent=agent, model=model, command=command)

    def add_retry(self, message_id: str, attempt: int, error: ev.MessageError, *,
                  part_id: str | None = None) -> PartRef:
        return self._add_part(ev.RetryAdded, message_id, part_id, attempt=attempt, error=error)

    def add_compaction(self, message_id: str, *, auto: bool = False,
                       overflow: bool | None = None, part_id: str | None = None) -> PartRef:
        return self._add_part(ev.CompactionAdded, message_id, part_id, auto=auto,
                              overflow=overflow)

    def start_step(self, message_id: str, *, snapshot: str | None = None,
                   part_id: str | None = None) -> PartRef:
        return self._add_part(ev.StepStarted, message_id, part_id, snapshot=snapshot)

    def finish_step(self, message_id: str, reason: str, *, cost: float = 0.0,
                    tokens: ev.Tokens | None = None, snapshot: str | None = None,
                    part_id: str | None = None) -> PartRef:
        return self._add_part(ev.StepFinished, message_id, part_id, reason=reason, cost=cost,
                              tokens=tokens or ev.Tokens(), snapshot=snapshot)

    def _add_part(self, cls: type[Event], message_id: str, given: str | None,
                  **fields: Any) -> PartRef:
        pid = self._new_part_id(given)
        self._one(self._new(cls, message_id=message_id, part_id=pid, **fields))
        return PartRef(message_id, pid)

    # ------------------------------------------------------------------ tools

    def add_tool(self, message_id: str, call_id: str, tool: str, *,
                 input: dict[str, Any] | None = None, raw: str = "",
                 metadata: dict[str, Any] | None = None, part_id: str | None = None) -> PartRef:
        return self._add_part(ev.ToolAdded, message_id, part_id, call_id=call_id, tool=tool,
                              input=input or {}, raw=raw, metadata=metadata)

    def tool_input_delta(self, ref: PartRef, fragment: str) -> int:
        return self._one(self._new(ev.ToolInputDelta, message_id=ref[0], part_id=ref[1],
                                   fragment=fragment))

    def tool_input_ready(self, ref: PartRef, input: dict[str, Any]) -> int:
        return self._one(self._new(ev.ToolInputReady, message_id=ref[0], part_id=ref[1],
                                   input=input))

    def request_approval(self, ref: PartRef, *, reason: str | None = None,
                         metadata: dict[str, Any] | None = None) -> int:
        return self._one(self._new(ev.ToolApprovalRequested, message_id=ref[0],
                                   part_id=ref[1], reason=reason, metadata=metadata))

    def approve(self, ref: PartRef, *, reason: str | None = None) -> int:
        return self._one(self._new(ev.ToolApprovalGranted, message_id=ref[0], part_id=ref[1],
                                   reason=reason))

    def deny(self, ref: PartRef, reason: str = "") -> int:
        """The tool ends in error with kind ``denied``."""
        return self._one(self._new(ev.ToolApprovalDenied, message_id=ref[0], part_id=ref[1],
                                   reason=reason))

    def start_tool(self, ref: PartRef, *, input: dict[str, Any] | None = None,
                   title: str | None = None, metadata: dict[str, Any] | None = None,
                   deadline: int | None = None, timeout_ms: int | None = None) -> int:
        if timeout_ms is not None:
            deadline = self._clock() + timeout_ms
        return self._one(self._new(ev.ToolStarted, message_id=ref[0], part_id=ref[1],
                                   input=input, title=title, metadata=metadata,
                                   deadline=deadline))

    def tool_progress(self, ref: PartRef, *, title: str | None = None,
                      metadata: dict[str, Any] | None = None) -> int:
        return self._one(self._new(ev.ToolProgress, message_id=ref[0], part_id=ref[1],
                                   title=title, metadata=metadata))

    def complete_tool(self, ref: PartRef, output: str, *, title: str = "",
                      metadata: dict[str, Any] | None = None,
                      attachments: Sequence[ev.Attachment] = ()) -> int:
        return self._one(self._new(ev.ToolCompleted, message_id=ref[0], part_id=ref[1],
                                   output=output, title=title, metadata=metadata,
                                   attachments=list(attachments)))

    def fail_tool(self, ref: PartRef, error: str, *, kind: ev.ToolFailureKind = "error",
                  metadata: dict[str, Any] | None = None) -> int:
        return self._one(self._new(ev.ToolFailed, message_id=ref[0], part_id=ref[1],
                                   error=error, kind=kind, metadata=metadata))

    def compact_tool_output(self, ref: PartRef) -> int:
        return self._one(self._new(ev.ToolOutputCompacted, message_id=ref[0], part_id=ref[1]))

    def expire(self, now: int | None = None) -> list[PartRef]:
        """Fail (kind timeout) every running tool whose deadline is at or before ``now``."""
        now = self._clock() if now is None else now
        failures = settle.expire(self._lc, now)
        self._commit([self._stamp(e) for e in failures])
        return [PartRef(f.message_id, f.part_id) for f in failures]

    # ------------------------------------------------------------------ conversation
    # Conversation-level commands (Q CLI's ConversationState); each is one checked
    # event and returns its seq (the original seq for an identical repeat).

    def create_conversation(
        self, conversation_id: str | None = None, *, model_info: ev.ModelInfo | None = None,
        mcp_enabled: bool = True, os: str = "", cwd: str = "", utc_offset_minutes: int = 0,
    ) -> int:
        return self._one(self._new(
            ev.ConversationCreated, conversation_id=conversation_id or uuid7(self._clock()),
            model_info=model_info, mcp_enabled=mcp_enabled, os=os, cwd=cwd,
            utc_offset_minutes=utc_offset_minutes,
        ))

    def select_model(self, model_info: ev.ModelInfo) -> int:
        return self._one(self._new(ev.ModelSelected, model_info=model_info))

    def change_tools(self, origin: ev.ToolOrigin, tools: Sequence[ev.ToolSpec], *,
                     server: str | None = None) -> int:
        return self._one(self._new(ev.ToolsChanged, origin=origin, tools=list(tools),
                                   server=server))

    def add_context_file(self, path: str) -> int:
        return self._one(self._new(ev.ContextFileAdded, path=path))

    def remove_context_file(self, path: str) -> int:
        return self._one(self._new(ev.ContextFileRemoved, path=path))

    def set_next_message(self, prompt: str, *, additional_context: str = "") -> int:
        return self._one(self._new(ev.NextMessageSet, prompt=prompt,
                                   additional_context=additional_context))

    def clear_next_message(self) -> int:
        return self._one(self._new(ev.NextMessageCleared))

    def compact_history(self, summary: str, *, keep_last: int = 0,
                        request_metadata: dict[str, Any] | None = None,
                        custom_instruction: str | None = None) -> int:
        return self._one(self._new(ev.HistoryCompacted, summary=summary, keep_last=keep_last,
                                   request_metadata=request_metadata,
                                   custom_instruction=custom_instruction))

    def clear_history(self) -> int:
        return self._one(self._new(ev.HistoryCleared))

    def enter_tangent(self) -> int:
        return self._one(self._new(ev.TangentEntered))

    def exit_tangent(self, tail: ev.TangentTail = "none") -> int:
        return self._one(self._new(ev.TangentExited, tail=tail))

    def create_checkpoint(self, tag: str, *, description: str = "", is_turn: bool = True,
                          tool_name: str | None = None) -> int:
        return self._one(self._new(ev.CheckpointCreated, tag=tag, description=description,
                                   is_turn=is_turn, tool_name=tool_name))

    def restore_checkpoint(self, tag: str) -> int:
        return self._one(self._new(ev.CheckpointRestored, tag=tag))

    def change_file_lines(self, path: str, *, before_lines: int, after_lines: int,
                          lines_added_by_agent: int = 0, lines_removed_by_agent: int = 0) -> int:
        return self._one(self._new(
            ev.FileLinesChanged, path=path, before_lines=before_lines, after_lines=after_lines,
            lines_added_by_agent=lines_added_by_agent,
            lines_removed_by_agent=lines_removed_by_agent,
        ))

    def note_transcript(self, text: str) -> int:
        return self._one(self._new(ev.TranscriptNoted, text=text))


# Python's own errors from a command's argument handling (a str where a ModelInfo
# belongs has no ``model_id``, None has no ``strip``) are refusals like any other:
# every public Session method turns them into InvalidArgument, a ConvlogError. Only
# while nothing was written: an error after a write is a bug and stays what it is.
_ARGUMENT_ERRORS = (TypeError, AttributeError, ValueError, KeyError, IndexError,
                    OverflowError, UnicodeError)


def _refusing(name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(fn)
    def guarded(self: Session, *args: Any, **kwargs: Any) -> Any:
        before = self._lc.version
        try:
            return fn(self, *args, **kwargs)
        except ConvlogError:
            raise
        except _ARGUMENT_ERRORS as exc:
            if self._lc.version != before:
                raise
            raise InvalidArgument(f"Session.{name}", f"{type(exc).__name__}: {exc}") from exc
    return guarded


for _name, _fn in list(vars(Session).items()):
    if not _name.startswith("_") and isinstance(_fn, _FUNCTION) and _name != "subscribe":
        setattr(Session, _name, _refusing(_name, _fn))
