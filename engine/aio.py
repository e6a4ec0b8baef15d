"""asyncio embedding: an :class:`AsyncSession` beside the sync :class:`~engine.session.Session`.

- Commands and appends are coroutines; they run the sync session in the event
  loop's thread (appends to the in-memory store take microseconds; a blocking
  store holds the loop for its commit, as it holds a sync caller).
- :meth:`AsyncSession.ingest` feeds a provider stream from an async iterator
  into a stream adapter (:mod:`engine.adapters`); if the iterator raises or the
  task is cancelled, the message is settled (see :mod:`engine.adapters.ingest`)
  before the exception propagates.
- :meth:`AsyncSession.subscribe` returns a :class:`Subscription`, an async
  iterator of :class:`Update` (each new event with the subscriber's state after
  it) and :class:`Gap` markers. The engine knows no projection: a subscriber
  passes a *fold*, any callable taking an event and returning the state to
  deliver (``projections.live`` provides the WithParts folds). The fold runs
  once per event as the event is committed, so the state is never re-folded
  from the log; with ``replay=True`` (the default) it first folds the session's
  existing history once.

**Overflow policy.** Each subscription buffers at most ``maxsize`` updates. The
writer never waits for a subscriber: delivering is an O(1) append. When a
subscription's buffer is full:

- ``"drop_oldest"`` (default): the oldest buffered update is dropped and the
  subscriber next receives one :class:`Gap` saying which seqs it missed
  (consecutive drops widen the same gap), then the newer updates. The fold has
  seen every event, so the state carried by the next update is complete.
- ``"disconnect"``: the subscription is closed; once the subscriber has read
  what was buffered, iterating raises :class:`SubscriberOverflow`.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import AsyncIterable, AsyncIterator, Callable, Iterable, Sequence
from typing import Any, Generic, Literal, TypeVar, overload

import attrs

from engine import events as ev
from engine.adapters.ingest import IngestResult, StreamError, StreamIngest
from engine.errors import ConvlogError
from engine.events import Event
from engine.session import PartRef, Session
from engine.store.base import Store

S = TypeVar("S")
T = TypeVar("T")
Fold = Callable[[Event], S]
Overflow = Literal["drop_oldest", "disconnect"]


class SubscriberOverflow(ConvlogError):
    """A ``disconnect`` subscription fell more than its buffer behind the writer."""


@attrs.frozen
class Update(Generic[S]):
    """One committed event and the subscriber's fold state right after it."""

    event: Event
    state: S


@attrs.frozen
class Gap:
    """Updates a slow ``drop_oldest`` subscriber missed: seqs ``first..last`` (``count``)."""

    first: int
    last: int
    count: int


class Subscription(Generic[S]):
    """An async iterator of updates from one session, with a bounded buffer."""

    def __init__(self, fold: Fold[S], maxsize: int, overflow: Overflow,
                 on_close: Callable[[Subscription[S]], None]) -> None:
        if maxsize < 1:
            raise ValueError("maxsize must be at least 1")
        if overflow not in ("drop_oldest", "disconnect"):
            raise ValueError(f"unknown overflow policy {overflow!r}")
        self.maxsize = maxsize
        self.overflow: Overflow = overflow
        self._fold = fold
        self._items: deque[Update[S]] = deque()
        self._gap: Gap | None = None
        self._waiter: asyncio.Future[None] | None = None
        self._closed = False
        self._error: SubscriberOverflow | None = None
        self._on_close = on_close
        self.delivered = 0
        self.dropped = 0

    # ------------------------------------------------------------------ writer side

    def push(self, e: Event) -> None:
        """Fold and buffer one event; never waits (called by the writer)."""
        if self._closed:
            return
        state = self._fold(e)
        items = self._items
        if len(items) >= self.maxsize:
            if self.overflow == "disconnect":
                self._error = SubscriberOverflow(
                    f"subscriber fell {self.maxsize} updates behind at seq {e.seq}")
                self.close()
                return
            old = items.popleft()
            self.dropped += 1
            gap = self._gap
            self._gap = (Gap(old.event.seq, old.event.seq, 1) if gap is None
                         else Gap(gap.first, old.event.seq, gap.count + 1))
        items.append(Update(e, state))
        self._wake()

    def _wake(self) -> None:
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self._on_close(self)
            self._wake()

    @property
    def closed(self) -> bool:
        return self._closed

    # ------------------------------------------------------------------ reader side

    def __aiter__(self) -> AsyncIterator[Update[S] | Gap]:
        return self

    async def __anext__(self) -> Update[S] | Gap:
        while True:
            if self._gap is not None:
                gap, self._gap = self._gap, None
                return gap
            if self._items:
                self.delivered += 1
                return self._items.popleft()
            if self._closed:
                if self._error is not None:
                    raise self._error
                raise StopAsyncIteration
            self._waiter = asyncio.get_running_loop().create_future()
            try:
                await self._waiter
            finally:
                self._waiter = None

    def pending(self) -> int:
        """How many updates wait in the buffer."""
        return len(self._items)


