"""The WithParts projection: OpenCode-style ``{info, parts}`` messages, folded from events.

The fold keeps small mutable records (a text part is a list of chunks, so a delta
is one list append) and builds frozen views on demand, caching each part's and
each message's view until an event touches it. ``snapshot()`` / ``restore()``
turn the state into bytes and back; a restored projection folds on exactly as
the original would.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from types import MappingProxyType
from typing import Any, ClassVar

import attrs

from engine import events as ev
from engine.codec import packb, unpackb
from engine.events import Event
from engine.store.base import Store
from engine.store.runs import Run
from projections import views as v
from projections.bulk import collector_paused, read_bulk
from projections.dispatch import bind, event_fold, fold_all, handles, unhandled
from projections.json import converter

PartKey = tuple[str, str]

DENIED_ERROR = "The user denied this tool call"


def _merge(old: dict[str, Any] | None, new: dict[str, Any] | None) -> dict[str, Any] | None:
    if not new:
        return old
    return {**old, **new} if old else dict(new)


# Message and step-finish parts without reported usage read as zeros (a frozen value: shared).
_NO_TOKENS = v.Tokens()


def _merge_provider(old: dict[str, Any] | None, new: dict[str, Any] | None
                    ) -> dict[str, Any] | None:
    """Message metadata: a completion's keys replace the start's, per provider key."""
    if not new or not old:
        return new or old
    out = dict(old)
    for key, value in new.items():
        prev = out.get(key)
        out[key] = {**prev, **value} if isinstance(prev, dict) and isinstance(value, dict) \
            else value
    return out


def _evolver(cls: type[Any], changed: tuple[str, ...]) -> Callable[..., Any]:
    """``attrs.evolve(o, **dict(zip(changed, values)))`` as ``f(o, *values)``, without its
    walk over the fields on every call (a replay completes every message). The source
    is built once from the class's own fields, never from data."""
    fields = [a for a in attrs.fields(cls) if a.init]
    unknown = set(changed) - {a.name for a in fields}
    if unknown:
        raise TypeError(f"{cls.__name__} has no fields {sorted(unknown)}")
    args = ", ".join(f"{a.alias}={a.name if a.name in changed else 'o.' + a.name}"
                     for a in fields)
    src = f"def evolve(o, {', '.join(changed)}):\n    return cls({args})\n"
    scope: dict[str, Any] = {"cls": cls}
    exec(compile(src, f"<evolve {cls.__name__}>", "exec"), scope)
    fn: Callable[..., Any] = scope["evolve"]
    return fn


_complete_assistant = _evolver(v.AssistantInfo,
                               ("time", "cost", "tokens", "finish", "error", "metadata"))
_complete_user = _evolver(v.UserInfo, ("time", "metadata"))
_stream_ended = _evolver(v.AssistantInfo, ("tokens", "finish", "metadata"))


class _Msg:
    """A message in one of three forms: live records, a frozen view, or raw snapshot data
    (a dict, or a ``(load, message id, ref)`` tuple whose call returns the dict or the
    view, from a store, on first use).

    Restored messages stay frozen (or raw) until an event touches them, so a
    restore costs a pointer per message rather than a rebuild.
    """

    __slots__ = ("info", "parts", "raw", "view")

    def __init__(self, info: v.MessageInfo | None, *, view: v.WithParts | None = None,
                 raw: Any = None) -> None:
        self.info: v.MessageInfo = info if info is not None else (
            view.info if view is not None else None)  # type: ignore[assignment]
        self.parts: dict[str, _Part] | None = {} if view is None and raw is None else None
        self.view = view
        self.raw = raw

    def build(self) -> v.WithParts:
        view = self.view
        if view is None:
            if self.parts is None:
                raw = self.raw
                if type(raw) is tuple:  # a stored snapshot chunk: (load, message id, *args)
                    raw = raw[0](*raw[1:])
                view = raw if isinstance(raw, v.WithParts) else converter.structure(
                    raw, v.WithParts)
                self.info = view.info
                self.raw = None
            else:
                view = v.WithParts(self.info, [p.build() for p in self.parts.values()])
            self.view = view
        return view


