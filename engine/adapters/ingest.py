"""The shared half of the provider stream adapters: blocks, batching, coalescing, breakage.

A provider adapter (:mod:`engine.adapters.anthropic`, :mod:`.openai_chat`,
:mod:`.openai_responses`) reads the provider's stream events one at a time and
calls the helpers here, which turn them into engine events on the assistant
message of a :class:`~engine.session.Session`:

- a text or reasoning block is a ``text.added`` / ``reasoning.added`` part, its
  deltas ``text.delta`` / ``reasoning.delta``, its end ``part.ended`` (provider
  data such as a thinking signature rides in the part's metadata);
- a tool call is a ``tool.added`` part (pending), each raw JSON fragment a
  ``tool.input_delta``, and the parsed input a ``tool.input_ready`` when the
  call's arguments are complete;
- the stop reason and usage are a ``step.finished`` part, then the stream's whole
  envelope (stop reason, final usage, the provider's message/response fields and
  item statuses) a ``message.stream_ended``, durable whether or not the message
  completes later, and, once no tool is left pending, ``message.completed``.

**Coalescing** (``coalesce_chars``): consecutive text or reasoning deltas of one
part may be merged into one event of at least that many characters. Buffered
text is flushed before anything else happens to the message, so the final
message is the same for every setting; only the number of delta events changes.
``0`` (the default) records every non-empty delta as its own event.

**Batching** (``batch``): events are committed to the store in batches of up to
that many events (each event is still recorded and checked on its own; only the
appends are grouped): :meth:`StreamIngest.feed` commits once the queue holds
``batch`` events, so with the default of 1 every provider event's engine events
are committed (together) before ``feed`` returns. The queue is always committed
at the message's end, by :meth:`StreamIngest.flush` and on any failure.

**Truncated arguments**: when a token limit cuts the stream inside a tool
call, the provider still ends the message normally (Anthropic ``max_tokens``,
Chat ``length``, Responses ``response.incomplete``) and the SDKs return it. A
call whose arguments are a cut-off JSON prefix (:func:`.partial_json.is_prefix`)
is then not an error: the message completes with its finish reason and the tool
fails with kind ``truncated`` (it never ran), its raw text in
``metadata.raw``. With any other finish reason such arguments are a
:class:`MalformedToolInput`.

**Any failure settles**: an exception from anywhere inside ingest (a store that
refuses a value, a bug) settles the message as a broken stream does, then the
original exception propagates unchanged.

**Broken streams**: a protocol violation (a delta before its block start, an
unknown index, an event after the end, malformed tool JSON, a provider ``error``
event, a stream that ends early) raises a :class:`StreamError` subclass after
the session is settled: buffered text is committed first (streamed text is never
lost), every tool still pending fails with kind ``aborted`` keeping its partial
raw JSON in ``metadata.raw``, open text and reasoning parts end, and the
message completes with an ``aborted`` error naming the cause (as
:meth:`Session.abort <engine.session.Session.abort>` does).
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterable, Mapping
from typing import Any, ClassVar, Final

import attrs
import msgspec

from engine import events as ev
from engine.adapters.partial_json import is_prefix
from engine.codec import decode_msgpack, encode_msgpack
from engine.errors import ConvlogError
from engine.events import Event
from engine.ids import part_id, uuid7
from engine.session import PartRef, Session
from engine.settle import ABORTED_TOOL_ERROR
from engine.store.door import short_proof, strings_only

JSON = dict[str, Any]

TEXT: Final = "text"
REASONING: Final = "reasoning"
TOOL: Final = "tool"
OPAQUE: Final = "opaque"


# --------------------------------------------------------------------------- errors


class StreamError(ConvlogError):
    """A provider stream that cannot be ingested; the session was settled first."""

    kind: ClassVar[str] = "stream"

    def __init__(self, message: str, *, event: Mapping[str, Any] | None = None) -> None:
        self.event = dict(event) if event is not None else None
        super().__init__(message)


class StreamOrderError(StreamError):
    """An event out of order: before the message starts, after it ended, a repeated start."""

    kind = "order"


class UnknownBlockIndex(StreamError):
    """A delta or stop for a block index that was never started."""

    kind = "unknown_index"


class UnexpectedDelta(StreamError):
    """A delta whose type does not fit its block (text into a tool call, ...)."""

    kind = "unexpected_delta"


class MalformedToolInput(StreamError):
    """A tool call's arguments are not a JSON object once complete."""

    kind = "malformed_tool_input"

    def __init__(self, message: str, *, raw: str, event: Mapping[str, Any] | None = None
                 ) -> None:
        self.raw = raw
        super().__init__(message, event=event)


