"""OpenAI Responses API stream events -> engine events.

Accepts the events as plain dicts (as they arrive over SSE) or the ``openai``
SDK's event objects. As in the SDK's ``ResponseStreamState``, an event reaches
its output item by ``output_index`` and a content part by ``content_index``
(``item_id`` is not checked). Each output item becomes parts of one assistant
message:

======================  ============================================================
output item             part(s)
======================  ============================================================
``message``             one text part per content part: ``output_text`` (its
                        annotations in ``metadata.openai.annotations``) or
                        ``refusal`` (marked ``metadata.openai.refusal``); each keeps
                        the item's ``metadata.openai.item_id`` (and ``phase``)
``function_call``       tool part (pending) with the item's ``call_id`` and
                        ``name``, argument fragments as ``tool.input_delta``, the
                        parsed input at ``output_item.done``
``custom_tool_call``    tool part (pending) with the item's ``call_id`` and ``name``:
                        a freeform tool (Codex's ``apply_patch``, its code mode's
                        ``exec``) whose input is text, not JSON; the text streams as
                        ``tool.input_delta`` (``custom_tool_call_input.delta``) and
                        is kept byte for byte as the part's ``raw``; the input is
                        ``{"input": text}``; ``metadata.openai.type`` is
                        ``custom_tool_call`` (with ``namespace`` / ``caller`` when
                        sent), so the request render sends it back as one
``reasoning``           one reasoning part: summary parts (and ``reasoning_text``
                        parts) stream into it, a blank line between two; at the
                        item's end ``metadata.openai`` holds ``item_id``,
                        ``encrypted_content``, ``summary`` (the summary texts) and
                        ``content`` (reasoning texts, when any)
any other item          an ignored synthetic text part keeping the item whole in
                        ``metadata.openai.block`` (``web_search_call``,
                        ``file_search_call``, ``code_interpreter_call``,
                        ``mcp_call``, ``computer_call``, ...)
======================  ============================================================

Why opaque for the other items: unlike Anthropic's ``server_tool_use`` and its
result block, a server tool item (web search, file search, code interpreter,
MCP, image generation) is one item holding both the call and its result, so
there is no tool lifecycle to model; its progress events
(``response.web_search_call.searching``, ``response.mcp_call_arguments.delta``,
...) are ignored and its ``output_item.done`` keeps the result. Client tools
other than functions and freeform tools (``computer_call``, shell and
apply-patch calls) need typed output items convlog does not model: they are
kept whole too, but are not in :attr:`IngestResult.tool_calls`.

The ``.done`` events carry the full text (``output_text.done``,
``refusal.done``, ``function_call_arguments.done``, ``reasoning_*.done``,
``content_part.done``, ``output_item.done``): text the deltas missed is
appended, text that contradicts them is an :class:`UnexpectedDelta`. The
``output`` of ``response.completed`` / ``response.incomplete`` settles items
that are still open the same way (matched by type and id, function calls by
``call_id``); items the stream never announced are added after the others.

``response.created`` (or ``response.queued`` / ``response.in_progress`` when
one comes first) starts the message with the response's model. At
``response.completed`` the finish reason is ``"completed"``; at
``response.incomplete`` it is ``incomplete_details.reason``
(``"max_output_tokens"``, ``"content_filter"``, ...; ``"incomplete"`` when
absent). Usage maps to tokens as ``input = input_tokens - cached -
cache_write``, ``output = output_tokens - reasoning``, ``reasoning``,
``cache.read = cached``, ``cache.write = cache_write``.

Refused, after the session is settled (see :mod:`engine.adapters.ingest`):
``response.failed`` and ``error`` (:class:`ProviderStreamError`); an event for
an output item or part that was not added (:class:`UnknownBlockIndex`); an
event after the response ended, items added out of ``output_index`` order,
content or summary parts out of index order, or a content part of an item
after a later item was added (parts keep their creation order, which must be
the output order) (:class:`StreamOrderError`); a delta that does not fit its
item (:class:`UnexpectedDelta`); arguments that are not a JSON object
(:class:`MalformedToolInput`). Event types are handled as the Anthropic adapter
does: ``response.queued`` / ``response.in_progress`` after the start and any
``response.*`` event aimed at an opaque item are informational; another type
is a :class:`StreamOrderError` (audio events included), and an unknown
``response.*`` event aimed at a message, function call or reasoning item is an
:class:`UnexpectedDelta`.

The envelope is kept in the message metadata: ``openai.response`` holds the
response's fields other than ``output`` (``response.created``'s at the start,
the final event's at the end) and ``openai.items`` each output item's fields
other than what its parts hold (``status``, ids, ``phase``, ...; empty for an
item kept whole), as the SDK ends with them. A ``message`` item without
content is kept whole as an ignored part. A function call cut short by
``response.incomplete`` fails with kind ``truncated``. Not kept: logprobs. The
response id is also :attr:`OpenAIResponsesIngest.response_id`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from functools import partial
from typing import Any, ClassVar, Final

from engine import events as ev
from engine.adapters.ingest import (
    JSON,
    OPAQUE,
    Block,
    IngestResult,
    ProviderStreamError,
    StreamIngest,
    StreamOrderError,
    StreamTruncated,
    UnexpectedDelta,
    UnknownBlockIndex,
)
from engine.session import Session

__all__ = ["OpenAIResponsesIngest", "ingest_openai_responses", "tokens_from_usage"]

SEPARATOR: Final = "\n\n"  # between two summary (or reasoning text) parts of one item
_STARTS = frozenset({"response.created", "response.queued", "response.in_progress"})


def tokens_from_usage(usage: Mapping[str, Any] | None) -> ev.Tokens:
    """Responses usage as tokens; ``input_tokens`` includes cached and cache-write tokens."""
    if not usage:
        return ev.Tokens()
    details = usage.get("input_tokens_details") or {}
    cached = details.get("cached_tokens") or 0
    written = details.get("cache_write_tokens") or 0
    reasoning = (usage.get("output_tokens_details") or {}).get("reasoning_tokens") or 0
    return ev.Tokens(input=(usage.get("input_tokens") or 0) - cached - written,
                     output=(usage.get("output_tokens") or 0) - reasoning, reasoning=reasoning,
                     cache=ev.CacheTokens(read=cached, write=written))


def _openai(data: JSON) -> JSON | None:
    return {"openai": data} if data else None


class _Segment:
    """One summary or reasoning-text part of a reasoning item (all share one reasoning part)."""

    __slots__ = ("chunks", "open")

    def __init__(self) -> None:
        self.chunks: list[str] = []
        self.open = True

    def text(self) -> str:
        return "".join(self.chunks)


class _Item:
    """One output item: a message's content parts, or the one part of any other item."""

    __slots__ = ("block", "done", "encrypted", "final", "id", "index", "meta", "parts",
                 "segments", "shown", "type")

    def __init__(self, index: int, item: JSON) -> None:
        self.index = index
        self.type = item.get("type")
        self.id = item.get("id")
        self.done = False
        self.block: Block | None = None  # function call, reasoning or opaque part
        self.parts: list[Block] = []  # a message's content parts, by content_index
        self.segments: dict[str, list[_Segment]] = {"summary": [], "content": []}
        self.shown = False  # the reasoning part has text: the next segment needs a separator
        self.encrypted: str | None = None
        self.meta: JSON = {"item_id": self.id} if self.id is not None else {}
        self.final = item  # the item as the SDK ends with it: as added, done, or final

    def envelope(self) -> JSON:
        """The item's fields other than what its parts hold (status, ids, ...)."""
        if self.block is not None and self.block.kind == OPAQUE:
            return {}  # kept whole in its part
        modelled = _MODELLED.get(self.type, ())
        return {k: v for k, v in self.final.items() if k not in modelled}

    def identity(self) -> tuple[Any, Any]:
        """How the final ``output`` names this item (function call ids are optional there)."""
        if self.type in _CALLS and self.block is not None:
            return self.type, self.block.data["call_id"]
        return self.type, self.id