class _Part:
    """A part whose view never changes after it is added."""

    __slots__ = ("msg", "view")

    def __init__(self, msg: _Msg, view: v.Part | None) -> None:
        self.msg = msg
        self.view = view

    def build(self) -> v.Part:
        assert self.view is not None
        return self.view


class _Static(_Part):
    """A part whose view never changes, made from its event when first read (a replay
    adds many that nobody reads before the next event)."""

    __slots__ = ("event", "sid")

    def __init__(self, msg: _Msg, sid: str, event: Any) -> None:
        self.msg = msg  # (_Part.__init__ inline: a call less per part of a replay)
        self.view = None
        self.sid = sid
        self.event = event

    def build(self) -> v.Part:
        view = self.view
        if view is None:
            view = self.view = _static_view(self.sid, self.event)
            self.event = None
        return view


def _static_view(sid: str, e: Any) -> v.Part:
    mid, pid = e.message_id, e.part_id
    if isinstance(e, ev.StepStarted):
        return v.StepStartPart(pid, sid, mid, e.snapshot)
    if isinstance(e, ev.StepFinished):
        return v.StepFinishPart(pid, sid, mid, e.reason, e.cost, e.tokens, e.snapshot)
    if isinstance(e, ev.SnapshotAdded):
        return v.SnapshotPart(pid, sid, mid, e.snapshot)
    if isinstance(e, ev.PatchAdded):
        return v.PatchPart(pid, sid, mid, e.hash, list(e.files))
    if isinstance(e, ev.AgentAdded):
        return v.AgentPart(pid, sid, mid, e.name, e.source)
    if isinstance(e, ev.SubtaskAdded):
        return v.SubtaskPart(pid, sid, mid, e.prompt, e.description, e.agent, e.model,
                             e.command)
    if isinstance(e, ev.RetryAdded):
        return v.RetryPart(pid, sid, mid, e.attempt, e.error, v.RetryTime(e.time))
    return v.CompactionPart(pid, sid, mid, e.auto, e.overflow)


class _Stream(_Part):
    __slots__ = ("chunks", "end", "id", "ignored", "metadata", "reasoning", "start", "synthetic")

    def __init__(self, msg: _Msg, pid: str, reasoning: bool, text: str, start: int) -> None:
        self.msg = msg
        self.view = None
        self.id = pid
        self.reasoning = reasoning
        self.chunks = [text] if text else []
        self.start = start
        self.end: int | None = None
        self.synthetic: bool | None = None
        self.ignored: bool | None = None
        self.metadata: dict[str, Any] | None = None

    def text(self) -> str:
        chunks = self.chunks
        if len(chunks) > 1:
            chunks[:] = ["".join(chunks)]
        return chunks[0] if chunks else ""

    def build(self) -> v.Part:
        view = self.view
        if view is None:
            sid, mid = self.msg.info.session_id, self.msg.info.id
            if self.reasoning:
                view = v.ReasoningPart(self.id, sid, mid, self.text(),
                                       v.ReasoningTime(self.start, self.end), self.metadata)
            else:
                view = v.TextPart(self.id, sid, mid, self.text(), self.synthetic, self.ignored,
                                  v.PartTime(self.start, self.end), self.metadata)
            self.view = view
        return view


