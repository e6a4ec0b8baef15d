"""Record a provider SDK's stream while the agent consumes it.

The agent keeps the SDK's own stream object, of the SDK's own type:
:func:`record_stream` makes its class a subclass of that type whose iteration
feeds every event to a stream ingest *before* handing it on unchanged
(``isinstance(stream, anthropic.Stream)`` still holds; ``response`` and every
other attribute are the SDK's). However the stream ends, the message is settled:

- the stream's end: the ingest's ``finish`` (a stream that stopped before the
  provider said the message was complete ends aborted, kind ``truncated``);
- the SDK raised (a connection cut, an ``error`` event): the message ends
  aborted with what arrived, and the SDK's exception propagates unchanged;
- the caller closed the stream early, or raised inside its ``with`` block: the
  message ends aborted, the caller's exception propagates unchanged.

A recording failure (the ingest refused an event) never changes what the agent
sees: the ingest has settled the message, the error is kept in
:attr:`Recording.error`, and later events are passed on unrecorded. With
``strict=True`` it is raised instead.

The SDK helper streams (``messages.stream``, ``responses.stream``,
``chat.completions.stream``) read their events from a raw stream held in
``_raw_stream``; :func:`record_raw` records that one, so every way of
consuming the helper (iteration, ``text_stream``, ``until_done``,
``get_final_message``) is recorded.
"""

from __future__ import annotations

from types import TracebackType
from typing import Any, TypeVar

from engine.adapters.ingest import IngestResult, StreamError, StreamIngest

T = TypeVar("T")


class Recording:
    """One stream's recording: feeds events to ``ingest`` and settles it exactly once."""

    def __init__(self, ingest: StreamIngest, *, strict: bool = False) -> None:
        self.ingest = ingest
        self.strict = strict
        self.done = False  # finished or settled: later events pass unrecorded
        self.error: StreamError | None = None

    @property
    def message_id(self) -> str:
        return self.ingest.message_id

    @property
    def result(self) -> IngestResult:
        """The message id, stop reason, usage and the tool calls the agent must run."""
        return self.ingest.result()

    def event(self, event: Any) -> None:
        if not self.done:
            self._guard(self.ingest.feed, event)

    def end(self) -> None:
        if not self.done:
            self._guard(self.ingest.finish)
            self.done = True

    def broken(self, reason: str) -> None:
        """The stream will not go on (an SDK error, a close, the caller's exception)."""
        if not self.done:
            self.done = True
            self.error = self.ingest.fail(reason)

    def _guard(self, step: Any, *args: Any) -> None:
        try:
            step(*args)
        except StreamError as exc:  # the ingest settled the message before raising
            self.done = True
            self.error = exc
            if self.strict:
                raise


def _why(exc: BaseException | None, fallback: str) -> str:
    if exc is None:
        return fallback
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


CLOSED = "closed by the caller before the stream ended"


def _sync_methods(base: type) -> dict[str, Any]:
    """Iteration, ``close`` and ``__exit__`` of a sync SDK stream class, recording."""

    def next_event(self: Any) -> Any:
        rec = self._convlog_recording
        try:
            event = base.__next__(self)  # type: ignore[attr-defined]
        except StopIteration:
            rec.end()
            raise
        except BaseException as exc:
            rec.broken(_why(exc, "the stream failed"))
            raise
        rec.event(event)
        return event

    def iterate(self: Any) -> Any:
        return self  # iterated through __next__, which records

    def close(self: Any) -> None:
        self._convlog_recording.broken(CLOSED)
        base.close(self)  # type: ignore[attr-defined]

    def exit_block(self: Any, kind: type[BaseException] | None, exc: BaseException | None,
                   tb: TracebackType | None) -> None:
        self._convlog_recording.broken(_why(exc, CLOSED))
        base.__exit__(self, kind, exc, tb)  # type: ignore[attr-defined]

    return {"__next__": next_event, "__iter__": iterate, "close": close, "__exit__": exit_block}