def _no_fold(e: Event) -> None:
    return None


class AsyncSession:
    """An asyncio front to one :class:`Session` (same log, same checks, same events)."""

    def __init__(self, session: Session) -> None:
        self.session = session
        self._subs: list[Subscription[Any]] = []
        self._unsubscribe = session.subscribe(self._fanout)

    @classmethod
    def create(cls, store: Store, session_id: str | None = None, **kw: Any) -> AsyncSession:
        return cls(Session.create(store, session_id, **kw))

    @property
    def id(self) -> str:
        return self.session.id

    @property
    def version(self) -> int:
        return self.session.version

    def _fanout(self, e: Event) -> None:
        for sub in self._subs:
            sub.push(e)

    # ------------------------------------------------------------------ subscriptions

    @overload
    def subscribe(self, fold: None = None, *, maxsize: int = ..., overflow: Overflow = ...,
                  replay: bool = ...) -> Subscription[None]: ...

    @overload
    def subscribe(self, fold: Fold[S], *, maxsize: int = ..., overflow: Overflow = ...,
                  replay: bool = ...) -> Subscription[S]: ...

    def subscribe(self, fold: Fold[Any] | None = None, *, maxsize: int = 1024,
                  overflow: Overflow = "drop_oldest", replay: bool = True
                  ) -> Subscription[Any]:
        """Updates for every event committed from now on, with ``fold``'s state after each.

        ``replay`` folds the existing history into ``fold`` first (not delivered).
        """
        f: Fold[Any] = fold if fold is not None else _no_fold
        if replay and fold is not None and self.session.version:
            for e in self.session.store.read(self.session.id):
                f(e)
        sub: Subscription[Any] = Subscription(f, maxsize, overflow, self._subs.remove)
        self._subs.append(sub)
        return sub

    async def aclose(self) -> None:
        """End every subscription (their iterators stop after the buffered updates)."""
        for sub in list(self._subs):
            sub.close()
        self._unsubscribe()

    # ------------------------------------------------------------------ writing

    async def append(self, events: Iterable[Event]) -> list[int]:
        return self.session.append(events)

    async def call(self, command: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """Run any command of the wrapped session (``await a.call(a.session.deny, ref)``)."""
        return command(*args, **kwargs)

    async def user_message(self, text: str, **kw: Any) -> str:
        return self.session.user_message(text, **kw)

    async def start_message(self, role: ev.Role, **kw: Any) -> str:
        return self.session.start_message(role, **kw)

    async def complete_message(self, message_id: str, **kw: Any) -> int:
        return self.session.complete_message(message_id, **kw)

    async def abort(self, message_id: str, reason: str = "The operation was aborted") -> int:
        return self.session.abort(message_id, reason)

    async def start_tool(self, ref: PartRef, **kw: Any) -> int:
        return self.session.start_tool(ref, **kw)

    async def tool_progress(self, ref: PartRef, **kw: Any) -> int:
        return self.session.tool_progress(ref, **kw)

    async def complete_tool(self, ref: PartRef, output: str, **kw: Any) -> int:
        return self.session.complete_tool(ref, output, **kw)

    async def fail_tool(self, ref: PartRef, error: str, **kw: Any) -> int:
        return self.session.fail_tool(ref, error, **kw)

    async def ingest(self, adapter: StreamIngest, events: AsyncIterable[Any] | Sequence[Any],
                     ) -> IngestResult:
        """Feed a provider stream into ``adapter`` (bound to this session) and finish it.

        The loop gets a turn after every provider event, so subscribers see the
        stream live. A failure of the iterator (network error, cancellation)
        settles the message before it propagates.
        """
        if adapter.session is not self.session:
            raise ValueError("the adapter writes to another session")
        try:
            if isinstance(events, AsyncIterable):
                async for e in events:
                    adapter.feed(e)
                    await asyncio.sleep(0)
            else:
                for e in events:
                    adapter.feed(e)
                    await asyncio.sleep(0)
        except StreamError:
            raise  # the adapter settled the message already
        except BaseException as exc:
            if adapter.failed is None and adapter.started:
                adapter.fail(f"the stream was interrupted: {exc!r}")
            raise
        return adapter.finish()