class ProviderStreamError(StreamError):
    """The provider reported an error in the stream (Anthropic ``error``, Responses failed)."""

    kind = "provider_error"

    def __init__(self, message: str, *, error_type: str = "",
                 event: Mapping[str, Any] | None = None) -> None:
        self.error_type = error_type
        super().__init__(message, event=event)


class MalformedEvent(StreamError):
    """A provider event whose fields do not have the types or shape the protocol gives."""

    kind = "malformed_event"


class StreamTruncated(StreamError):
    """The stream ended before the provider said the message was complete."""

    kind = "truncated"


# --------------------------------------------------------------------------- results


@attrs.frozen
class ToolCall:
    """A tool call the model made, as the agent loop needs it to run the tool."""

    ref: PartRef
    call_id: str
    name: str
    input: JSON


@attrs.frozen
class IngestResult:
    message_id: str
    stop_reason: str | None
    tokens: ev.Tokens
    tool_calls: tuple[ToolCall, ...]
    completed: bool  # False while tool calls wait for their results


# --------------------------------------------------------------------------- blocks


class Block(msgspec.Struct, gc=False):
    """One content block (a part) of the message being streamed.

    Never tracked by the garbage collector (``gc=False``): a stream of short
    blocks holds one per block, and a collection would walk them all. No cycle
    can pass through a block: it refers only to strings, flags, the lists of
    strings its deltas fill and dicts of provider JSON, none of which can refer
    back to it (``tests/engine/test_gc_free.py`` holds every field to that).
    """

    kind: str
    message_id: str
    part_id: str
    open: bool = True
    # A tool call's JSON fragments (a list from the call's start); None for other blocks,
    # and for a tool block once closed: its text is then ``joined`` (a list per tool
    # call kept to the end of the stream is a container every full collection walks).
    raw: list[str] | None = None
    joined: str = ""
    # Coalesced deltas not yet recorded; None until coalescing buffers one.
    buf: list[str] | None = None
    buf_len: int = 0
    start_input: JSON = {}  # msgspec copies an empty default for each instance
    # A tool call's parsed input once its arguments are complete (None before). Kept
    # here, not in ``data``: a dict of flags and strings is one the collector stops
    # tracking, and a nested dict would make it track ``data`` (one per tool block).
    input: JSON | None = None
    data: JSON = {}  # provider data for the part's end metadata

    @property
    def ref(self) -> PartRef:
        return PartRef(self.message_id, self.part_id)

    def fragments(self) -> list[str]:
        """The JSON fragments list, created on first use (or again after a close)."""
        if self.raw is None:
            self.raw = [self.joined] if self.joined else []
            self.joined = ""
        return self.raw

    def raw_text(self) -> str:
        """The tool call's argument text so far (its fragments joined)."""
        return self.joined if self.raw is None else "".join(self.raw)


def _tool_call(block: Block) -> ToolCall:
    """A client tool block as the agent loop gets it (its input so far: {} until parsed)."""
    data = block.data
    return ToolCall(block.ref, data["call_id"], data["name"],
                    block.input if block.input is not None else {})


def as_dict(event: Any) -> dict[str, Any]:
    """A provider event as a plain dict: SSE dicts pass through, SDK models are dumped.

    The SDKs' ``to_dict()`` gives the wire form: the API's field names and only
    the fields the server sent (``model_dump()`` would add every unset optional
    field as None, which would then be kept as if the provider had sent it).
    """
    if isinstance(event, dict):
        return event
    dump = getattr(event, "to_dict", None) or getattr(event, "model_dump", None)
    if not callable(dump):
        raise StreamOrderError(f"not a provider event: {type(event).__name__}")
    data = dump()
    if not isinstance(data, dict):
        raise StreamOrderError(f"not a provider event: {type(event).__name__}")
    return data


_json_decode = msgspec.json.decode


def loads(raw: str) -> Any:
    """``json.loads(raw)``: the same value or the same error, mostly by msgspec's
    decoder (several times faster on a tool call's arguments). On standard JSON the
    two read the same values (ints of any size included); what only ``json.loads``
    accepts (NaN, Infinity, numbers past the float range, lone surrogates) or
    nobody does makes msgspec refuse, and then ``json.loads`` decides
    (``tests/adapters/test_tool_json.py`` holds the two to the same outcome)."""
    try:
        return _json_decode(raw)
    except (msgspec.MsgspecError, ValueError, RecursionError):  # a raw lone surrogate, ...
        return json.loads(raw)