class _Tool(_Part):
    __slots__ = (
        "added", "approval", "approval_reason", "attachments", "call_id", "compacted", "end",
        "error", "id", "input", "output", "part_metadata", "raw", "start", "state_metadata",
        "status", "title", "tool",
    )

    def __init__(self, msg: _Msg, e: ev.ToolAdded) -> None:
        self.msg = msg
        self.view = None
        self.id = e.part_id
        self.call_id = e.call_id
        self.tool = e.tool
        self.status = "pending"
        self.input: dict[str, Any] = dict(e.input)
        self.raw = [e.raw] if e.raw else []
        self.part_metadata = e.metadata
        self.added = e.time
        self.start: int | None = None
        self.end: int | None = None
        self.compacted: int | None = None
        self.title: str | None = None
        self.state_metadata: dict[str, Any] | None = None
        self.output = ""
        self.error = ""
        self.attachments: list[v.FilePart] | None = None
        self.approval: str | None = None
        self.approval_reason: str | None = None

    def state(self) -> v.ToolState:
        status = self.status
        if status == "pending":
            raw = self.raw
            if len(raw) > 1:
                raw[:] = ["".join(raw)]
            return v.ToolStatePending(self.input, raw[0] if raw else "")
        if status == "running":
            assert self.start is not None
            return v.ToolStateRunning(self.input, v.RunningTime(self.start), self.title,
                                      self.state_metadata)
        assert self.end is not None
        start = self.start if self.start is not None else self.added
        if status == "completed":
            return v.ToolStateCompleted(
                self.input, self.output, self.title or "", self.state_metadata or {},
                v.CompletedTime(start, self.end, self.compacted), self.attachments,
            )
        return v.ToolStateError(self.input, self.error, v.ErrorTime(start, self.end),
                                self.state_metadata)

    def build(self) -> v.Part:
        view = self.view
        if view is None:
            approval = (None if self.approval is None
                        else v.ToolApproval(self.approval, self.approval_reason))  # type: ignore[arg-type]
            raw = self.raw
            if len(raw) > 1:
                raw[:] = ["".join(raw)]
            view = self.view = v.ToolPart(
                self.id, self.msg.info.session_id, self.msg.info.id, self.call_id, self.tool,
                self.state(), self.part_metadata, approval, raw[0] if raw else None,
            )
        return view


_SNAPSHOT_VERSION = 1
# From how many views to build messages() pauses the collector.
_MANY_VIEWS = 16
_NO_TEXTS: Mapping[str, str] = MappingProxyType({})  # messages() wants every view built