# The keys of an item that its parts hold (text, arguments, summaries).
_MODELLED: Final[dict[Any, tuple[str, ...]]] = {
    "message": ("content",), "function_call": ("arguments",), "custom_tool_call": ("input",),
    "reasoning": ("summary", "content")}
# The client tool calls, named by their ``call_id`` in the final output (their ids are
# optional there), with the event types their arguments stream by.
_CALLS: Final = frozenset({"function_call", "custom_tool_call"})
_ARGUMENT_EVENTS: Final[dict[Any, str]] = {
    "function_call": "response.function_call_arguments",
    "custom_tool_call": "response.custom_tool_call_input"}
# What a freeform call's part keeps of its item besides the call id and name.
_CUSTOM_FIELDS: Final = ("namespace", "caller")


def _identity(item: JSON) -> tuple[Any, Any]:
    if item.get("type") in _CALLS:
        return item.get("type"), item.get("call_id")
    return item.get("type"), item.get("id")


class OpenAIResponsesIngest(StreamIngest):
    """One Responses API stream into one assistant message."""

    provider_id: ClassVar[str] = "openai"

    def __init__(self, session: Session, **options: Any) -> None:
        super().__init__(session, **options)
        self.response_id = ""
        self.items: dict[int, _Item] = {}
        self.last_index = -1

    def _feed(self, data: dict[str, Any]) -> None:
        kind = data.get("type")
        handler = _HANDLERS.get(kind) if isinstance(kind, str) else None
        if handler is not None:
            handler(self, data)
        elif kind == "error":
            nested = data.get("error")  # an older shape nests {type, code, message}
            error = nested if isinstance(nested, dict) else data
            raise ProviderStreamError(error.get("message") or "provider error",
                                      error_type=error.get("code") or (
                                          error.get("type") if error is nested else "") or "")
        elif isinstance(kind, str) and kind.startswith("response.") and "output_index" in data:
            item = self._item(data)
            if item.block is None or item.block.kind != OPAQUE:
                raise UnexpectedDelta(f"{kind} for a {item.type} item")
            # A server tool's progress: its output_item.done keeps the result.
        else:
            raise StreamOrderError(f"unknown event type {kind!r}")

    def _end_of_stream(self) -> None:
        raise StreamTruncated("the stream ended before response.completed or .incomplete")

    # ------------------------------------------------------------------ lookups

    def _item(self, data: JSON) -> _Item:
        self._require_open()
        index = data.get("output_index")
        item = self.items.get(index) if isinstance(index, int) else None
        if item is None:
            raise UnknownBlockIndex(f"no output item was added at output_index {index!r}")
        return item

    def _content(self, data: JSON, *, refusal: bool) -> Block:
        item = self._item(data)
        index = data.get("content_index")
        if item.type != "message":
            raise UnexpectedDelta(f"{data.get('type')} for a {item.type} item")
        if not isinstance(index, int) or not 0 <= index < len(item.parts):
            raise UnknownBlockIndex(f"no content part {index!r} in output item {item.index}")
        block = item.parts[index]
        if bool(block.data["meta"].get("refusal")) != refusal:
            raise UnexpectedDelta(f"{data.get('type')} for a content part of another type")
        return block

    def _reasoning(self, data: JSON) -> _Item:
        item = self._item(data)
        if item.type != "reasoning":
            raise UnexpectedDelta(f"{data.get('type')} for a {item.type} item")
        return item

    @staticmethod
    def _segment(item: _Item, kind: str, index: Any) -> _Segment:
        segments = item.segments[kind]
        if not isinstance(index, int) or not 0 <= index < len(segments):
            raise UnknownBlockIndex(f"no {kind} part {index!r} in output item {item.index}")
        return segments[index]

    def _call(self, data: JSON) -> Block:
        item = self._item(data)
        prefix = _ARGUMENT_EVENTS.get(item.type)
        if item.block is None or prefix is None or not str(data.get("type")).startswith(prefix):
            raise UnexpectedDelta(f"{data.get('type')} for a {item.type} item")
        if not item.block.open:
            raise StreamOrderError(f"{item.type} {item.index} already ended")
        return item.block

    # ------------------------------------------------------------------ text

    @staticmethod
    def _complete(chunks: list[str], full: Any, append: Callable[[str], None],
                  what: str) -> None:
        """A done event's full text: append what the deltas missed, refuse a contradiction."""
        if not isinstance(full, str):
            return
        have = "".join(chunks)
        chunks[:] = [have] if have else []  # join once, not at every done event
        if full == have:
            return
        if not full.startswith(have):
            raise UnexpectedDelta(f"the final {what} differs from its deltas")
        append(full[len(have):])

    def _append_text(self, block: Block, delta: str) -> None:
        if not block.open:
            raise StreamOrderError("text after its content part ended")
        if delta:
            block.data["chunks"].append(delta)
            self._text(block, delta)

    def _segment_text(self, item: _Item, segment: _Segment, delta: str) -> None:
        if not delta:
            return
        block = item.block
        assert block is not None
        if not segment.open or not block.open:
            raise StreamOrderError("reasoning text after its part ended")
        # One reasoning part holds every segment: a blank line before each later one.
        shown = SEPARATOR + delta if item.shown and not segment.chunks else delta
        segment.chunks.append(delta)
        item.shown = True
        self._text(block, shown)

    # ------------------------------------------------------------------ items

    def _add_item(self, index: int, item: JSON) -> _Item:
        if index in self.items:
            raise StreamOrderError(f"output item {index} was added twice")
        if index < self.last_index:
            raise StreamOrderError(f"output item {index} was added after item {self.last_index}")
        self.last_index = index
        it = _Item(index, item)
        self.items[index] = it
        key = ("item", index)
        if it.type == "message":
            if item.get("phase") is not None:
                it.meta["phase"] = item["phase"]
            for position, part in enumerate(item.get("content") or ()):
                self._add_content(it, position, part)
        elif it.type == "function_call":
            call_id, name = item.get("call_id"), item.get("name")
            if not (isinstance(call_id, str) and call_id and isinstance(name, str) and name):
                raise UnexpectedDelta("a function_call item needs its call_id and name")
            it.block = self._open_tool(key, call_id, name, metadata=_openai(it.meta))
            self._fragment(it.block, item.get("arguments") or "")
        elif it.type == "custom_tool_call":
            # A freeform tool (Codex's apply_patch, its code mode's exec): the input is
            # text, kept byte for byte as the call's raw arguments, and read as
            # ``{"input": text}``; the part's metadata says which kind of call it was.
            call_id, name = item.get("call_id"), item.get("name")
            if not (isinstance(call_id, str) and call_id and isinstance(name, str) and name):
                raise UnexpectedDelta("a custom_tool_call item needs its call_id and name")
            meta = {**it.meta, "type": "custom_tool_call",
                    **{k: item[k] for k in _CUSTOM_FIELDS if item.get(k) is not None}}
            it.block = self._open_tool(key, call_id, name, metadata=_openai(meta))
            it.block.data["freeform"] = True
            text = item.get("input")
            if text is not None and not isinstance(text, str):
                raise UnexpectedDelta("a custom_tool_call's input is not a string")
            self._fragment(it.block, text or "")
        elif it.type == "reasoning":
            it.block = self._open_reasoning(key, "", _openai(it.meta))
            for kind in ("summary", "content"):
                for position, part in enumerate(item.get(kind) or ()):
                    self._add_segment(it, kind, position, part.get("text") or "")
        else:
            it.block = self._open_opaque(key, {"openai": {**it.meta, "block": dict(item)}})
        return it

    def _add_content(self, item: _Item, index: Any, part: JSON) -> Block:
        if item.done:
            raise StreamOrderError(f"a content part after output item {item.index} was done")
        if index != len(item.parts):
            raise StreamOrderError(f"content part {index!r} of output item {item.index} "
                                   "out of order")
        if item.index < self.last_index:
            raise StreamOrderError(f"a content part of output item {item.index} after "
                                   f"item {self.last_index} was added")
        ptype = part.get("type")
        if ptype == "output_text":
            text, meta = part.get("text") or "", dict(item.meta)
        elif ptype == "refusal":
            text, meta = part.get("refusal") or "", {**item.meta, "refusal": True}
        else:
            raise UnexpectedDelta(f"a {ptype!r} content part in a message")
        block = self._open_text(("content", item.index, index), text, _openai(meta))
        block.data.update(meta=meta, chunks=[text] if text else [])
        if part.get("annotations"):
            block.data["annotations"] = list(part["annotations"])
        item.parts.append(block)
        return block

    def _add_segment(self, item: _Item, kind: str, index: Any, text: str) -> _Segment:
        segments = item.segments[kind]
        if item.done:
            raise StreamOrderError(f"a reasoning part after output item {item.index} was done")
        if index != len(segments):
            raise StreamOrderError(f"{kind} part {index!r} of output item {item.index} "
                                   "out of order")
        segment = _Segment()
        segments.append(segment)
        self._segment_text(item, segment, text)
        return segment

    def _end_content(self, block: Block, part: JSON) -> None:
        """A content part's end: its text completes the deltas, its annotations are final."""
        meta = block.data["meta"]
        full = part.get("refusal") if meta.get("refusal") else part.get("text")
        self._complete(block.data["chunks"], full, lambda s: self._append_text(block, s),
                       "text")
        if block.open:
            self._close_content(block, part.get("annotations"))

    def _close_content(self, block: Block, annotations: Any = None) -> None:
        if annotations is None:
            annotations = block.data.get("annotations")
        meta = block.data["meta"]
        self._close(block, {"openai": {**meta, "annotations": list(annotations)}}
                    if annotations else None)

    def _end_segment(self, item: _Item, segment: _Segment, full: Any) -> None:
        self._complete(segment.chunks, full, lambda s: self._segment_text(item, segment, s),
                       "reasoning text")
        segment.open = False

    def _end_reasoning(self, item: _Item) -> None:
        assert item.block is not None
        meta: JSON = {**item.meta, "summary": [s.text() for s in item.segments["summary"]]}
        if item.encrypted is not None:
            meta["encrypted_content"] = item.encrypted
        if item.segments["content"]:
            meta["content"] = [s.text() for s in item.segments["content"]]
        self._close(item.block, {"openai": meta})

    def _end_item(self, it: _Item, item: JSON) -> None:
        """An item is done: ``item`` (its final form) completes and closes its parts."""
        if it.done:
            raise StreamOrderError(f"output item {it.index} was done twice")
        if item.get("type") != it.type:
            raise UnexpectedDelta(f"output item {it.index} changed its type")
        if it.type == "message":
            contents = item.get("content") or []
            if len(contents) < len(it.parts):
                raise UnexpectedDelta(f"the final message {it.index} lacks streamed parts")
            for position, part in enumerate(contents):
                block = (it.parts[position] if position < len(it.parts)
                         else self._add_content(it, position, part))
                if (part.get("type") == "refusal") != bool(block.data["meta"].get("refusal")):
                    raise UnexpectedDelta(f"content part {position} changed its type")
                self._end_content(block, part)
            if not it.parts:
                self._empty_message(it, item)
        elif it.type in _CALLS:
            call = it.block
            assert call is not None
            field = "arguments" if it.type == "function_call" else "input"
            self._complete(call.fragments(), item.get(field),
                           lambda s: self._fragment(call, s), field)
            self._close(call)
        elif it.type == "reasoning":
            for kind in ("summary", "content"):
                final = item.get(kind) or []
                if len(final) < len(it.segments[kind]):
                    raise UnexpectedDelta(f"the final reasoning {it.index} lacks {kind} parts")
                for position, part in enumerate(final):
                    segment = (it.segments[kind][position]
                               if position < len(it.segments[kind])
                               else self._add_segment(it, kind, position, ""))
                    self._end_segment(it, segment, part.get("text"))
            if isinstance(item.get("encrypted_content"), str):
                it.encrypted = item["encrypted_content"]
            self._end_reasoning(it)
        else:
            assert it.block is not None
            self._close(it.block, {"openai": {**it.meta, "block": dict(item)}})
        it.final = item
        it.done = True

    def _empty_message(self, it: _Item, item: JSON) -> None:
        """A message item without content: kept whole, as an ignored part, not to vanish."""
        it.block = self._open_opaque(("item", it.index), {"openai": {**it.meta,
                                                                     "block": dict(item)}})
        self._close(it.block)

    def _end_open_items(self) -> None:
        """At the response's end, items without their done event end with what streamed."""
        for it in self.items.values():
            if it.done:
                continue
            if it.type == "message":
                for block in it.parts:
                    if block.open:
                        self._close_content(block)
                if not it.parts and it.block is None:
                    self._empty_message(it, it.final)
            elif it.type == "reasoning":
                self._end_reasoning(it)
            # A function call's input is parsed, an opaque part ends, in _stop.
            it.done = True

    # ------------------------------------------------------------------ handlers

    def _lifecycle(self, data: JSON) -> None:
        response = data.get("response") or {}
        if not self.started:
            self.response_id = response.get("id") or ""
            self._start_message(response.get("model"), {"openai": {"response": {
                k: v for k, v in response.items() if k != "output"}}})
            for index, item in enumerate(response.get("output") or ()):
                self._add_item(index, item)
            return
        if data.get("type") == "response.created":
            raise StreamOrderError("the response was created twice")
        self._require_open()
        self._same_response(response)

    def _same_response(self, response: JSON) -> None:
        rid = response.get("id")
        if rid and self.response_id and rid != self.response_id:
            raise StreamOrderError(f"an event of response {rid!r} in {self.response_id!r}")

    def _item_added(self, data: JSON) -> None:
        self._require_open()
        item = data.get("item")
        if item is None:
            return  # an empty added event (a gap some providers leave; the SDK skips it too)
        index = data.get("output_index")
        if not isinstance(index, int):
            raise UnknownBlockIndex("an output item without its output_index")
        self._add_item(index, item)

    def _item_done(self, data: JSON) -> None:
        self._require_open()
        item, index = data.get("item"), data.get("output_index")
        if not isinstance(item, dict) or not isinstance(index, int):
            raise UnknownBlockIndex("output_item.done without its item or output_index")
        it = self.items.get(index)
        if it is None:  # done without added: complete information, so accepted (as the SDK)
            it = self._add_item(index, item)
        self._end_item(it, item)

    def _content_added(self, data: JSON) -> None:
        item = self._item(data)
        part = data.get("part") or {}
        if item.type == "reasoning" and part.get("type") == "reasoning_text":
            self._add_segment(item, "content", data.get("content_index"), part.get("text") or "")
        elif item.type == "message":
            self._add_content(item, data.get("content_index"), part)
        else:
            raise UnexpectedDelta(f"a {part.get('type')!r} part for a {item.type} item")

    def _content_done(self, data: JSON) -> None:
        item = self._item(data)
        part = data.get("part") or {}
        if item.type == "reasoning":
            segment = self._segment(item, "content", data.get("content_index"))
            self._end_segment(item, segment, part.get("text"))
            return
        block = self._content(data, refusal=part.get("type") == "refusal")
        if not block.open:
            raise StreamOrderError("content_part.done twice")
        self._end_content(block, part)

    def _output_text_delta(self, data: JSON) -> None:
        self._append_text(self._content(data, refusal=False), data.get("delta") or "")

    def _output_text_done(self, data: JSON) -> None:
        block = self._content(data, refusal=False)
        self._complete(block.data["chunks"], data.get("text"),
                       lambda s: self._append_text(block, s), "text")

    def _refusal_delta(self, data: JSON) -> None:
        self._append_text(self._content(data, refusal=True), data.get("delta") or "")

    def _refusal_done(self, data: JSON) -> None:
        block = self._content(data, refusal=True)
        self._complete(block.data["chunks"], data.get("refusal"),
                       lambda s: self._append_text(block, s), "refusal")

    def _annotation(self, data: JSON) -> None:
        block = self._content(data, refusal=False)
        if not block.open:
            raise StreamOrderError("an annotation after its content part ended")
        annotation = data.get("annotation")
        if annotation is None:
            return
        annotations = block.data.setdefault("annotations", [])
        index = data.get("annotation_index")
        if isinstance(index, int) and 0 <= index < len(annotations):
            annotations[index] = annotation  # a repeated index replaces
        else:
            annotations.append(annotation)

    def _arguments_delta(self, data: JSON) -> None:
        self._fragment(self._call(data), data.get("delta") or "")

    def _arguments_done(self, data: JSON) -> None:
        block = self._call(data)
        self._complete(block.fragments(), data.get("arguments"), lambda s: self._fragment(block, s),
                       "arguments")

    def _custom_input_delta(self, data: JSON) -> None:
        self._fragment(self._call(data), data.get("delta") or "")

    def _custom_input_done(self, data: JSON) -> None:
        block = self._call(data)
        self._complete(block.fragments(), data.get("input"), lambda s: self._fragment(block, s),
                       "input")

    def _summary_added(self, data: JSON) -> None:
        item = self._reasoning(data)
        part = data.get("part") or {}
        self._add_segment(item, "summary", data.get("summary_index"), part.get("text") or "")

    # Summary and reasoning-text segments stream alike: ``kind`` names the list,
    # ``key`` the event field that indexes it (bound in _HANDLERS).
    def _segment_delta(self, data: JSON, *, kind: str, key: str) -> None:
        item = self._reasoning(data)
        segment = self._segment(item, kind, data.get(key))
        self._segment_text(item, segment, data.get("delta") or "")

    def _segment_text_done(self, data: JSON, *, kind: str, key: str) -> None:
        item = self._reasoning(data)
        segment = self._segment(item, kind, data.get(key))
        self._complete(segment.chunks, data.get("text"),
                       lambda s: self._segment_text(item, segment, s),
                       "summary" if kind == "summary" else "reasoning text")

    def _summary_done(self, data: JSON) -> None:
        item = self._reasoning(data)
        segment = self._segment(item, "summary", data.get("summary_index"))
        self._end_segment(item, segment, (data.get("part") or {}).get("text"))


    def _finished(self, data: JSON) -> None:
        self._require_open()
        response = data.get("response") or {}
        self._same_response(response)
        known = {it.identity(): it for it in self.items.values()}
        for item in response.get("output") or ():
            it = known.get(_identity(item))
            if it is None:  # never announced: it follows what streamed
                it = self._add_item(self.last_index + 1, item)
            if not it.done:
                self._end_item(it, item)
            it.final = item  # the SDK's final output is the response's, as sent
        self._end_open_items()
        if data.get("type") == "response.completed":
            reason = "completed"
        else:
            reason = (response.get("incomplete_details") or {}).get("reason") or "incomplete"
        envelope = {"response": {k: v for k, v in response.items() if k != "output"},
                    "items": [it.envelope() for it in self.items.values()]}
        self._stop(reason, tokens_from_usage(response.get("usage")), {"openai": envelope},
                   truncated=data.get("type") == "response.incomplete")

    def _failed(self, data: JSON) -> None:
        error = (data.get("response") or {}).get("error") or {}
        raise ProviderStreamError(error.get("message") or "the response failed",
                                  error_type=error.get("code") or "")


