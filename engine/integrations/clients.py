"""Client proxies: the SDK client, with its streaming calls recorded into a session.

A proxy forwards every attribute to the SDK client; only the entry points
named in its routes are wrapped. ``create(..., stream=True)`` returns the SDK's
own stream object, recording as it is consumed (:func:`~.recording.record_stream`:
its type is still the SDK's); a helper
``stream(...)`` returns its manager wrapped so the entered helper stream reads
through one; a ``create()`` without ``stream=True`` returns the SDK's object
unchanged, recorded whole (the route's ``whole`` function gives the events a
stream of that object would have had). Each call records one assistant message
with a fresh ingest;
:attr:`RecordedClient.last` is the latest call's :class:`~.recording.Recording`
(its ``result`` holds the tool calls to run).

Every other way to the same calls is recorded too, or refused loudly: a client
from ``with_options(...)`` or ``copy(...)`` records into the same session;
``with_raw_response`` returns the SDK's raw response, recorded (parsed once here;
the SDK caches the parse); ``with_streaming_response`` hands the caller the raw
HTTP body, so reaching it raises :class:`~engine.errors.NotRecorded`.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

from engine.adapters.ingest import StreamIngest
from engine.errors import NotRecorded
from engine.integrations.recording import (
    AsyncRecordingManager,
    Recording,
    RecordingManager,
    record_stream,
)
from engine.session import Session

IngestFactory = Callable[..., StreamIngest]
# The stream events a whole (non-streamed) response would have been sent as.
WholeEvents = Callable[[Any], list[dict[str, Any]]]


class RecordedClient:
    """An SDK client whose streamed calls are recorded into ``session``."""

    def __init__(self, client: Any, session: Session, routes: dict[str, IngestFactory], *,
                 is_async: bool, whole: dict[str, WholeEvents] | None = None,
                 strict: bool = False, **ingest_options: Any) -> None:
        self._client = client
        self.session = session
        self.is_async = is_async
        self.strict = strict
        self.ingest_options = ingest_options
        self.recordings: list[Recording] = []
        self._routes = routes
        self._whole = whole or {}

    @property
    def last(self) -> Recording | None:
        return self.recordings[-1] if self.recordings else None

    def recording(self, ingest: IngestFactory) -> Recording:
        rec = Recording(ingest(self.session, **self.ingest_options), strict=self.strict)
        self.recordings.append(rec)
        return rec

    def _sibling(self, client: Any) -> RecordedClient:
        """The same recording for another client of the SDK's (``with_options``, ``copy``):
        one session, one list of recordings."""
        twin = RecordedClient(client, self.session, self._routes, is_async=self.is_async,
                              whole=self._whole, strict=self.strict, **self.ingest_options)
        twin.recordings = self.recordings
        return twin

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._client, name)
        if name in COPIES and callable(attr):
            def copied(*args: Any, **kwargs: Any) -> RecordedClient:
                return self._sibling(attr(*args, **kwargs))

            return copied
        return _Resource(self, self._client, "").resolve(name, attr)


# Client methods that return another client with other options: it is recorded too.
COPIES = frozenset({"with_options", "copy"})
STREAMING_RESPONSE = (
    "with_streaming_response hands the caller the raw HTTP body (iter_bytes, iter_lines), "
    "which convlog cannot record; use create(stream=True), the stream(...) helper, or "
    "with_raw_response (recorded), or call the unrecorded SDK client itself")


class _Resource:
    """A resource of the client (``messages``, ``chat``, ``chat.completions``, ...).

    ``raw``: reached through ``with_raw_response``: a routed call returns the SDK's
    raw response, parsed here once (the SDK caches it, so the caller's ``parse()``
    gets the same object) to record it.
    """

    def __init__(self, owner: RecordedClient, target: Any, path: str, *,
                 raw: bool = False) -> None:
        self._owner = owner
        self._target = target
        self._path = path
        self._raw = raw

    def __getattr__(self, name: str) -> Any:
        return self.resolve(name, getattr(self._target, name))

    def _below(self, path: str) -> bool:
        return any(route.startswith(path + ".") for route in self._owner._routes) \
            if path else True

    def resolve(self, name: str, attr: Any) -> Any:
        if name == "with_streaming_response" and self._below(self._path):
            raise NotRecorded(f"{self._path or 'client'}.with_streaming_response is not "
                              f"recorded: {STREAMING_RESPONSE}")
        if name == "with_raw_response" and self._below(self._path):
            return _Resource(self._owner, attr, self._path, raw=True)
        path = f"{self._path}.{name}" if self._path else name
        ingest = self._owner._routes.get(path)
        if ingest is None:
            if self._below(path):
                return _Resource(self._owner, attr, path, raw=self._raw)
            return attr
        if name == "stream":
            return self._helper(attr, ingest)
        return self._create(attr, ingest, self._owner._whole.get(path))

    def _helper(self, call: Any, ingest: IngestFactory) -> Any:
        owner = self._owner

        def stream(*args: Any, **kwargs: Any) -> Any:
            manager = call(*args, **kwargs)
            rec = owner.recording(ingest)
            if owner.is_async:
                return AsyncRecordingManager(manager, rec)
            return RecordingManager(manager, rec)

        return stream

    def _create(self, call: Any, ingest: IngestFactory, whole: WholeEvents | None) -> Any:
        owner, raw = self._owner, self._raw

        def record(result: Any, streamed: bool) -> Any:
            if streamed:
                return record_stream(result, owner.recording(ingest), is_async=owner.is_async)
            events = whole(result) if whole is not None else []
            if events:  # none: nothing to record yet (a background response)
                rec = owner.recording(ingest)
                for event in events:
                    rec.event(event)
                rec.end()
            return result

        if owner.is_async or inspect.iscoroutinefunction(call):

            async def acreate(*args: Any, **kwargs: Any) -> Any:
                result = await call(*args, **kwargs)  # the SDK's retries happen here
                if raw:  # the OpenAI SDK's legacy raw response parses synchronously
                    parsed = result.parse()
                    record(await parsed if inspect.isawaitable(parsed) else parsed,
                           bool(kwargs.get("stream")))
                    return result
                return record(result, bool(kwargs.get("stream")))

            return acreate

        def create(*args: Any, **kwargs: Any) -> Any:
            result = call(*args, **kwargs)
            if raw:
                record(result.parse(), bool(kwargs.get("stream")))
                return result
            return record(result, bool(kwargs.get("stream")))

        return create