@event_fold
class WithPartsProjection:
    """Folds events into ``WithParts`` messages, one event at a time."""

    NAME: ClassVar[str] = f"withparts.v{_SNAPSHOT_VERSION}"
    # Conversation-wide events change no message (projections.qcli folds them); the
    # mailbox's events live in the mailbox log (projections.mailbox folds them).
    IGNORES: ClassVar[frozenset[type[Event]]] = (ev.CONVERSATION_EVENT_TYPES
                                                 | ev.MAILBOX_EVENT_TYPES)

    def __init__(self, session_id: str) -> None:
        self.session_id = session_id
        self.seq = 0
        # A message no event has touched since a restore may be its frozen view (thawed
        # from a FrozenState) or its (load, id, ...) tuple (a stored snapshot chunk):
        # a restore then costs a dict entry per message, not an object.
        self._msgs: dict[str, _Msg | v.WithParts | tuple[Any, ...]] = {}
        # When each unfinished tool was added: an error before it ever ran starts there.
        self._tool_added: dict[PartKey, int] = {}
        # Deltas come in runs for one part: remembering the last one skips a tuple
        # build and two string hashes per delta. Parts are never replaced while
        # live, so the cached record cannot go stale.
        self._last_key: PartKey = ("", "")
        self._last_part: Any = None
        # Runs (engine.store.runs) fold like the deltas they stand for: see replay().
        self._fold: dict[type[Any], Callable[[Any], None]] = {**bind(self), Run: self._run}

    # ------------------------------------------------------------------ lazy thawing

    def _live(self, message_id: str) -> _Msg:
        """The message with live part records, thawed from its frozen view if needed."""
        msg = self._msgs[message_id]
        if msg.__class__ is _Msg and msg.parts is not None:
            return msg  # (a replay's case: one lookup)
        msg = self._msg(message_id)
        if msg.parts is None:
            view = msg.build()
            msg.parts = {}
            for pv in view.parts:
                part = _part_from_view(msg, pv, self._tool_added.get((message_id, pv.id), 0))
                msg.parts[pv.id] = part
        return msg

    def _msg(self, message_id: str) -> _Msg:
        msg = self._msgs[message_id]
        if type(msg) is _Msg:
            return msg
        wrapped = self._msgs[message_id] = (
            _Msg(None, view=msg) if isinstance(msg, v.WithParts) else _Msg(None, raw=msg))
        return wrapped

    def _part(self, message_id: str, part_id: str) -> _Part:
        # Through the message's own dict: no index of (message, part) keys, whose
        # tuples the collector would track, one per part.
        msg = self._msgs.get(message_id)
        parts = msg.parts if msg.__class__ is _Msg else None
        if parts is None:
            parts = self._live(message_id).parts
            assert parts is not None
        return parts[part_id]

    # ------------------------------------------------------------------ folding

    def apply(self, e: Event) -> None:
        try:
            self._fold[type(e)](e)
        except KeyError:
            if type(e) not in self._fold:
                raise unhandled(self, e) from None
            raise
        self.seq = e.seq

    def apply_many(self, events: Iterable[Event]) -> None:
        """:meth:`apply` of each event in order, in one loop: a session's committed
        batch (:meth:`Session.subscribe <engine.session.Session.subscribe>`), one
        call per event less. The same outcome event by event, a failure included
        (``seq`` is the last event folded)."""
        if self.__class__ is not WithPartsProjection:  # a subclass may wrap apply
            for e in events:
                self(e)
            return
        fold = self._fold
        for e in events:
            try:
                fold[type(e)](e)
            except KeyError:
                if type(e) not in fold:
                    raise unhandled(self, e) from None
                raise
            self.seq = e.seq

    def apply_all(self, events: Iterable[Event | Run]) -> WithPartsProjection:
        """Fold events in order; a :class:`~engine.store.runs.Run` among them folds as
        the deltas it joins (so ``apply_all(store.read_runs(...))`` is a replay)."""
        last = fold_all(self, self._fold, events)  # type: ignore[arg-type]
        if last is not None:
            self.seq = last.seq
        return self

    @classmethod
    def replay(cls, store: Store, session_id: str, last: int | None = None
               ) -> WithPartsProjection:
        """The projection of the stored session's events 1..last (all when None), by a
        bulk read where the store offers one (:func:`projections.bulk.read_bulk`). The
        fold reads no event id, so the store need not make them; the garbage collector
        waits while the state is built (:func:`projections.bulk.collector_paused`)."""
        with collector_paused():
            return cls(session_id).apply_all(read_bulk(store, session_id, 1, last, ids=False))

    __call__ = apply  # usable directly as a Session subscriber

    @handles(ev.MessageStarted)
    def _message_started(self, e: ev.MessageStarted) -> None:
        time = v.MessageTime(e.time)
        info: v.MessageInfo
        if e.role == "user":
            info = v.UserInfo(e.message_id, self.session_id, time, e.agent, e.model,
                              e.system, e.tools, e.variant, e.summary,
                              e.metadata)
        else:
            info = v.AssistantInfo(
                e.message_id, self.session_id, time, e.agent,
                e.model.provider_id if e.model else None, e.model.model_id if e.model else None,
                e.system, e.variant, e.path, e.parent_id,
                metadata=e.metadata,
            )
        self._msgs[e.message_id] = _Msg(info)

    @handles(ev.MessageCompleted)
    def _message_completed(self, e: ev.MessageCompleted) -> None:
        msg = self._live(e.message_id)
        info = msg.info
        time = v.MessageTime(info.time.created, e.time)
        if isinstance(info, v.AssistantInfo):
            # What the stream's end recorded (message.stream_ended) stays where the
            # completion does not say (info's defaults when there was none).
            msg.info = _complete_assistant(
                info, time, e.cost, e.tokens or info.tokens,
                e.finish if e.finish is not None else info.finish, e.error,
                _merge_provider(info.metadata, e.metadata))
        else:
            msg.info = _complete_user(info, time, _merge_provider(info.metadata, e.metadata))
        msg.view = None

    @handles(ev.MessageStreamEnded)
    def _message_stream_ended(self, e: ev.MessageStreamEnded) -> None:
        msg = self._live(e.message_id)
        info = msg.info
        if isinstance(info, v.AssistantInfo):
            msg.info = _stream_ended(info, e.tokens or info.tokens,
                                     e.finish if e.finish is not None else info.finish,
                                     _merge_provider(info.metadata, e.metadata))
        else:
            msg.info = attrs.evolve(info, metadata=_merge_provider(info.metadata, e.metadata))
        msg.view = None

    def _add(self, e: ev.PartEvent, part: _Part) -> None:
        msg = part.msg
        assert msg.parts is not None  # _live() thawed it
        msg.parts[e.part_id] = part
        msg.view = None

    @handles(ev.TextAdded)
    def _text_added(self, e: ev.TextAdded) -> None:
        part = _Stream(self._live(e.message_id), e.part_id, False, e.text, e.time)
        part.synthetic = e.synthetic or None
        part.ignored = e.ignored or None
        part.metadata = e.metadata
        self._add(e, part)

    @handles(ev.ReasoningAdded)
    def _reasoning_added(self, e: ev.ReasoningAdded) -> None:
        part = _Stream(self._live(e.message_id), e.part_id, True, e.text, e.time)
        part.metadata = e.metadata
        self._add(e, part)

    @handles(ev.TextDelta, ev.ReasoningDelta)
    def _delta(self, e: ev.TextDelta | ev.ReasoningDelta) -> None:
        last = self._last_key
        if e.part_id == last[1] and e.message_id == last[0]:
            part = self._last_part
        else:
            part = self._part(e.message_id, e.part_id)
            self._last_key, self._last_part = (e.message_id, e.part_id), part
        part.chunks.append(e.delta)
        part.view = None
        part.msg.view = None

    def _run(self, r: Run) -> None:
        """Consecutive deltas to one part (a bulk read): one append of their text."""
        last = self._last_key
        if r.part_id == last[1] and r.message_id == last[0]:
            part = self._last_part
        else:
            part = self._part(r.message_id, r.part_id)
            self._last_key, self._last_part = (r.message_id, r.part_id), part
        if r.kind is ev.ToolInputDelta:
            part.raw.append(r.text)
        else:
            part.chunks.append(r.text)
        part.view = None
        part.msg.view = None

    @handles(ev.PartEnded)
    def _part_ended(self, e: ev.PartEnded) -> None:
        part: Any = self._part(e.message_id, e.part_id)
        chunks = part.chunks
        if len(chunks) > 1:  # join once: a finished part is read, never appended to
            chunks[:] = ["".join(chunks)]
        part.end = e.time
        part.metadata = _merge(part.metadata, e.metadata)
        part.view = None
        part.msg.view = None

    @handles(ev.FileAdded)
    def _file_added(self, e: ev.FileAdded) -> None:
        view = v.FilePart(e.part_id, self.session_id, e.message_id, e.mime, e.url, e.filename,
                          e.source)
        self._add(e, _Part(self._live(e.message_id), view))

    @handles(ev.StepStarted, ev.StepFinished, ev.SnapshotAdded, ev.PatchAdded, ev.AgentAdded,
              ev.SubtaskAdded, ev.RetryAdded, ev.CompactionAdded)
    def _static(self, e: Any) -> None:
        self._add(e, _Static(self._live(e.message_id), self.session_id, e))

    # ------------------------------------------------------------------ tools

    def _tool(self, e: ev.PartEvent) -> _Tool:
        part = self._part(e.message_id, e.part_id)
        assert isinstance(part, _Tool)
        part.view = None
        part.msg.view = None
        return part

    @handles(ev.ToolAdded)
    def _on_tool_added(self, e: ev.ToolAdded) -> None:
        self._add(e, _Tool(self._live(e.message_id), e))
        self._tool_added[(e.message_id, e.part_id)] = e.time

    def _settled(self, e: ev.PartEvent) -> None:
        self._tool_added.pop((e.message_id, e.part_id), None)

    @handles(ev.ToolInputDelta)
    def _tool_input_delta(self, e: ev.ToolInputDelta) -> None:
        self._tool(e).raw.append(e.fragment)

    @handles(ev.ToolInputReady)
    def _tool_input_ready(self, e: ev.ToolInputReady) -> None:
        self._tool(e).input = dict(e.input)

    @handles(ev.ToolApprovalRequested)
    def _approval_requested(self, e: ev.ToolApprovalRequested) -> None:
        t = self._tool(e)
        t.approval, t.approval_reason = "requested", e.reason

    @handles(ev.ToolApprovalGranted)
    def _approval_granted(self, e: ev.ToolApprovalGranted) -> None:
        t = self._tool(e)
        t.approval, t.approval_reason = "approved", e.reason or t.approval_reason

    @handles(ev.ToolApprovalDenied)
    def _approval_denied(self, e: ev.ToolApprovalDenied) -> None:
        t = self._tool(e)
        t.approval, t.approval_reason = "denied", e.reason or None
        t.status = "error"
        t.error = f"{DENIED_ERROR}: {e.reason}" if e.reason else DENIED_ERROR
        t.state_metadata = {"kind": "denied"}
        t.end = e.time
        self._settled(e)

    @handles(ev.ToolStarted)
    def _tool_started(self, e: ev.ToolStarted) -> None:
        t = self._tool(e)
        t.status = "running"
        t.start = e.time
        if e.input is not None:
            t.input = dict(e.input)
        t.title = e.title
        t.state_metadata = e.metadata
        if e.deadline is not None:
            t.state_metadata = {**(e.metadata or {}), "deadline": e.deadline}

    @handles(ev.ToolProgress)
    def _tool_progress(self, e: ev.ToolProgress) -> None:
        t = self._tool(e)
        if e.title is not None:
            t.title = e.title
        t.state_metadata = _merge(t.state_metadata, e.metadata)

    @handles(ev.ToolCompleted)
    def _tool_completed(self, e: ev.ToolCompleted) -> None:
        t = self._tool(e)
        t.status = "completed"
        t.output = e.output
        t.title = e.title or t.title or ""
        t.state_metadata = _merge(t.state_metadata, e.metadata) or {}
        t.end = e.time
        self._settled(e)
        if e.attachments:
            t.attachments = [
                v.FilePart(a.part_id, self.session_id, e.message_id, a.mime, a.url, a.filename,
                           a.source)
                for a in e.attachments
            ]

    @handles(ev.ToolFailed)
    def _tool_failed(self, e: ev.ToolFailed) -> None:
        t = self._tool(e)
        t.status = "error"
        t.error = e.error
        t.state_metadata = {**(_merge(t.state_metadata, e.metadata) or {}), "kind": e.kind}
        t.end = e.time
        self._settled(e)

    @handles(ev.ToolOutputCompacted)
    def _tool_compacted(self, e: ev.ToolOutputCompacted) -> None:
        self._tool(e).compacted = e.time

    # ------------------------------------------------------------------ reading

    def messages(self) -> list[v.WithParts]:
        msgs = self._msgs
        pending = [m for m in msgs.values() if type(m) is tuple]
        if len(pending) > 1 and hasattr(pending[0][0], "prefetch"):
            # A restored state: its message chunks load in one read, not one each.
            pending[0][0].prefetch([ref[1:] for ref in pending])
        # Building the views (after a replay: thousands of them, none garbage yet) and
        # decoding a restored state only add objects: each collection meanwhile walks
        # them for nothing (after a replay of 200k events, 17 collections, about a
        # fifth of the views' time). Paused, the new views are moved out of the young
        # generation without a walk (projections.bulk.collector_paused).
        # Only for many new views: a live reader rebuilds the one or two messages an
        # event touched, and a pause each time would keep its young garbage from the
        # young collections.
        if not pending and sum(1 for m in msgs.values()
                               if type(m) is _Msg and m.view is None) < _MANY_VIEWS:
            return self._build_all()
        with collector_paused():
            return self._build_all()

    def previewed(self, fingerprint: bytes) -> list[v.WithParts | str]:
        """The messages in order, as :meth:`messages` builds them, except that one
        still as restored from a stored snapshot is the preview text stored beside its
        chunk when its loader holds one rendered by ``fingerprint`` (a renderer's: see
        projections.text.render_state); its chunk is then never fetched or decoded."""
        msgs = self._msgs
        pending = [m for m in msgs.values() if type(m) is tuple]
        load: Any = pending[0][0] if pending else None
        texts: dict[str, str] = ({} if not hasattr(load, "previews") else
                                 load.previews(fingerprint, [ref[1:] for ref in pending]))
        misses = [ref for ref in pending if ref[1] not in texts]
        if len(misses) > 1 and hasattr(misses[0][0], "prefetch"):
            misses[0][0].prefetch([ref[1:] for ref in misses])
        with collector_paused():
            return self._build_all(texts)

    def _build_all(self, texts: Mapping[str, str] = _NO_TEXTS) -> list[Any]:
        """Every message's view in order; one still as restored whose id ``texts``
        holds is that text instead (:meth:`previewed`), its chunk left undecoded."""
        msgs = self._msgs
        out: list[Any] = []
        for mid, m in msgs.items():
            if type(m) is _Msg:
                out.append(m.build())
            elif type(m) is tuple:
                text = texts.get(mid)
                if text is not None:
                    out.append(text)
                    continue
                # replacing a value keeps the dict's size: safe mid-loop
                msg = msgs[mid] = _Msg(None, raw=m)
                out.append(msg.build())
            else:
                out.append(m)
        return out

    def message(self, message_id: str) -> v.WithParts:
        return self._msg(message_id).build()

    def part(self, message_id: str, part_id: str) -> v.Part:
        """One part's view, without building its message's (whose cost grows with its
        parts): the offline export reads the one part each event changed."""
        return self._part(message_id, part_id).build()

    def to_json(self) -> list[Any]:
        data = converter.unstructure(self.messages(), list[v.WithParts])
        assert isinstance(data, list)
        return data

    # ------------------------------------------------------------------ snapshots

    def freeze(self) -> FrozenState:
        """An immutable copy of the state that shares every unchanged view."""
        return FrozenState(self.seq, tuple(self.messages()),
                           dict(self._tool_added))

    @classmethod
    def thaw(cls, session_id: str, state: FrozenState) -> WithPartsProjection:
        """A projection that continues from a frozen state (O(messages) pointers)."""
        proj = cls(session_id)
        proj.seq = state.seq
        proj._msgs = {wp.info.id: wp for wp in state.messages}
        proj._tool_added = dict(state.tool_added)
        if state.messages and state.messages[0].info.session_id != session_id:
            # A fork reads its parent's frozen state: rebuild with the fork's id.
            raw = [_rename_session(converter.unstructure(wp), session_id) for wp in state.messages]
            proj._msgs = {r["info"]["id"]: _Msg(None, raw=r) for r in raw}
        return proj

    def snapshot(self) -> bytes:
        """The state as bytes (msgpack of the views' JSON form)."""
        return packb({
            "v": _SNAPSHOT_VERSION, "seq": self.seq, "session": self.session_id,
            "messages": self.to_json(),
            "tool_added": [[m, p, t] for (m, p), t in self._tool_added.items()],
        })

    @classmethod
    def restore(cls, session_id: str, data: bytes) -> WithPartsProjection:
        """Inverse of :meth:`snapshot`; messages are decoded lazily, on first use."""
        raw = unpackb(data)
        if raw.get("v") != _SNAPSHOT_VERSION:
            raise ValueError(f"snapshot version {raw.get('v')} is not {_SNAPSHOT_VERSION}")
        proj = cls(session_id)
        proj.seq = raw["seq"]
        messages = raw["messages"]
        if raw.get("session") != session_id:
            messages = [_rename_session(m, session_id) for m in messages]
        proj._msgs = {m["info"]["id"]: _Msg(None, raw=m) for m in messages}
        proj._tool_added = {(m, p): t for m, p, t in raw["tool_added"]}
        return proj


    @classmethod
    def from_refs(cls, session_id: str, seq: int, refs: dict[str, tuple[Any, ...]],
                  tool_added: dict[PartKey, int]) -> WithPartsProjection:
        """A projection whose messages are loaded one by one, each when first used.

        ``refs`` maps each message id, in order, to a ``(load, message id, *args)``
        tuple: ``load(message id, *args)`` returns the message's JSON dict or view.
        The dict is the projection's own from here on.
        """
        proj = cls(session_id)
        proj.seq = seq
        proj._msgs = refs  # type: ignore[assignment]
        proj._tool_added = tool_added
        return proj

    def tool_added_items(self) -> list[tuple[str, str, int]]:
        """When each unfinished tool was added: part of every snapshot."""
        return [(m, p, t) for (m, p), t in self._tool_added.items()]


