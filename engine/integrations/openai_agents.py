"""OpenAI Agents SDK items as convlog events (the write half of ``ConvlogSession``).

The Agents SDK keeps a session's memory as a list of Responses input items
(``TResponseInputItem`` dicts). :class:`ItemWriter` records each item as what
it is in convlog, so the log reads as a conversation (WithParts, renders,
time travel), and keeps the item itself, as the SDK gave it, in the metadata of
the event that records it (``metadata["openai_agents"]``), so the item list
comes back exactly:

- a ``user`` / ``system`` / ``developer`` message: a completed user message of
  one text part (synthetic for system and developer);
- an assistant ``message``: a text part of the current assistant message;
- ``reasoning``: a reasoning part (its summary texts);
- ``function_call``: a tool part (its arguments parsed when they are JSON);
  its ``function_call_output`` completes that tool, or fails it (kind
  ``error``, the output as the error) when the output is the SDK's handled tool
  error (``tool_error``); a handoff's output (``{"assistant": name}``) also adds
  an agent part, and the next messages carry that agent;
- anything else (hosted tool calls, outputs of unknown calls, a call whose id
  its message already used, ...): an ignored text part.

An assistant message completes once none of its calls waits for an output at
the end of a batch; a user message arriving while calls still wait aborts it
(the tools fail ``aborted``), as an interrupted run leaves them. The message
still open and its waiting calls are read from the log at each batch, so a
fresh writer (another request, another process) answers an approved call.

``pop_item`` and ``clear_session`` delete nothing: a pop is a
``session.item_popped`` event naming the event that recorded the item, a clear
is ``session.items_cleared``. The item list is the fold of those events
(``projections.integrations.openai_agents.ItemsFold``).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Final

from engine import events as ev
from engine import settle
from engine.ids import part_id, uuid7
from engine.integrations.writers import open_message
from engine.session import PartRef, Session

JSON = dict[str, Any]
ITEM_KEY: Final = "openai_agents"  # metadata key of the item an event records
CHECKPOINT_PREFIX: Final = "openai-agents:"  # batches of logs written before item_popped
USER_ROLES: Final = frozenset({"user", "system", "developer"})
EMPTY_OUTPUT: Final = "(no output)"  # convlog refuses an empty output; the item keeps it
# What the SDK's default failure_error_function tells the model when a tool raised.
SDK_TOOL_ERROR: Final = "An error occurred while running the tool. Please try again."


def item_kind(item: Mapping[str, Any]) -> str:
    kind = item.get("type")
    if kind is None and "role" in item:
        return "message"  # an easy input message: {"role": ..., "content": ...}
    return str(kind)


def content_text(content: Any) -> str:
    """The text of a message's content: a string, or its text-bearing parts joined."""
    if isinstance(content, str):
        return content
    pieces: list[str] = []
    for part in content or ():
        if isinstance(part, Mapping):
            text = part.get("text", part.get("refusal"))
            if isinstance(text, str):
                pieces.append(text)
    return "".join(pieces)


def _output_text(output: Any) -> str:
    if isinstance(output, str):
        return output
    text = content_text(output)
    return text if text else json.dumps(output, ensure_ascii=False)


def _arguments(raw: Any) -> JSON:
    try:
        value = json.loads(raw) if isinstance(raw, str) and raw else {}
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def handoff_target(output: Any) -> str | None:
    """The agent a handoff's output names (the SDK answers a handoff call with
    ``{"assistant": name}``), or None for any other output."""
    if not isinstance(output, str) or not output.startswith("{"):
        return None
    try:
        value = json.loads(output)
    except ValueError:
        return None
    if isinstance(value, dict) and list(value) == ["assistant"] and isinstance(
            value["assistant"], str):
        return value["assistant"]
    return None


ToolErrorCheck = Callable[[str], bool]


def sdk_tool_error(output: str) -> bool:
    """The output the SDK's default ``failure_error_function`` gives the model."""
    return output == SDK_TOOL_ERROR


