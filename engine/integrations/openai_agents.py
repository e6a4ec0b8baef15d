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
  its ``function_call_output`` completes that tool;
- anything else (hosted tool calls, outputs of unknown calls, a call whose id
  the session already used, ...): an ignored text part.

An assistant message completes once none of its calls waits for an output at
the end of a batch; a user message arriving while calls still wait aborts it
(the tools fail ``aborted``), as an interrupted run leaves them.

``pop_item`` and ``clear_session`` delete nothing: every batch starts with a
``checkpoint.created`` event, a pop restores the checkpoint of the last item's
batch (``checkpoint.restored``) and writes the rest of that batch again, and a
clear is ``history.cleared``. The item list is the fold of those events
(``projections.integrations.openai_agents.ItemsFold``).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any, Final

from engine.ids import uuid7
from engine.session import PartRef, Session

JSON = dict[str, Any]
ITEM_KEY: Final = "openai_agents"  # metadata key of the item an event records
CHECKPOINT_PREFIX: Final = "openai-agents:"
USER_ROLES: Final = frozenset({"user", "system", "developer"})


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


class ItemWriter:
    """Writes Agents SDK items into a session, one batch at a time."""

    def __init__(self, session: Session, *, agent: str = "") -> None:
        self.session = session
        self.agent = agent
        self._assistant: str | None = None
        self._calls: dict[str, PartRef] = {}  # call id -> tool part still waiting

    def checkpoint(self) -> str:
        """Start a batch: the tag a pop of this batch's items restores."""
        if self.session.lifecycle.conversation.state == "absent":
            self.session.create_conversation()
        tag = CHECKPOINT_PREFIX + uuid7()
        self.session.create_checkpoint(tag, description="openai-agents batch",
                                       is_turn=False)
        return tag

    def write(self, items: Iterable[Mapping[str, Any]]) -> None:
        for item in items:
            self._write(dict(item))
        self._settle(abort=False)

    def forget(self, tag: str) -> None:
        """The view goes back to the checkpoint ``tag`` (an earlier batch's start)."""
        self._settle(abort=True)
        self.session.restore_checkpoint(tag)

    def clear(self) -> None:
        self._settle(abort=True)
        if self.session.lifecycle.conversation.state == "absent":
            self.session.create_conversation()
        self.session.clear_history()

    # ------------------------------------------------------------------ items

    def _meta(self, item: JSON) -> JSON:
        return {ITEM_KEY: item}

    def _message(self) -> str:
        if self._assistant is None:
            self._assistant = self.session.start_message("assistant", agent=self.agent)
        return self._assistant

    def _write(self, item: JSON) -> None:
        kind = item_kind(item)
        role = item.get("role")
        if kind == "message" and role in USER_ROLES:
            self._settle(abort=True)
            mid = self.session.start_message("user", agent=self.agent)
            self.session.add_text(mid, content_text(item.get("content")), streaming=False,
                                  synthetic=role != "user", metadata=self._meta(item))
            self.session.complete_message(mid)
        elif kind == "message":
            self.session.add_text(self._message(), content_text(item.get("content")),
                                  streaming=False, metadata=self._meta(item))
        elif kind == "reasoning":
            summary = "\n".join(content_text([s]) for s in item.get("summary") or ())
            self.session.add_reasoning(self._message(), summary, streaming=False,
                                       metadata=self._meta(item))
        elif kind == "function_call" and self._fresh_call(item):
            raw = item.get("arguments", "")
            ref = self.session.add_tool(self._message(), str(item.get("call_id", "")),
                                        str(item.get("name", "")), input=_arguments(raw),
                                        raw=raw if isinstance(raw, str) else "",
                                        metadata=self._meta(item))
            self._calls[str(item.get("call_id", ""))] = ref
        elif kind == "function_call_output" and item.get("call_id") in self._calls:
            ref = self._calls.pop(str(item["call_id"]))
            self.session.start_tool(ref)
            self.session.complete_tool(ref, _output_text(item.get("output")),
                                       metadata=self._meta(item))
        else:
            self.session.add_text(self._message(), "", streaming=False, ignored=True,
                                  metadata=self._meta(item))

    def _fresh_call(self, item: JSON) -> bool:
        """A call the log can hold as a tool part: named, with a call id not used before.

        A call id is unique in a session; a call written again (a pop rewrites
        the rest of its batch) stays an ignored part holding its item.
        """
        call_id, name = item.get("call_id"), item.get("name")
        return bool(call_id and name and call_id not in self.session.lifecycle.call_ids)

    def _settle(self, *, abort: bool) -> None:
        """Complete the assistant message; with calls still waiting, abort it or keep it."""
        if self._assistant is None:
            return
        if self._calls and not abort:
            return  # the outputs may come with the next batch
        mid, self._assistant = self._assistant, None
        if self._calls:
            self._calls.clear()
            self.session.abort(mid, "the run ended before its tool calls had outputs")
        else:
            self.session.complete_message(mid)