def encode_message(message: v.WithParts) -> bytes:
    """One message as snapshot bytes (msgpack of its JSON form)."""
    return packb(converter.unstructure(message, v.WithParts))


def decode_message(data: bytes, session_id: str | None = None) -> Any:
    """The JSON dict of :func:`encode_message`, renamed to ``session_id`` when given."""
    raw = unpackb(data)
    return raw if session_id is None else _rename_session(raw, session_id)


@attrs.frozen
class FrozenState:
    seq: int
    messages: tuple[v.WithParts, ...]
    tool_added: dict[PartKey, int]


def _rename_session(message: Any, session_id: str) -> Any:
    """A WithParts JSON message with its structural sessionID fields set to ``session_id``.

    Only info, parts and tool attachments are renamed: user data (metadata, summary
    diffs, tool input) may hold a ``sessionID`` key of its own and is kept as is.
    """
    parts = []
    for old in message["parts"]:
        part = {**old, "sessionID": session_id}
        state = part.get("state") if part.get("type") == "tool" else None
        if isinstance(state, dict) and state.get("attachments"):
            part["state"] = {**state, "attachments": [
                {**a, "sessionID": session_id} for a in state["attachments"]]}
        parts.append(part)
    return {**message, "info": {**message["info"], "sessionID": session_id}, "parts": parts}