class ItemWriter:
    """Writes Agents SDK items into a session, one atomic batch per operation.

    Every operation plans from the log (the open assistant message and its
    waiting calls come from the lifecycle, not from memory) and commits its
    events with one :meth:`Session.record <engine.session.Session.record>`;
    so a fresh writer continues where another left off, and an operation
    refused for a version conflict can simply be planned again
    (:func:`engine.integrations.writers.retrying`).
    """

    def __init__(self, session: Session, *, agent: str = "",
                 tool_error: ToolErrorCheck = sdk_tool_error) -> None:
        self.session = session
        self.agent = agent  # the agent of the messages written next
        self.tool_error = tool_error
        self._begin()

    def add(self, items: Iterable[Mapping[str, Any]], *, agent: str | None = None) -> None:
        """One batch of items, recorded atomically."""
        self._begin(agent)
        for item in items:
            self._write(dict(item))
        self._settle(abort=False)
        self._flush()

    def pop(self, event_id: str) -> None:
        """The memory forgets the item recorded by ``event_id`` (its last one).

        The assistant message being written is settled first (aborted if calls
        still wait): an output added after the pop answers no open call.
        """
        self._begin()
        self._settle(abort=True)
        self._conversation()
        self._queue.append(ev.ItemPopped(event_id=event_id, memory=ITEM_KEY))
        self._flush()

    def clear(self) -> None:
        self._begin()
        self._settle(abort=True)
        self._conversation()
        self._queue.append(ev.ItemsCleared(memory=ITEM_KEY))
        self._flush()

    def _begin(self, agent: str | None = None) -> None:
        if agent is not None:
            self.agent = agent
        self._queue: list[ev.Event] = []
        self._assistant, self._calls, self._others = open_message(self.session.lifecycle)
        self._queued_calls: set[str] = set()  # call ids of the open message, queued here

    def _conversation(self) -> None:
        if self.session.lifecycle.conversation.state == "absent":
            self._queue.append(ev.ConversationCreated(conversation_id=uuid7()))

    # ------------------------------------------------------------------ items

    def _flush(self) -> None:
        if self._queue:
            queue, self._queue = self._queue, []
            self.session.record(queue)

    def _text(self, mid: str, text: str, meta: JSON, actor: str, *, synthetic: bool = False,
              ignored: bool = False) -> None:
        pid = part_id()
        self._queue += [
            ev.TextAdded(message_id=mid, part_id=pid, text=text, synthetic=synthetic,
                         ignored=ignored, metadata=meta, actor=actor),
            ev.PartEnded(message_id=mid, part_id=pid, actor=actor)]

    def _message(self) -> str:
        if self._assistant is None:
            self._assistant = uuid7()
            self._queued_calls = set()
            self._queue.append(ev.MessageStarted(message_id=self._assistant, role="assistant",
                                                 agent=self.agent))
        return self._assistant

    def _write(self, item: JSON) -> None:
        kind = item_kind(item)
        role = item.get("role")
        meta: JSON = {ITEM_KEY: item}
        if kind == "message" and role in USER_ROLES:
            self._settle(abort=True)
            mid = uuid7()
            self._queue.append(ev.MessageStarted(message_id=mid, role="user", agent=self.agent))
            self._text(mid, content_text(item.get("content")), meta, "user",
                       synthetic=role != "user")
            self._queue.append(ev.MessageCompleted(message_id=mid, actor="user"))
        elif kind == "message":
            self._text(self._message(), content_text(item.get("content")), meta, "assistant")
        elif kind == "reasoning":
            mid, pid = self._message(), part_id()
            summary = "\n".join(content_text([s]) for s in item.get("summary") or ())
            self._queue += [
                ev.ReasoningAdded(message_id=mid, part_id=pid, text=summary, metadata=meta),
                ev.PartEnded(message_id=mid, part_id=pid)]
        elif kind == "function_call" and self._fresh_call(item):
            mid, pid = self._message(), part_id()
            raw, call_id = item.get("arguments", ""), str(item["call_id"])
            self._queue.append(ev.ToolAdded(
                message_id=mid, part_id=pid, call_id=call_id, tool=str(item["name"]),
                input=_arguments(raw), raw=raw if isinstance(raw, str) else "", metadata=meta))
            self._calls[call_id] = PartRef(mid, pid)
            self._queued_calls.add(call_id)
        elif kind == "function_call_output" and item.get("call_id") in self._calls:
            self._answer(item, meta)
        else:
            self._text(self._message(), "", meta, "assistant", ignored=True)

    def _answer(self, item: JSON, meta: JSON) -> None:
        """A call's output: the tool completes, or fails with the text the model saw
        when the SDK handled the tool's exception; a handoff's names the next agent."""
        mid, pid = self._calls.pop(str(item["call_id"]))
        output = _output_text(item.get("output"))
        started = ev.ToolStarted(message_id=mid, part_id=pid)
        if output and self.tool_error(output):
            self._queue += [started, ev.ToolFailed(message_id=mid, part_id=pid, error=output,
                                                   kind="error", metadata=meta)]
            return
        self._queue += [started, ev.ToolCompleted(message_id=mid, part_id=pid,
                                                  output=output or EMPTY_OUTPUT, metadata=meta)]
        target = handoff_target(item.get("output"))
        if target is not None:
            self._queue.append(ev.AgentAdded(message_id=mid, part_id=part_id(), name=target))
            self.agent = target

    def _fresh_call(self, item: JSON) -> bool:
        """A call the log can hold as a tool part: named, with a call id not used
        before in its message (a model may restart at ``c1``; a call written again
        in the same message stays an ignored part holding its item)."""
        call_id, name = item.get("call_id"), item.get("name")
        if not (call_id and name):
            return False
        mid = self._assistant
        return mid is None or ((mid, call_id) not in self.session.lifecycle.call_ids
                               and call_id not in self._queued_calls)

    def _settle(self, *, abort: bool) -> None:
        """Complete the assistant message; with calls still waiting, abort it or keep it."""
        if self._assistant is None:
            return
        if self._calls and not abort:
            return  # the outputs may come with the next batch
        mid, self._assistant = self._assistant, None
        if self._calls or self._others:
            unsettled = [(pid, "part") for pid in self._others] + [
                (ref.part_id, "tool") for ref in self._calls.values()]
            self._queue += settle.abort_parts(
                mid, unsettled, "the run ended before its tool calls had outputs")
        else:
            self._queue.append(ev.MessageCompleted(message_id=mid))
        self._calls, self._others = {}, []