def parse_tool_input(raw: str, start: JSON, *, event: Mapping[str, Any] | None = None) -> JSON:
    """The complete arguments of a tool call: ``start`` when no fragment came."""
    if not raw:
        return dict(start)
    try:
        value = loads(raw)
    except (ValueError, RecursionError) as exc:
        raise MalformedToolInput(f"tool input is not valid JSON: {exc}", raw=raw,
                                 event=event) from exc
    if not isinstance(value, dict):
        raise MalformedToolInput("tool input is not a JSON object", raw=raw, event=event)
    return value


def _ascii_strings(d: JSON) -> bool:
    """Every key and value of ``d`` an ASCII str (so it encodes, and the door's short
    proof holds for it): the common tool input, which needs no pre-check."""
    return strings_only(d) and "".join(d).isascii() and "".join(d.values()).isascii()


class StreamIngest:
    """Feeds one provider stream into one assistant message of a session.

    Subclasses implement :meth:`_feed` for their provider's events. Use
    :meth:`ingest` for a whole stream, or :meth:`feed` per event and
    :meth:`finish` at the end of the stream.
    """

    provider_id: ClassVar[str] = ""
    # Finish reasons that mean a token limit cut the output (arguments may be cut short).
    truncating: ClassVar[frozenset[str]] = frozenset()

    def __init__(self, session: Session, *, message_id: str | None = None,
                 parent_id: str | None = None, agent: str = "", coalesce_chars: int = 0,
                 batch: int = 1) -> None:
        if coalesce_chars < 0 or batch < 1:
            raise ValueError("coalesce_chars must be >= 0 and batch >= 1")
        self.session = session
        self.message_id = message_id or ""
        self.parent_id = parent_id
        self.agent = agent
        self.coalesce_chars = coalesce_chars
        self.batch = batch
        # Deltas an adapter may queue directly, without _text/_fragment (the same events:
        # tests/adapters/test_ingest_fast_path.py turns it off to compare).
        self.direct_deltas = coalesce_chars == 0
        self.blocks: dict[Any, Block] = {}
        self.started = False
        self.stopped = False  # the provider said the message is complete
        self.failed: StreamError | None = None
        self.stop_reason: str | None = None
        self.tokens = ev.Tokens()
        self.completed = False
        self.metadata: JSON | None = None  # the envelope the message completes with
        self._stop_committed = False
        self._recording = False  # inside a store write (its failures are not the event's)
        self._queue: list[Event] = []
        self._buffered: Block | None = None
        self._tools: list[Block] = []
        # The client tool calls (not server ones, nor cut ones), in start order: each
        # block until its input is parsed, then its ToolCall, built there while its
        # data is at hand (result() then builds only the calls still open). Built
        # lazily instead, result() of 16,666 calls took 40-58 ms, about what the
        # collector saved by not walking them (a ToolCall and its PartRef are tracked).
        self._calls: dict[str, Block | ToolCall] = {}

    # ------------------------------------------------------------------ public

    def ingest(self, events: Iterable[Any]) -> IngestResult:
        # feed() for each event, inlined: one call less per provider event.
        step = self._feed
        for event in events:
            if self.failed is not None:
                raise StreamOrderError("the stream already failed",
                                       event=None) from self.failed
            data = event if event.__class__ is dict else as_dict(event)
            try:
                step(data)
                if len(self._queue) >= self.batch:
                    self._commit_queue()
            except Exception as exc:
                err = self._settle(exc, data)
                if err is None:
                    raise
                raise err from exc
        return self.finish()

    def feed(self, event: Any) -> None:
        """Ingest one provider event (a dict or an SDK event object)."""
        if self.failed is not None:
            raise StreamOrderError("the stream already failed", event=None) from self.failed
        data = as_dict(event)
        try:
            self._feed(data)
            if len(self._queue) >= self.batch:
                self._commit_queue()
        except Exception as exc:
            err = self._settle(exc, data)
            if err is None:
                raise
            raise err from exc

    def _settle(self, exc: Exception, data: JSON) -> StreamError | None:
        """Settle the message after ``exc`` broke the event ``data``: None to re-raise
        ``exc`` itself, or the :class:`MalformedEvent` to raise instead."""
        if isinstance(exc, StreamError):
            if exc.event is None:
                exc.event = data
            self._break(exc)
            return None
        if isinstance(exc, ConvlogError):  # the engine or the store refused: settle
            self._break(_cause(exc, data))
            return None
        if self._recording:  # the store failed: settle, propagate the original
            self._recording = False
            self._break(_cause(exc, data))
            return None
        # Reading the event failed (a field of the wrong type, a missing one).
        err = MalformedEvent(f"malformed event: {type(exc).__name__}: {exc}"[:500], event=data)
        self._break(err)
        return err

    def finish(self) -> IngestResult:
        """The stream ended. Raises :class:`StreamTruncated` if it ended too early."""
        if self.failed is not None:
            raise StreamOrderError("the stream already failed") from self.failed
        try:
            if not self.stopped:
                self._end_of_stream()
            self.flush()
        except StreamError as exc:
            self._break(exc)
            raise
        except Exception as exc:
            self._break(_cause(exc, None))
            raise
        return self.result()

    def fail(self, reason: str) -> StreamError:
        """Settle the message as broken from outside (a network error, a cancel)."""
        err = StreamTruncated(reason)
        self._break(err)
        return err

    def flush(self) -> None:
        """Record buffered deltas and commit queued events."""
        self._flush_buffered()
        self._commit_queue()

    def _commit_queue(self) -> None:
        if self._queue:
            queue, self._queue = self._queue, []
            self._recording = True
            try:
                self.session.record(queue)
            except BaseException:
                self._queue[:0] = queue  # for _break to keep what the store accepts
                raise
            self._recording = False

    def result(self) -> IngestResult:
        return IngestResult(
            self.message_id, self.stop_reason, self.tokens,
            tuple(c if c.__class__ is ToolCall else _tool_call(c)  # type: ignore[arg-type]
                  for c in self._calls.values()),
            self.completed,
        )

    def complete(self, *, cost: float = 0.0) -> int:
        """Complete the message after its tools settled, with the stream's usage and reason."""
        self.completed = True
        [done] = self.session.record([ev.MessageCompleted(
            message_id=self.message_id, cost=cost, tokens=self.tokens, finish=self.stop_reason,
            metadata=self.metadata)])
        return done.seq

    # ------------------------------------------------------------------ for subclasses

    def _feed(self, data: dict[str, Any]) -> None:
        raise NotImplementedError

    def _end_of_stream(self) -> None:
        raise StreamTruncated("the stream ended before the message was complete")

    def _emit(self, e: Event) -> None:
        """Queue an event built from provider fields, checked as if read from bytes.

        (msgspec checks no field type of a struct built in code: a model name that
        is a number would be stored, and the log would no longer decode.) Deltas,
        the hot path, skip this: their one field is checked to be a str. An event
        that encodes and passes the door's short proof (fields of exactly their
        types: a part added or ended, a tool's input of strings) would decode, so
        it is not decoded here.
        """
        try:
            data = encode_msgpack(e)
            if not short_proof(e):
                decode_msgpack(data)
        except (ConvlogError, TypeError, ValueError, OverflowError) as exc:
            raise MalformedEvent(f"a field the event cannot hold: {exc}"[:500]) from exc
        self._queue.append(e)

    def _start_message(self, model_id: str | None, metadata: JSON | None = None) -> None:
        if self.started:
            raise StreamOrderError("the message started twice")
        self.started = True
        if not self.message_id:
            self.message_id = uuid7()
        model = ev.ModelRef(self.provider_id, model_id) if model_id else None
        self._emit(ev.MessageStarted(message_id=self.message_id, role="assistant",
                                     agent=self.agent, model=model, parent_id=self.parent_id,
                                     metadata=metadata))
        self._emit(ev.StepStarted(message_id=self.message_id, part_id=part_id()))

    def _require_open(self) -> None:
        if not self.started:
            raise StreamOrderError("an event before the message started")
        if self.stopped:
            raise StreamOrderError("an event after the message ended")

    def _block(self, key: Any) -> Block:
        block = self.blocks.get(key)
        if block is None:
            raise UnknownBlockIndex(f"no block was started at index {key!r}")
        if not block.open:
            raise StreamOrderError(f"block {key!r} already stopped")
        return block

    def _new_block(self, key: Any, kind: str) -> Block:
        self._require_open()
        if key in self.blocks:
            raise StreamOrderError(f"block {key!r} started twice")
        self._flush_buffered()
        block = Block(kind, self.message_id, part_id())
        self.blocks[key] = block
        return block

    def _open_text(self, key: Any, text: str = "", metadata: JSON | None = None) -> Block:
        block = self._new_block(key, TEXT)
        self._emit(ev.TextAdded(message_id=self.message_id, part_id=block.part_id,
                                text=text, metadata=metadata))
        return block

    def _open_reasoning(self, key: Any, text: str = "", metadata: JSON | None = None) -> Block:
        block = self._new_block(key, REASONING)
        self._emit(ev.ReasoningAdded(message_id=self.message_id, part_id=block.part_id,
                                     text=text, metadata=metadata))
        return block

    def _open_opaque(self, key: Any, metadata: JSON) -> Block:
        """A block convlog does not model: an ignored, synthetic text part keeps it whole."""
        block = self._new_block(key, OPAQUE)
        self._emit(ev.TextAdded(message_id=self.message_id, part_id=block.part_id,
                                synthetic=True, ignored=True, metadata=metadata))
        return block

    def _open_tool(self, key: Any, call_id: str, name: str, input: JSON | None = None,
                   metadata: JSON | None = None, *, server: bool = False) -> Block:
        block = self._new_block(key, TOOL)
        block.start_input = dict(input or {})
        block.raw = []  # openai_responses completes it in place
        block.data.update(call_id=call_id, name=name, server=server)
        self._tools.append(block)
        if not server:
            self._calls[block.part_id] = block
        self._emit(ev.ToolAdded(message_id=self.message_id, part_id=block.part_id,
                                call_id=call_id, tool=name, input=block.start_input,
                                metadata=metadata))
        return block

    def _text(self, block: Block, delta: str) -> None:
        """A text or reasoning delta (empty deltas change nothing and are skipped)."""
        if not delta:
            return
        if delta.__class__ is not str:
            raise MalformedEvent(f"a delta of type {type(delta).__name__}")
        if self.coalesce_chars:
            if self._buffered is not block:
                self._flush_buffered()
                self._buffered = block
            if block.buf is None:
                block.buf = []
            block.buf.append(delta)
            block.buf_len += len(delta)
            if block.buf_len >= self.coalesce_chars:
                self._flush_buffer(block)
            return
        if block.kind == TEXT:
            self._queue.append(ev.TextDelta(message_id=self.message_id,
                                            part_id=block.part_id,
                                    delta=delta))
        else:
            self._queue.append(ev.ReasoningDelta(message_id=self.message_id,
                                         part_id=block.part_id, delta=delta))

    def _flush_buffered(self) -> None:
        """Record the coalesced text still buffered, if any."""
        if self._buffered is not None:
            self._flush_buffer(self._buffered)

    def _flush_buffer(self, block: Block) -> None:
        self._buffered = None
        if not block.buf:  # None or empty
            return
        text = "".join(block.buf)
        block.buf.clear()
        block.buf_len = 0
        cls = ev.TextDelta if block.kind == TEXT else ev.ReasoningDelta
        self._queue.append(cls(message_id=self.message_id, part_id=block.part_id,
                               delta=text))

    def _fragment(self, block: Block, fragment: str) -> None:
        if not fragment:
            return
        if fragment.__class__ is not str:
            raise MalformedEvent(f"a JSON fragment of type {type(fragment).__name__}")
        block.fragments().append(fragment)
        self._queue.append(ev.ToolInputDelta(message_id=self.message_id,
                                             part_id=block.part_id,
                                     fragment=fragment))

    def _close(self, block: Block, metadata: JSON | None = None,
               event: Mapping[str, Any] | None = None) -> None:
        """End a block: a text part ends, a tool call's input is parsed and set."""
        if self._buffered is block:
            self._flush_buffer(block)
        block.open = False
        mid, pid = self.message_id, block.part_id
        if block.kind == TOOL:
            raw = block.raw_text()
            if block.raw is not None:
                block.raw = None
                block.joined = raw
            if block.data.get("freeform"):
                # A freeform call's input is its raw text, whatever it holds (no JSON):
                # ``{"input": text}``, as the Codex importer reads a rollout's.
                self._ready(block, {"input": raw})
                return
            try:
                block.input = parse_tool_input(raw, block.start_input, event=event)
            except MalformedToolInput:
                if not is_prefix(raw):
                    raise
                block.data["cut"] = raw  # cut short? the finish reason will tell (_stop)
                self._calls.pop(pid, None)
                return
            self._ready(block, block.input)
        else:
            self._emit(ev.PartEnded(message_id=mid, part_id=pid, metadata=metadata))

    def _ready(self, block: Block, input: JSON) -> None:
        """A tool call's arguments are complete: ``input`` is what the call runs with."""
        block.input = input
        pid = block.part_id
        if pid in self._calls:
            self._calls[pid] = _tool_call(block)
        ready = ev.ToolInputReady(message_id=self.message_id, part_id=pid, input=input)
        if self.direct_deltas and _ascii_strings(input):
            self._queue.append(ready)  # every field a str known to encode: no pre-check
        else:
            self._emit(ready)

    def _stop(self, reason: str | None, tokens: ev.Tokens, metadata: JSON | None = None, *,
              truncated: bool | None = None) -> None:
        """The message is complete: end what is open, finish the step, complete if no tool waits.

        ``truncated`` (default: ``reason`` is one of :attr:`truncating`) says a
        token limit ended the output: calls with cut-off arguments fail ``truncated``.
        """
        self._flush_buffered()
        for key, block in self.blocks.items():
            if block.open:
                self._close(block, event={"block": key})
        if truncated is None:
            truncated = reason in self.truncating
        mid = self.message_id
        for block in self._tools:
            raw = block.data.get("cut")
            if raw is None or block.data.get("done"):
                continue
            if not truncated:
                raise MalformedToolInput(f"tool input is cut short (finish reason {reason!r})",
                                         raw=raw)
            self._emit(ev.ToolFailed(
                message_id=mid, part_id=block.part_id, kind="truncated",
                error=f"the arguments were cut short (finish reason {reason}): never run",
                metadata={"raw": raw}))
            block.data["done"] = True
        self.stopped = True
        self.stop_reason = reason
        self.tokens = tokens
        self.metadata = metadata
        self._emit(ev.StepFinished(message_id=mid, part_id=part_id(), reason=reason or "",
                                   tokens=tokens))
        # Durable now, whether the message completes here or after its tools ran (or
        # never: a crash, or another way to complete it).
        self._emit(ev.MessageStreamEnded(message_id=mid, finish=reason, tokens=tokens,
                                         metadata=metadata))
        if all(b.data.get("done") for b in self._tools):
            self._emit(ev.MessageCompleted(message_id=mid, tokens=tokens, finish=reason,
                                           metadata=metadata))
            self.completed = True
        self.flush()
        self._stop_committed = True

    # ------------------------------------------------------------------ breakage

    def _break(self, exc: StreamError) -> None:
        """Settle the message so the session stays consistent, keeping what streamed.

        Best effort against a store that refuses what it is given: a refused
        batch is retried event by event (what it accepts is kept), a refused raw
        text is kept escaped (``metadata.raw_json``), a refused reason is shortened.
        """
        self.failed = exc
        with contextlib.suppress(Exception):
            self._flush_buffered()
        queue, self._queue = self._queue, []
        if queue:
            try:
                self.session.record(queue)
            except Exception:
                for e in queue:
                    with contextlib.suppress(Exception):
                        self.session.record([e])
        mid = self.message_id
        if not self.started or mid not in self.session.lifecycle.messages:
            return
        life = self.session.lifecycle.messages[mid]
        if life.state != "open":
            return  # the message already completed: nothing to settle
        if self.stopped and self._stop_committed:
            return  # complete and waiting for tool results: consistent as it is
        reason = f"stream broken ({exc.kind}): {exc}"
        unsettled = dict(self.session.lifecycle.unsettled(mid))
        for block in self._tools:
            pid = block.part_id
            if pid not in unsettled:
                continue
            raw = block.raw_text()
            meta: JSON = {"interrupted": True, "raw": raw, "stream_error": exc.kind}
            fail = ev.ToolFailed(message_id=mid, part_id=pid, error=ABORTED_TOOL_ERROR,
                                 kind="aborted", metadata=meta)
            try:
                self.session.record([fail])
            except Exception:
                escaped = {**meta, "raw": "", "raw_json": json.dumps(raw)}
                self.session.record([msgspec.structs.replace(fail, metadata=escaped)])
        try:
            self.session.abort(mid, reason)
        except Exception:
            self.session.abort(mid, f"stream broken ({exc.kind})")


class IngestFailed(StreamError):
    """The cause a failure from outside the protocol settles a message with (never raised:
    the original exception propagates)."""

    kind = "internal"


class EngineRefused(IngestFailed):
    """The engine or the store refused an event (its own typed error propagates)."""

    kind = "engine"


def _cause(exc: BaseException, event: Mapping[str, Any] | None) -> StreamError:
    cls = EngineRefused if isinstance(exc, ConvlogError) else IngestFailed
    return cls(f"{type(exc).__name__}: {exc}"[:500], event=event)