def _part_from_view(msg: _Msg, pv: v.Part, added: int) -> _Part:
    if isinstance(pv, v.TextPart | v.ReasoningPart):
        reasoning = isinstance(pv, v.ReasoningPart)
        start = pv.time.start if pv.time is not None else None
        stream = _Stream(msg, pv.id, reasoning, pv.text, start or 0)
        stream.end = pv.time.end if pv.time is not None else None
        stream.metadata = pv.metadata
        if isinstance(pv, v.TextPart):
            stream.synthetic, stream.ignored = pv.synthetic, pv.ignored
        stream.view = pv
        return stream
    if isinstance(pv, v.ToolPart):
        s = pv.state
        tool = _Tool(msg, ev.ToolAdded(message_id=msg.info.id, part_id=pv.id, call_id=pv.call_id,
                                       tool=pv.tool, metadata=pv.metadata, time=added))
        tool.status = s.TAG
        tool.input = dict(s.input)
        if pv.approval is not None:
            tool.approval, tool.approval_reason = pv.approval.state, pv.approval.reason
        if pv.raw is not None:  # "" too: the model's argument text was empty, not absent
            tool.raw = [pv.raw]
        if isinstance(s, v.ToolStatePending):
            tool.raw = [s.raw] if s.raw else tool.raw
        elif isinstance(s, v.ToolStateRunning):
            tool.start, tool.title, tool.state_metadata = s.time.start, s.title, s.metadata
        elif isinstance(s, v.ToolStateCompleted):
            tool.start, tool.end, tool.compacted = s.time.start, s.time.end, s.time.compacted
            tool.output, tool.title, tool.state_metadata = s.output, s.title, s.metadata
            tool.attachments = s.attachments
        else:
            tool.start, tool.end = s.time.start, s.time.end
            tool.error, tool.state_metadata = s.error, s.metadata
        tool.view = pv
        return tool
    return _Part(msg, pv)