def _details(value: Any) -> JSON | None:
    """A framework's token details object as JSON (its fields), or None."""
    if value is None:
        return None
    fields = value if isinstance(value, Mapping) else getattr(value, "__dict__", None)
    return dict(fields) if isinstance(fields, Mapping) else None


def usage_event(turn: str, usage: Any) -> ev.RunUsageRecorded:
    """A run's usage (the Agents SDK's ``Usage``) as a ``run.usage_recorded`` event
    for the turn whose user message ``turn`` recorded."""
    inputs = _details(getattr(usage, "input_tokens_details", None))
    outputs = _details(getattr(usage, "output_tokens_details", None))
    details = {k: v for k, v in (("input_tokens_details", inputs),
                                 ("output_tokens_details", outputs)) if v is not None}
    return ev.RunUsageRecorded(
        turn=turn, requests=int(getattr(usage, "requests", 0) or 0),
        tokens=ev.Tokens(input=int(getattr(usage, "input_tokens", 0) or 0),
                         output=int(getattr(usage, "output_tokens", 0) or 0),
                         reasoning=int((outputs or {}).get("reasoning_tokens", 0) or 0),
                         cache=ev.CacheTokens(read=int((inputs or {}).get("cached_tokens", 0)
                                                       or 0))),
        total=int(getattr(usage, "total_tokens", 0) or 0),
        details=details or None, memory=ITEM_KEY)
