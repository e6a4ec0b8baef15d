"""The viewer's read model: JSON-ready answers over a store's public API.

Nothing here knows HTTP; the ASGI app (app.py) and the static export
(export.py) both call these functions, so the page and the exported file show
the same data.
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections import OrderedDict
from collections.abc import Iterable, Iterator
from typing import Any, cast

from engine.codec import to_builtins
from engine.events import (
    AnyEvent,
    CompactionAdded,
    MessageStarted,
    SessionImported,
    ToolApprovalRequested,
    ToolCompleted,
    ToolFailed,
    tag_of,
)
from engine.mailbox_credentials import redacted
from engine.store import anchor as anchoring
from engine.store.base import Store
from engine.store.runs import Run
from projections import views as v
from projections.bulk import read_bulk
from projections.json import converter
from projections.mailbox.mailbox import MAILBOX_SESSION
from projections.restore_cache import RestoreCache
from projections.serve.forkdiff import by_position, detailed
from projections.serve.titles import describe, usage
from projections.serve.verifying import verify_elsewhere
from projections.timetravel import Timeline, at, diff_states, latest_snapshot
from projections.withparts import WithPartsProjection

# Messages per state answer: the page renders a window (a screenful and some), never the
# whole session; a bigger one costs scrub latency (benchmarks/viewer.py).
WINDOW = 16
MAX_COUNT = 64  # the most messages one state answer holds (the page asks for what is on screen)
REBUILD_AFTER = 2048  # new events folded on top of a Timeline before it is rebuilt
SEARCH_LIMIT = 50
FIND_LIMIT = 500  # hits of a search within one session
MAX_DIFF_ROWS = 500  # the most diff rows one answer holds (the page asks for a screenful)
# A Timeline keeps at most this many frozen states: each holds a pointer per message, so a
# 1M-event session frozen every 64 events would need gigabytes. Longer sessions freeze
# less often and fold more events per lookup (benchmarks/viewer.py measures the cost).
MAX_FROZEN = 1024
# A session up to this many events gets its Timeline on its first request (a fraction of
# a second); a longer one in a thread, answering from stored snapshots meanwhile.
BUILD_INLINE = 20_000
SNAPSHOT_PROBE = 0.25  # s of CPU a probe state from stored snapshots may take (_Built)
# The timeline's markers: the events that start each kind (a user turn is a user message).
MARKER_KINDS: dict[type[Any], str] = {
    MessageStarted: "user", ToolFailed: "error", CompactionAdded: "compaction",
    ToolApprovalRequested: "approval"}
YIELD_EVERY, YIELD_SLEEP = 2000, 0.0005  # a background build gives way this often (s)
RECENT = 8  # states kept per Viewer: scrolling at one seq asks for several windows of it
# A state answer whose session's last answers each took at most this much CPU is made on
# the thread that read the request (Viewer.cheap): handing it to a worker thread and back
# costs two waits for a core, tens of ms on a loaded machine, against ~5 ms of work.
INLINE_CPU = 0.025  # s
COSTS_KEPT = 4  # the last answers' CPU a session's cost is judged by
MAX_HELD = 512  # the most messages a page may say it holds for a delta answer

# Long strings are clipped in state answers: the page shows them in a line viewer that
# asks for the lines on screen (``Viewer.lines``), so a 50k-line tool output is never sent
# or put in the DOM whole.
LONG_LINES = 200
LONG_CHARS = 20_000
HEAD_LINES = 50
LINE_CHARS = 2_000  # a longer line is cut (the page shows how much is left out)
EVENT_CHARS = 2_000  # strings of the event shown under the slider
CLIPPED_FIELDS = {"text": ("text",), "reasoning": ("text",),
                  "tool": ("output", "error", "raw")}  # part type -> fields (tool: in state)


def event_json(e: AnyEvent) -> dict[str, Any]:
    """An event as the page shows it: its tag and seq first, then every field."""
    data = to_builtins(redacted(e))
    assert isinstance(data, dict)
    return {"tag": tag_of(type(e)), **data}


def _cut(value: Any, limit: int) -> Any:
    """``value`` with every string longer than ``limit`` cut, and saying how much is left."""
    if isinstance(value, str):
        return value if len(value) <= limit else (
            f"{value[:limit]}… (+{len(value) - limit} chars)")
    if isinstance(value, dict):
        return {k: _cut(x, limit) for k, x in value.items()}
    if isinstance(value, list):
        return [_cut(x, limit) for x in value]
    return value


def is_long(text: str) -> bool:
    return len(text) > LONG_CHARS or text.count("\n") >= LONG_LINES


def text_lines(text: str, first: int, count: int) -> list[str]:
    """Lines ``first .. first+count`` of ``text``, each cut at ``LINE_CHARS``."""
    lines = text.split("\n")[first:first + count]
    return [_cut(line, LINE_CHARS) for line in lines]


def clip_message(message: dict[str, Any]) -> dict[str, Any]:
    """A WithParts JSON message with its long strings replaced by their first lines.

    A clipped part gets ``clipped: {field: number of lines}``; the page asks
    ``Viewer.lines`` for the rest as it scrolls.
    """
    parts = message["parts"]
    if not any(_long_fields(p) for p in parts):
        return message
    out = []
    for part in parts:
        fields = _long_fields(part)
        if not fields:
            out.append(part)
            continue
        short = dict(part)
        holder = short if part["type"] != "tool" else dict(part["state"])
        clipped = {}
        for name in fields:
            text = holder[name]
            clipped[name] = text.count("\n") + 1
            holder[name] = "\n".join(text_lines(text, 0, HEAD_LINES))
        if part["type"] == "tool":
            short["state"] = holder
        short["clipped"] = clipped
        out.append(short)
    return {**message, "parts": out}


def _clipped(m: v.WithParts) -> bool:
    """Whether ``clip_message`` would clip a string of the message."""
    for p in m.parts:
        names = CLIPPED_FIELDS.get(type(p).TAG, ())
        holder = p.state if isinstance(p, v.ToolPart) else p
        if any(isinstance(s := getattr(holder, n, None), str) and is_long(s) for n in names):
            return True
    return False


def _long_fields(part: dict[str, Any]) -> list[str]:
    names = CLIPPED_FIELDS.get(part["type"], ())
    holder = part.get("state", {}) if part["type"] == "tool" else part
    return [n for n in names if isinstance(holder.get(n), str) and is_long(holder[n])]


def session_json(store: Store, sid: str) -> dict[str, Any]:
    """A row of the session list. ``imported`` is where an import found the session,
    read from its first event (``session.imported``): a fork shares its parent's, so
    only a session with no parent gets one. ``child_of`` is the session an imported
    one was a child of in its tool (OpenCode's ``parentID``)."""
    info = store.session_info(sid)
    version = store.version(sid)
    last = next(iter(store.read(sid, version, version)), None) if version else None
    head = next(iter(store.read(sid, 1, 1)), None) if version and info.parent is None else None
    imported = child_of = None
    if isinstance(head, SessionImported):
        imported = {"format": head.format, "source": head.source,
                    "original_id": head.original_id, "tool_version": head.tool_version}
        parent = (head.metadata or {}).get("parent_session")
        child_of = parent if isinstance(parent, str) and parent != sid else None
    return {"id": info.id, "created": info.created, "parent": info.parent,
            "fork_seq": info.fork_seq, "version": version,
            "updated": last.time if last is not None else info.created,
            "imported": imported, "child_of": child_of, **_summary(store, sid, version)}


_SUMMARIES: OrderedDict[tuple[int, str, int], dict[str, Any]] = OrderedDict()
_SUMMARIES_LOCK = threading.Lock()
USAGE_UP_TO = 50_000  # longer sessions are listed without message, token and cost sums


def _summary(store: Store, sid: str, version: int) -> dict[str, Any]:
    """Title, cwd, model (titles.describe) and, for a session of up to USAGE_UP_TO
    events, its message, token and cost sums; kept per version (the list is asked for
    again at every live update)."""
    key = (id(store), sid, version)
    with _SUMMARIES_LOCK:
        found = _SUMMARIES.get(key)
    if found is not None:
        return found
    got = describe(store, sid, version)
    got.update(usage(at(store, sid, version).messages()) if version <= USAGE_UP_TO
               else {"messages": None, "tokens": None, "cost": None})
    with _SUMMARIES_LOCK:
        _SUMMARIES[key] = got
        while len(_SUMMARIES) > 1024:
            _SUMMARIES.popitem(last=False)
    return got


def sessions_json(store: Store) -> list[dict[str, Any]]:
    """Every conversation with its lineage; the page draws the tree from ``parent``.

    The mailbox log is not a conversation: the page shows it apart (``mailbox.py``).
    """
    return [session_json(store, info.id) for info in store.sessions()
            if info.id != MAILBOX_SESSION]


class _Yielding:
    """The store, whose ``read`` lets the page's requests run every ``YIELD_EVERY``
    events: a Timeline built in a thread otherwise holds the interpreter for its
    5 ms switch interval at a time, and a request waits for it at every hand-over."""

    def __init__(self, store: Store) -> None:
        self._store = store

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)

    def read(self, session_id: str, first: int = 1, last: int | None = None
             ) -> Iterator[AnyEvent]:
        for i, e in enumerate(self._store.read(session_id, first, last), 1):
            if i % YIELD_EVERY == 0:
                time.sleep(YIELD_SLEEP)
            yield e