_R = OpenAIResponsesIngest
_SUMMARY_DELTA = partial(_R._segment_delta, kind="summary", key="summary_index")
_SUMMARY_DONE = partial(_R._segment_text_done, kind="summary", key="summary_index")
_TEXT_DELTA = partial(_R._segment_delta, kind="content", key="content_index")
_TEXT_DONE = partial(_R._segment_text_done, kind="content", key="content_index")
_HANDLERS: dict[str, Callable[[OpenAIResponsesIngest, JSON], None]] = {
    "response.output_text.delta": OpenAIResponsesIngest._output_text_delta,
    "response.function_call_arguments.delta": OpenAIResponsesIngest._arguments_delta,
    "response.reasoning_summary_text.delta": _SUMMARY_DELTA,
    "response.reasoning_text.delta": _TEXT_DELTA,
    "response.refusal.delta": OpenAIResponsesIngest._refusal_delta,
    "response.output_text.done": OpenAIResponsesIngest._output_text_done,
    "response.refusal.done": OpenAIResponsesIngest._refusal_done,
    "response.function_call_arguments.done": OpenAIResponsesIngest._arguments_done,
    "response.custom_tool_call_input.delta": OpenAIResponsesIngest._custom_input_delta,
    "response.custom_tool_call_input.done": OpenAIResponsesIngest._custom_input_done,
    "response.reasoning_summary_text.done": _SUMMARY_DONE,
    "response.reasoning_text.done": _TEXT_DONE,
    "response.output_text.annotation.added": OpenAIResponsesIngest._annotation,
    "response.content_part.added": OpenAIResponsesIngest._content_added,
    "response.content_part.done": OpenAIResponsesIngest._content_done,
    "response.reasoning_summary_part.added": OpenAIResponsesIngest._summary_added,
    "response.reasoning_summary_part.done": OpenAIResponsesIngest._summary_done,
    "response.output_item.added": OpenAIResponsesIngest._item_added,
    "response.output_item.done": OpenAIResponsesIngest._item_done,
    "response.completed": OpenAIResponsesIngest._finished,
    "response.incomplete": OpenAIResponsesIngest._finished,
    "response.failed": OpenAIResponsesIngest._failed,
    **{kind: OpenAIResponsesIngest._lifecycle for kind in _STARTS},
}


def ingest_openai_responses(session: Session, events: Any, **options: Any) -> IngestResult:
    """Ingest a whole stream (an iterable of events) and return the result."""
    return OpenAIResponsesIngest(session, **options).ingest(events)
