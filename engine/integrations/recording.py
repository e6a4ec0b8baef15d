"""Record a provider SDK's stream while the agent consumes it.

The agent keeps the SDK's own stream object: :class:`RecordingStream` (and
:class:`AsyncRecordingStream`) wrap it, feed every event to a stream ingest
*before* handing it on unchanged, and delegate everything else (``response``,
``close``, helpers) to it. However the stream ends, the message is settled:

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
``_raw_stream``; :func:`record_raw` swaps in a recording one, so every way of
consuming the helper (iteration, ``text_stream``, ``until_done``,
``get_final_message``) is recorded.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from types import TracebackType
from typing import Any

from engine.adapters.ingest import IngestResult, StreamError, StreamIngest


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


class RecordingStream:
    """A sync SDK stream (``Stream[...]``) whose events are recorded as they pass."""

    def __init__(self, stream: Any, recording: Recording) -> None:
        self._stream = stream
        self._events: Iterator[Any] = iter(stream)
        self.recording = recording

    def __iter__(self) -> Iterator[Any]:
        return self

    def __next__(self) -> Any:
        try:
            event = next(self._events)
        except StopIteration:
            self.recording.end()
            raise
        except BaseException as exc:
            self.recording.broken(_why(exc, "the stream failed"))
            raise
        self.recording.event(event)
        return event

    def close(self) -> None:
        self.recording.broken(CLOSED)
        self._stream.close()

    def __enter__(self) -> RecordingStream:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.recording.broken(_why(exc, CLOSED))
        self._stream.close()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


class AsyncRecordingStream:
    """An async SDK stream (``AsyncStream[...]``) whose events are recorded as they pass."""

    def __init__(self, stream: Any, recording: Recording) -> None:
        self._stream = stream
        self._events: AsyncIterator[Any] = aiter(stream)
        self.recording = recording

    def __aiter__(self) -> AsyncIterator[Any]:
        return self

    async def __anext__(self) -> Any:
        try:
            event = await anext(self._events)
        except StopAsyncIteration:
            self.recording.end()
            raise
        except BaseException as exc:  # includes a cancelled task
            self.recording.broken(_why(exc, "the stream failed"))
            raise
        self.recording.event(event)
        return event

    async def close(self) -> None:
        self.recording.broken(CLOSED)
        await self._stream.close()

    async def __aenter__(self) -> AsyncRecordingStream:
        return self

    async def __aexit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        self.recording.broken(_why(exc, CLOSED))
        await self._stream.close()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def record_raw(helper: Any, recording: Recording, *, is_async: bool) -> None:
    """Make an SDK helper stream read its events through a recording stream."""
    raw = getattr(helper, "_raw_stream", None)
    if raw is None:
        raise TypeError(f"{type(helper).__name__} has no raw stream to record")
    wrapper = AsyncRecordingStream if is_async else RecordingStream
    helper._raw_stream = wrapper(raw, recording)


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