def snapshots_answer(store: Store, sid: str, version: int) -> bool:
    """Whether the store's own snapshots give a long session's states fast enough to
    need no Timeline: a state a quarter, half and three quarters in, with a window of
    its messages, in ``SNAPSHOT_PROBE`` s of CPU each. A session without stored
    snapshots, with sparse ones, or with ones written against other views (each
    message then replays from the start) fails it and gets its Timeline."""
    for seq in (version // 4, version // 2, version * 3 // 4):
        t0 = time.process_time()
        proj = at(store, sid, seq)
        ids = message_ids(proj)
        for mid in ids[len(ids) // 2:len(ids) // 2 + 8]:
            proj.message(mid)
        if time.process_time() - t0 > SNAPSHOT_PROBE:
            return False
    return True


class _Built:
    """A session's marks (the seqs where messages start: PgUp/PgDn stops) and timeline
    markers, and its Timeline unless the store's snapshots answer (see
    :func:`snapshots_answer`): folding a 1M-event session into a Timeline costs a
    minute of CPU that every other request waits behind, and buys little over
    stored snapshots every 1,000 events. ``version`` is what the marks cover."""

    def __init__(self, store: Store, sid: str, every: int, *, fold: bool = True) -> None:
        store = cast(Store, _Yielding(store))
        version = store.version(sid)
        marks: list[int] = []
        self.markers: dict[str, list[int]] = {k: [] for k in MARKER_KINDS.values()}
        # In bulk: a run of deltas (most of a session) is one item, and no mark is one.
        for i, e in enumerate(read_bulk(store, sid, 1, version, ids=False), 1):
            if i % (YIELD_EVERY // 8) == 0:  # the page's requests go first (_Yielding)
                time.sleep(YIELD_SLEEP)
            if isinstance(e, Run):
                continue
            if isinstance(e, MessageStarted):
                marks.append(e.seq)
            kind = MARKER_KINDS.get(type(e))
            if kind is not None and (kind != "user" or getattr(e, "role", "") == "user"):
                self.markers[kind].append(e.seq)
        self.markers_upto = version
        self.marks = marks
        self.version = version
        self.timeline: Timeline | None = None
        if fold or not snapshots_answer(store, sid, version):
            every = max(every, -(-version // MAX_FROZEN))
            self.timeline = Timeline(store, sid, every=every)
            self.marks += [e.seq for e in store.read(sid, version + 1, self.timeline.version)
                           if isinstance(e, MessageStarted)]
            self.version = self.timeline.version


class _Cached:
    """What the viewer knows of one session: its Timeline and marks once built.

    Building them folds the whole log (seconds at 1M events), so it runs in a thread:
    until it is done, states come from the store's own snapshots (``timetravel.at``,
    milliseconds), and state answers carry no marks."""

    def __init__(self) -> None:
        self.built: _Built | None = None
        self.building = False
        self.error: BaseException | None = None
        self.done = threading.Event()

    @property
    def timeline(self) -> Timeline | None:
        return None if self.built is None else self.built.timeline

    @property
    def marks(self) -> list[int] | None:
        return None if self.built is None else self.built.marks


class Viewer:
    """Answers the page's questions about one store, caching a Timeline per session.

    ``at(seq)`` is a Timeline lookup (a thaw plus at most ``every - 1`` events);
    events appended after the Timeline was built are folded on top until there
    are ``REBUILD_AFTER`` of them, then the Timeline is rebuilt. The Timeline is
    built on the first request for a session of up to ``BUILD_INLINE`` events, and
    for a longer one in the background (unless ``background=False``); until then
    a state is the store's nearest stored snapshot plus the events after it.
    ``anchors`` are heads kept elsewhere (``convlog anchor``) that ``verify``
    checks the log against.
    """

    def __init__(self, store: Store, *, every: int = 64,
                 anchors: Iterable[anchoring.Anchor] = (), background: bool = True) -> None:
        self.store = store
        self.every = every
        self.background = background
        self.anchors = {a.session_id: a for a in anchors}
        self._cache: dict[str, _Cached] = {}
        self._recent: OrderedDict[tuple[str, int],
                                  tuple[WithPartsProjection, list[str]]] = OrderedDict()
        self._verified: dict[str, tuple[int, dict[str, Any]]] = {}
        self._usage: dict[str, tuple[int, dict[str, Any]]] = {}
        self._events: OrderedDict[tuple[str, int], AnyEvent] = OrderedDict()
        self._diffs: OrderedDict[tuple[str, int, str, int], dict[str, Any]] = OrderedDict()
        self._lock = threading.Lock()
        self._verify_lock = threading.Lock()
        self._restore = RestoreCache()  # decoded snapshot indexes and views, between answers
        self._costs: dict[str, list[float]] = {}  # sid -> the last answers' thread CPU (s)

    def _cached(self, sid: str, *, build: bool = True) -> _Cached:
        """The session's entry; with ``build``, its Timeline is (re)built if needed."""
        version = self.store.version(sid)
        start = False
        with self._lock:
            c = self._cache.get(sid)
            if c is None:
                c = self._cache[sid] = _Cached()
            b = c.built
            stale = b is not None and version - b.version > REBUILD_AFTER
            if build and not c.building and ((b is None and c.error is None) or stale):
                c.building = start = True
            elif b is not None and version > b.version:
                # Only the marks of new events; the state is folded on demand.
                first = max(b.version, b.marks[-1] if b.marks else 0) + 1
                for e in self.store.read(sid, first, version):
                    if isinstance(e, MessageStarted) and (not b.marks or e.seq > b.marks[-1]):
                        b.marks.append(e.seq)
        if start:
            if self.background and version > BUILD_INLINE:
                threading.Thread(target=self._build, args=(sid, c), daemon=True,
                                 name=f"convlog-timeline-{sid[:8]}").start()
            else:
                self._build(sid, c)
        return c

    def _build(self, sid: str, c: _Cached) -> None:
        try:
            built = _Built(self.store, sid, self.every,
                           fold=self.store.version(sid) <= BUILD_INLINE)
        except Exception as exc:  # the store's snapshots still answer
            with self._lock:
                c.error, c.building = exc, False
            c.done.set()
            return
        with self._lock:
            c.built, c.building = built, False
        c.done.set()

    def markers(self, sid: str) -> dict[str, Any]:
        """The seqs of the timeline's markers by kind (user turns, tool errors,
        compactions, approval requests) and the session's forks, once the Timeline is
        built; ``ready`` false before. Events after the build add to them."""
        c = self._cached(sid)
        built = c.built
        forks = sorted(info.fork_seq for info in self.store.sessions()
                       if info.parent == sid and info.fork_seq is not None)
        if built is None:
            return {"ready": False, "version": self.store.version(sid), "forks": forks}
        with self._lock:
            version = self.store.version(sid)
            for e in self.store.read(sid, built.markers_upto + 1, version):
                kind = MARKER_KINDS.get(type(e))
                if kind is not None and (kind != "user" or getattr(e, "role", "") == "user"):
                    built.markers[kind].append(e.seq)
            built.markers_upto = max(built.markers_upto, version)
            found = {k: list(v) for k, v in built.markers.items()}
        return {"ready": True, "version": version, "forks": forks, **found}

    def cheap(self, sid: str) -> bool:
        """Whether a state answer for ``sid`` is expected to take at most ``INLINE_CPU``
        of CPU: the session's last answers each took that little, and no build of its
        marks (or Timeline) would start with this one. The app makes a cheap answer on
        the thread that read the request (no hand-over to a worker thread and back)."""
        with self._lock:
            costs = self._costs.get(sid)
            c = self._cache.get(sid)
        if not costs or max(costs) > INLINE_CPU or c is None:
            return False
        b = c.built
        if c.building or c.error is not None:
            return True  # answered from stored snapshots while the build runs (or failed)
        return b is not None and self.store.version(sid) - b.version <= REBUILD_AFTER

    def _cost(self, sid: str, cpu: float) -> None:
        with self._lock:
            kept = self._costs.setdefault(sid, [])
            kept.append(cpu)
            del kept[:-COSTS_KEPT]

    def wait_built(self, sid: str, timeout: float | None = None) -> bool:
        """Block until the session's Timeline is built (tests and benchmarks)."""
        return self._cached(sid).done.wait(timeout)

    def projection(self, sid: str, seq: int) -> WithPartsProjection:
        c = self._cached(sid, build=False)
        version = self.store.version(sid)
        if not 0 <= seq <= version:
            raise ValueError(f"seq {seq} is outside 0..{version}")
        tl = c.timeline
        if tl is None:  # the stored snapshots and the events after them
            return self._from_snapshots(sid, seq)
        if seq <= tl.version:
            return tl.at(seq)
        proj = tl.at(tl.version)
        return proj.apply_all(self.store.read(sid, tl.version + 1, seq))

    def _from_snapshots(self, sid: str, seq: int) -> WithPartsProjection:
        """``timetravel.at(seq)`` with the viewer's :class:`RestoreCache` (the snapshot's
        merged index and the message views decoded for earlier answers), its tail read
        in runs without ids (as ``at`` reads it: only the events up to ``seq`` of the
        tail's block are decoded, and no id is made). The event at ``seq`` (the line
        under the slider) is read apart, decoding only its own body
        (``SQLStore.read_exact``): reading the tail as events decoded the whole
        block, about half of a scrub's answer at 1M events."""
        proj = latest_snapshot(self.store, sid, seq, cache=self._restore) or \
            WithPartsProjection(sid)
        if proj.seq < seq:
            proj.apply_all(read_bulk(self.store, sid, proj.seq + 1, seq, ids=False))
            read = getattr(self.store, "read_exact", self.store.read)
            event = next(iter(read(sid, seq, seq)), None)
            if event is not None:
                with self._lock:
                    self._events[(sid, seq)] = event
                    while len(self._events) > RECENT:
                        self._events.popitem(last=False)
        return proj

    def _event(self, sid: str, seq: int) -> AnyEvent | None:
        with self._lock:
            kept = self._events.get((sid, seq))
        if kept is not None:
            return kept
        read = getattr(self.store, "read_exact", self.store.read)  # one body, not the block
        return next(iter(read(sid, seq, seq)), None) if seq else None

    def _at(self, sid: str, seq: int) -> tuple[WithPartsProjection, list[str]]:
        """The state as of ``seq`` and its message ids in order; the last few are kept
        (the log never changes below its version, so they cannot go stale)."""
        key = (sid, seq)
        with self._lock:
            found = self._recent.get(key)
            if found is not None:
                self._recent.move_to_end(key)
                return found
        proj = self.projection(sid, seq)
        got = (proj, message_ids(proj))
        with self._lock:
            self._recent[key] = got
            while len(self._recent) > RECENT:
                self._recent.popitem(last=False)
        return got

    def messages(self, sid: str, seq: int) -> list[v.WithParts]:
        """Every message as of ``seq``."""
        return self._at(sid, seq)[0].messages()

    def state(self, sid: str, seq: int | None = None, *, start: int | None = None,
              count: int = WINDOW, marks: bool = True, have: int | None = None,
              held: tuple[int, int] | None = None) -> dict[str, Any]:
        """The state as of ``seq``: ``count`` messages, the event at ``seq``, the marks.

        Without ``start`` the window is centred on the message the event touched.
        Only the window's messages are built (a stored snapshot loads each message
        when first used). Long strings are clipped (see :func:`clip_message`).

        With ``have`` and ``held``, the page holds the messages ``held[0] .. held[1]``
        of the state at seq ``have`` (as earlier answers gave them): a message of the
        window equal to one of those is sent as ``{"same": its id}`` (see
        :meth:`_delta`), and the answer says ``have``. A scrub's next step changes one
        message of the eight it shows.
        """
        cpu = time.thread_time()
        version = self.store.version(sid)
        seq = version if seq is None else seq
        count = max(1, min(count, MAX_COUNT))
        if not 0 <= seq <= version:
            raise ValueError(f"seq {seq} is outside 0..{version}")
        proj, ids = self._at(sid, seq)
        event = self._event(sid, seq)
        focus = len(ids) - 1
        mid = getattr(event, "message_id", None)
        if mid is not None:
            with contextlib.suppress(ValueError):
                focus = ids.index(mid)
        if start is None:
            start = max(0, focus - count // 2)
        start = max(0, min(start, max(0, len(ids) - count)))
        messages = [proj.message(m) for m in ids[start:start + count]]
        sent: list[dict[str, Any] | None] = [None] * len(messages)
        if have is not None and held is not None and have != seq:
            sent = self._delta(sid, have, held, messages)
        fresh = [m for m, s in zip(messages, sent, strict=True) if s is None]
        made = iter(converter.unstructure(fresh, list[v.WithParts]))
        answer = {
            "session": sid, "seq": seq, "version": version, "total": len(ids),
            "start": start, "focus": focus, "window": count,
            "have": have if any(s is not None for s in sent) else None,
            "messages": [s if s is not None else clip_message(next(made)) for s in sent],
            "event": None if event is None else _cut(event_json(event), EVENT_CHARS),
            "marks": None,
        }
        # The Timeline is started after the answer is made, so that the first state does
        # not share the interpreter with its build.
        known = self._cached(sid).marks
        answer["marks"] = known if marks else None
        self._cost(sid, time.thread_time() - cpu)
        return answer

    def _delta(self, sid: str, have: int, held: tuple[int, int],
               messages: list[v.WithParts]) -> list[dict[str, Any] | None]:
        """For each message, ``{"same": id}`` if the page holds it as it is (the same
        view at ``have``, among the held indexes), else None: it is sent whole. Only a
        state kept from an earlier answer is compared (none is folded for this), and a
        message with a clipped string is always sent (its line box reads the rest at
        the new seq)."""
        with self._lock:
            kept = self._recent.get((sid, have))
        out: list[dict[str, Any] | None] = [None] * len(messages)
        if kept is None:
            return out
        before, before_ids = kept
        first, last = max(0, held[0]), min(len(before_ids), held[1], held[0] + MAX_HELD)
        there = set(before_ids[first:last])
        for i, m in enumerate(messages):
            mid = m.info.id
            if mid in there and before.message(mid) == m and not _clipped(m):
                out[i] = {"same": mid}
        return out

    def lines(self, sid: str, seq: int, where: tuple[str, str, str], *,
              first: int, count: int) -> dict[str, Any]:
        """Lines of one long string of a part as of ``seq`` (what the page scrolls to)."""
        text = self._field(sid, seq, *where)
        count = max(0, min(count, 1000))
        return {"total": text.count("\n") + 1, "first": max(0, first),
                "lines": text_lines(text, max(0, first), count)}

    def _field(self, sid: str, seq: int, message_id: str, part_id: str, field: str) -> str:
        proj, ids = self._at(sid, seq)
        for m in [proj.message(message_id)] if message_id in ids else []:
            for p in m.parts:
                if p.id != part_id:
                    continue
                holder: Any = p.state if isinstance(p, v.ToolPart) else p
                value = getattr(holder, field, None) if field in {
                    f for fs in CLIPPED_FIELDS.values() for f in fs} else None
                if isinstance(value, str):
                    return value
                raise ValueError(f"part {part_id} has no text field {field!r}")
        raise ValueError(f"no part {message_id}/{part_id} at seq {seq}")

    def events(self, sid: str, first: int, last: int) -> list[dict[str, Any]]:
        version = self.store.version(sid)
        first, last = max(1, first), min(last, version, first + 999)
        return [event_json(e) for e in self.store.read(sid, first, last)] if first <= last else []

    def diff(self, a_sid: str, a: int, b_sid: str, b: int, *, start: int = 0,
             count: int | None = None) -> dict[str, Any]:
        """Two points of one session, or of two sessions of one lineage (parent vs fork).

        With ``count``, only changes ``start .. start+count`` are sent, with ``total``:
        the page shows a diff as a windowed list (a whole 1M-event session's diff has
        tens of thousands of rows). The last diffs are kept, so paging costs nothing."""
        key = (a_sid, a, b_sid, b)
        with self._lock:
            whole = self._diffs.get(key)
        if whole is None:
            whole = self._diff(a_sid, a, b_sid, b)
            with self._lock:
                self._diffs[key] = whole
                while len(self._diffs) > 2:
                    self._diffs.popitem(last=False)
        changes = whole["changes"]
        start = max(0, min(start, len(changes)))
        end = len(changes) if count is None else start + max(0, min(count, MAX_DIFF_ROWS))
        return {**whole, "changes": changes[start:end], "start": start, "total": len(changes)}

    def _diff(self, a_sid: str, a: int, b_sid: str, b: int) -> dict[str, Any]:
        if a_sid != b_sid and not self._related(a_sid, b_sid):
            raise ValueError("the two sessions do not share a lineage")
        before = self.messages(a_sid, a)
        after = self.messages(b_sid, b)
        if a_sid != b_sid:  # past the fork point the ids differ: pair by position
            out = {"a": a, "b": b, "by_position": True,
                   **by_position(before, after, seq_a=a, seq_b=b)}
        else:
            out = diff_states(before, after, seq_a=a, seq_b=b).as_json()
            out["changes"] = detailed(out["changes"], before, after)
        texts_a, texts_b = _part_texts(before), _part_texts(after)
        for change in out["changes"]:
            if change["kind"] == "text-grown":  # the page highlights what was added
                key = (change["message_id"], change["part_id"])
                old, new = texts_a.get(key, ""), texts_b.get(key, "")
                change["grown"] = _cut(new[len(old):] if new.startswith(old) else new,
                                       LONG_CHARS)
        out.update(a_session=a_sid, b_session=b_sid)
        return out

    def _related(self, x: str, y: str) -> bool:
        return bool({s for s, _ in self.store.lineage(x)} & {s for s, _ in self.store.lineage(y)})

    def verify(self, sid: str) -> dict[str, Any]:
        """How far the hash chain checks out (every event, or up to the first problem),
        and whether the anchor given for the session still holds.

        A verification runs once per version of the session (the page asks again on
        every live update), in a child process when the store can be opened there.
        """
        with self._verify_lock:
            version = self.store.version(sid)
            known = self._verified.get(sid)
            if known is not None and known[0] == version:
                return known[1]
            result = verify_elsewhere(self.store, sid, self.anchors.get(sid))
            self._verified[sid] = (version, result)
            return result

    def find(self, sid: str, query: str) -> dict[str, Any]:
        """Messages of the session's latest state that mention ``query`` (ignoring case),
        each with the seq where it starts (once the marks are known): the page puts
        them on the timeline and jumps between them."""
        needle = query.casefold()
        version = self.store.version(sid)
        hits: list[dict[str, Any]] = []
        if not needle:
            return {"version": version, "hits": hits}
        marks = self._cached(sid).marks
        proj, ids = self._at(sid, version)
        for i, mid in enumerate(ids):
            text = next((t for t in _texts(proj.message(mid)) if needle in t.casefold()), None)
            if text is None:
                continue
            at_ = text.casefold().index(needle)
            hits.append({"index": i, "message": mid,
                         "seq": marks[i] if marks is not None and i < len(marks) else None,
                         "snippet": text[max(0, at_ - 40):at_ + len(needle) + 40]})
            if len(hits) >= FIND_LIMIT:
                break
        return {"version": version, "hits": hits}

    def spawner(self, sid: str, child: str) -> dict[str, Any]:
        """Where in ``sid`` the call that ran ``child`` (a subagent's session) is: the
        message and part of the tool call naming it (``metadata.child_session``, or
        OpenCode's ``state.metadata.sessionId`` by the child's original id), and the seq
        where that message starts once the marks are known; ``found`` false if none.
        A Codex ``spawn_agent`` call names its agent only in its output, so for it the
        seq is where the call completed: the link is on screen from there on."""
        version = self.store.version(sid)
        original = None
        head = next(iter(self.store.read(child, 1, 1)), None)
        if isinstance(head, SessionImported):
            original = head.original_id
        marks = self._cached(sid).marks
        proj, ids = self._at(sid, version)
        for i, mid in enumerate(ids):
            for p in proj.message(mid).parts:
                if isinstance(p, v.ToolPart) and child_named(p) in {child, original}:
                    seq = None
                    if marks is not None and i < len(marks):
                        seq = marks[i]
                        if spawned_thread(p) == child_named(p):  # named once completed
                            end = marks[i + 1] - 1 if i + 1 < len(marks) else version
                            seq = next((e.seq for e in self.store.read(sid, seq, end)
                                        if isinstance(e, ToolCompleted) and e.part_id == p.id),
                                       seq)
                    return {"found": True, "message": mid, "part": p.id, "index": i,
                            "seq": seq}
        return {"found": False, "message": None, "part": None, "index": None, "seq": None}

    def usage(self, sid: str) -> dict[str, Any]:
        """Tokens and cost of each assistant message of the latest state (the rule of
        ``titles.usage``: the message's own totals, else its steps' sums), with the seq
        where it starts once the marks are known, and the session's totals."""
        version = self.store.version(sid)
        with self._lock:
            kept = self._usage.get(sid)
        if kept is None or kept[0] != version:
            # Once per version (every message of the latest state is built); the seqs
            # are looked up at each answer, as the marks come in.
            proj, ids = self._at(sid, version)
            rows: list[dict[str, Any]] = []
            built: list[v.WithParts] = []
            for i, mid in enumerate(ids):
                if i % 32 == 31:  # every message is built: the page's scrubs go first
                    time.sleep(YIELD_SLEEP)
                m = proj.message(mid)
                built.append(m)
                row = usage_row(i, m)
                if row is not None:
                    rows.append(row)
            kept = (version, {"version": version, "messages": rows, "total": usage(built)})
            with self._lock:
                self._usage[sid] = kept
        marks = self._cached(sid).marks
        found = kept[1]
        return {**found, "ready": marks is not None, "messages": [
            {**r, "seq": marks[r["index"]] if marks is not None and r["index"] < len(marks)
             else None} for r in found["messages"]]}

    def search(self, query: str) -> list[dict[str, Any]]:
        """Sessions whose latest state mentions ``query`` (case-insensitive)."""
        needle = query.casefold()
        hits: list[dict[str, Any]] = []
        if not needle:
            return hits
        for info in self.store.sessions():
            if info.id == MAILBOX_SESSION:
                continue
            for m in self.messages(info.id, self.store.version(info.id)):
                text = next((t for t in _texts(m) if needle in t.casefold()), None)
                if text is not None:
                    i = text.casefold().index(needle)
                    hits.append({"session": info.id, "message": m.info.id,
                                 "snippet": text[max(0, i - 40):i + len(needle) + 40]})
                    break
            if len(hits) >= SEARCH_LIMIT:
                break
        return hits


def usage_row(index: int, m: v.WithParts) -> dict[str, Any] | None:
    """An assistant message's row of the usage chart (``/api/sessions/{id}/usage`` and
    the exported file): its tokens and cost by ``titles.usage``'s rule; None for
    another role."""
    if not isinstance(m.info, v.AssistantInfo):
        return None
    got = usage([m])
    return {"index": index, "message": m.info.id, "tokens": got["tokens"], "cost": got["cost"]}


def child_named(part: v.ToolPart) -> str | None:
    """The session a tool call ran as a subagent: the importers' ``child_session``
    (a convlog session id), else OpenCode's task ``sessionId`` or the thread a Codex
    ``spawn_agent`` call started (the tool's own ids: a child's ``original_id``)."""
    for meta in (part.metadata, getattr(part.state, "metadata", None)):
        if isinstance(meta, dict):
            found = meta.get("child_session") or meta.get("sessionId")
            if isinstance(found, str) and found:
                return found
    return spawned_thread(part)


def spawned_thread(part: v.ToolPart) -> str | None:
    """The thread a Codex ``spawn_agent`` call started: its output is JSON naming it,
    ``{"agent_id": <thread id>, "nickname": …}``, and the spawned rollout's
    ``session_meta.id`` (its session's ``original_id``) is that thread. The importer
    links the child to its parent session (lineage ``child``), not to the call."""
    state = part.state
    if part.tool != "spawn_agent" or not isinstance(state, v.ToolStateCompleted):
        return None
    try:
        out = json.loads(state.output)
    except ValueError:
        return None
    agent = out.get("agent_id") if isinstance(out, dict) else None
    return agent if isinstance(agent, str) and agent else None


def message_ids(proj: WithPartsProjection) -> list[str]:
    """The state's message ids in order, without building its messages: a state from
    stored snapshots loads each message when first used, and a window needs 16 of
    thousands. Falls back to building them if the projection keeps its messages
    differently."""
    held = getattr(proj, "_msgs", None)  # WithPartsProjection's ordered message map
    if isinstance(held, dict):
        return list(held)
    return [m.info.id for m in proj.messages()]


def _part_texts(messages: list[v.WithParts]) -> dict[tuple[str, str], str]:
    return {(m.info.id, p.id): p.text for m in messages for p in m.parts
            if isinstance(p, v.TextPart | v.ReasoningPart)}


def _texts(m: v.WithParts) -> Iterator[str]:
    for p in m.parts:
        if isinstance(p, v.TextPart | v.ReasoningPart):
            yield p.text
        elif isinstance(p, v.ToolPart):
            st = p.state
            if isinstance(st, v.ToolStateCompleted):
                yield st.output
            elif isinstance(st, v.ToolStateError):
                yield st.error