def _async_methods(base: type) -> dict[str, Any]:
    """The async twin of :func:`_sync_methods` (``AsyncStream``)."""

    async def anext_event(self: Any) -> Any:
        rec = self._convlog_recording
        try:
            event = await base.__anext__(self)  # type: ignore[attr-defined]
        except StopAsyncIteration:
            rec.end()
            raise
        except BaseException as exc:  # includes a cancelled task
            rec.broken(_why(exc, "the stream failed"))
            raise
        rec.event(event)
        return event

    def aiterate(self: Any) -> Any:
        return self

    async def close(self: Any) -> None:
        self._convlog_recording.broken(CLOSED)
        await base.close(self)  # type: ignore[attr-defined]

    async def aexit_block(self: Any, kind: type[BaseException] | None, exc: BaseException | None,
                          tb: TracebackType | None) -> None:
        self._convlog_recording.broken(_why(exc, CLOSED))
        await base.__aexit__(self, kind, exc, tb)  # type: ignore[attr-defined]

    return {"__anext__": anext_event, "__aiter__": aiterate, "close": close,
            "__aexit__": aexit_block}


_RECORDED: dict[type, type] = {}  # an SDK stream class -> its recording subclass


def record_stream(stream: T, recording: Recording, *, is_async: bool) -> T:
    """Record ``stream``'s events as they pass; the same object, its class now a
    subclass of the SDK's (``isinstance(stream, anthropic.Stream)`` holds).

    Iteration, ``close()`` and the ``with`` block record; every other attribute
    is the SDK's own.
    """
    cls = type(stream)
    if cls in _RECORDED.values():
        raise TypeError("this stream is already being recorded")
    sub = _RECORDED.get(cls)
    if sub is None:
        methods = _async_methods(cls) if is_async else _sync_methods(cls)
        # Only methods, no slots: the subclass keeps the SDK class's layout, so the
        # object's class may change in place.
        sub = _RECORDED[cls] = type(cls.__name__, (cls,), {
            **methods, "__module__": cls.__module__, "__qualname__": cls.__qualname__,
            "__doc__": cls.__doc__})
    stream._convlog_recording = recording  # type: ignore[attr-defined]
    stream.__class__ = sub
    return stream


def recording_of(stream: Any) -> Recording | None:
    """The recording of a stream :func:`record_stream` records, else None."""
    rec = getattr(stream, "_convlog_recording", None)
    return rec if isinstance(rec, Recording) else None


def record_raw(helper: Any, recording: Recording, *, is_async: bool) -> None:
    """Make an SDK helper stream read its events through a recording stream."""
    raw = getattr(helper, "_raw_stream", None)
    if raw is None:
        raise TypeError(f"{type(helper).__name__} has no raw stream to record")
    record_stream(raw, recording, is_async=is_async)


class RecordingManager:
    """Wraps a helper's stream manager (``with client.messages.stream(...) as s``)."""

    def __init__(self, manager: Any, recording: Recording) -> None:
        self._manager = manager
        self.recording = recording

    def __enter__(self) -> Any:
        stream = self._manager.__enter__()  # the SDK's retries happen here
        record_raw(stream, self.recording, is_async=False)
        return stream

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> Any:
        self.recording.broken(_why(exc, CLOSED))
        return self._manager.__exit__(kind, exc, tb)


class AsyncRecordingManager:
    """Wraps an async helper's stream manager (``async with client.messages.stream(...)``)."""

    def __init__(self, manager: Any, recording: Recording) -> None:
        self._manager = manager
        self.recording = recording

    async def __aenter__(self) -> Any:
        stream = await self._manager.__aenter__()
        record_raw(stream, self.recording, is_async=True)
        return stream

    async def __aexit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> Any:
        self.recording.broken(_why(exc, CLOSED))
        return await self._manager.__aexit__(kind, exc, tb)
