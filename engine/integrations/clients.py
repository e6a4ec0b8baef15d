"""Client proxies: the SDK client, with its streaming calls recorded into a session.

A proxy forwards every attribute to the SDK client; only the entry points
named in its routes are wrapped. ``create(..., stream=True)`` returns the SDK's
stream wrapped in a :class:`~.recording.RecordingStream`; a helper
``stream(...)`` returns its manager wrapped so the entered helper stream reads
through one; a ``create()`` without ``stream=True`` returns the SDK's object
unchanged, recorded whole (the route's ``whole`` function gives the events a
stream of that object would have had). Each call records one assistant message
with a fresh ingest;
:attr:`RecordedClient.last` is the latest call's :class:`~.recording.Recording`
(its ``result`` holds the tool calls to run).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

from engine.adapters.ingest import StreamIngest
from engine.integrations.recording import (
    AsyncRecordingManager,
    AsyncRecordingStream,
    Recording,
    RecordingManager,
    RecordingStream,
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

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._client, name)
        if any(route.startswith(name + ".") for route in self._routes):
            return _Resource(self, attr, name)
        return attr


class _Resource:
    """A resource of the client (``messages``, ``chat``, ``chat.completions``, ...)."""

    def __init__(self, owner: RecordedClient, target: Any, path: str) -> None:
        self._owner = owner
        self._target = target
        self._path = path

    def __getattr__(self, name: str) -> Any:
        path = f"{self._path}.{name}"
        attr = getattr(self._target, name)
        ingest = self._owner._routes.get(path)
        if ingest is None:
            if any(route.startswith(path + ".") for route in self._owner._routes):
                return _Resource(self._owner, attr, path)
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
        owner = self._owner

        def record_whole(result: Any) -> Any:
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
                if not kwargs.get("stream"):
                    return record_whole(result)
                return AsyncRecordingStream(result, owner.recording(ingest))

            return acreate

        def create(*args: Any, **kwargs: Any) -> Any:
            result = call(*args, **kwargs)
            if not kwargs.get("stream"):
                return record_whole(result)
            return RecordingStream(result, owner.recording(ingest))

        return create
