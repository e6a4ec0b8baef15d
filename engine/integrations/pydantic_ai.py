"""pydantic-ai messages as convlog events (the write half of the pydantic-ai integration).

:func:`record_messages` writes a ``ModelMessage`` list (``result.new_messages()``
of a run, or a whole ``all_messages()``) into a session:

- a ``ModelRequest``'s user prompt, system prompt and retry prompt (without a
  tool) parts become text parts of one user message (system and retry prompts
  synthetic); a ``ToolReturnPart`` completes the tool it answers (or, for an
  outcome other than ``success``, fails it: ``failed`` and ``retried`` with
  kind ``error``, ``denied`` ``denied``, ``interrupted`` ``aborted``), and a
  ``RetryPromptPart`` for a tool fails it (kind ``error``);
- a ``ModelResponse`` is an assistant message: ``TextPart`` a text part,
  ``ThinkingPart`` a reasoning part, ``ToolCallPart`` a tool part (its
  arguments parsed), any other part (native tool calls and returns, files,
  compaction) an ignored text part.

Every event keeps the part it records, as pydantic-ai serializes it, in
``metadata["pydantic_ai"]["part"]``, and the first part of each message its
envelope (timestamps, usage, model name, run id, ...) in ``["message"]``, so
:func:`projections.integrations.pydantic_ai.to_model_messages` gives the same
messages back. An assistant message completes once its tools are answered; a
user prompt while calls still wait aborts it.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from typing import Any, Final

from pydantic_ai.messages import ModelMessage, ModelMessagesTypeAdapter, ModelRequest

from engine.events import ToolFailureKind
from engine.integrations.writers import open_message
from engine.session import PartRef, Session

JSON = dict[str, Any]
KEY: Final = "pydantic_ai"
# A tool return's outcome, as the kind of the tool's failure in convlog.
FAILURE_KINDS: Final[dict[str, ToolFailureKind]] = {
    "failed": "error", "retried": "error", "denied": "denied", "interrupted": "aborted"}
EMPTY_OUTPUT: Final = "(no output)"
USER_KINDS: Final = {"user-prompt": False, "system-prompt": True, "retry-prompt": True}


def prompt_text(part: JSON) -> str:
    """The text of a prompt part's content: a string, or the strings of a content list."""
    content = part.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list) and part.get("part_kind") != "retry-prompt":
        return "".join(c for c in content if isinstance(c, str))
    return json.dumps(content, ensure_ascii=False)


def _output(part: JSON) -> str:
    content = part.get("content")
    return content if isinstance(content, str) else json.dumps(content, ensure_ascii=False)


def _args(part: JSON) -> tuple[JSON, str]:
    args = part.get("args")
    if isinstance(args, dict):
        return args, ""
    if isinstance(args, str) and args:
        try:
            value = json.loads(args)
        except ValueError:
            return {}, args
        return (value if isinstance(value, dict) else {}), args
    return {}, ""


def message_hash(data: JSON) -> str:
    """A message as pydantic-ai serializes it, hashed: what makes a repeat recognisable."""
    text = json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def recorded_hashes(session: Session) -> list[str]:
    """The hashes of the messages recorded from pydantic-ai, in log order."""
    out: list[str] = []
    for e in session.store.read(session.id):
        meta = getattr(e, "metadata", None)
        data = meta.get(KEY) if isinstance(meta, dict) else None
        if isinstance(data, dict) and isinstance(data.get("hash"), str):
            out.append(data["hash"])
    return out


def overlap(recorded: Sequence[str], given: Sequence[str]) -> int:
    """How many of ``given``'s first messages repeat the end of ``recorded``."""
    for k in range(min(len(recorded), len(given)), 0, -1):
        if list(recorded[-k:]) == list(given[:k]):
            return k
    return 0


class MessageWriter:
    """Writes pydantic-ai messages into a session, keeping each part for the way back."""

    def __init__(self, session: Session, *, agent: str = "") -> None:
        self.session = session
        self.agent = agent
        self._assistant: str | None = None
        self._calls: dict[str, PartRef] = {}

    def write(self, messages: Sequence[ModelMessage]) -> None:
        dumped = ModelMessagesTypeAdapter.dump_python(list(messages), mode="json")
        hashes = [message_hash(d) for d in dumped]
        skip = overlap(recorded_hashes(self.session), hashes)
        if self._assistant is None:  # continue what the log left open (deferred calls)
            self._assistant, self._calls, _ = open_message(self.session.lifecycle)
        for message, data, digest in list(zip(messages, dumped, hashes, strict=True))[skip:]:
            envelope = {k: v for k, v in data.items() if k != "parts"}
            metas: list[JSON] = [{KEY: {"part": p}} for p in data["parts"]]
            if metas:
                metas[0][KEY]["message"] = envelope
            else:  # an empty message still keeps its envelope
                metas = [{KEY: {"part": None, "message": envelope}}]
            metas[0][KEY]["hash"] = digest
            if isinstance(message, ModelRequest):
                self._request(metas)
            else:
                self._response(metas)
        self._settle(abort=False)

    def _request(self, metas: list[JSON]) -> None:
        user: str | None = None
        for meta in metas:
            part = meta[KEY]["part"] or {}
            kind = part.get("part_kind")
            call = self._calls.get(part.get("tool_call_id", ""))
            if kind in ("tool-return", "retry-prompt") and call is not None:
                del self._calls[part["tool_call_id"]]
                outcome = part.get("outcome", "success") if kind == "tool-return" else "retried"
                life = self.session.lifecycle.part(*call)
                waiting = life is not None and life.state == "awaiting-approval"
                if waiting and outcome == "denied":
                    self.session.deny(call, _output(part) or outcome)
                    continue
                if waiting:  # a result means the approval was given
                    self.session.approve(call)
                self.session.start_tool(call)
                if outcome == "success":
                    # convlog needs some output; the part itself keeps the empty one
                    self.session.complete_tool(call, _output(part) or EMPTY_OUTPUT,
                                               metadata=meta)
                else:
                    error = _output(part)
                    self.session.fail_tool(call, error if error.strip() else outcome,
                                           kind=FAILURE_KINDS.get(outcome, "error"),
                                           metadata=meta)
                continue
            self._settle(abort=True)
            if user is None:
                user = self.session.start_message("user", agent=self.agent)
            known = kind in USER_KINDS
            self.session.add_text(user, prompt_text(part) if known else "", streaming=False,
                                  synthetic=USER_KINDS.get(str(kind), True),
                                  ignored=not known, metadata=meta)
        if user is not None:
            self.session.complete_message(user)
        self._settle(abort=False)

    def _response(self, metas: list[JSON]) -> None:
        self._settle(abort=True)
        mid = self._assistant = self.session.start_message("assistant", agent=self.agent)
        for meta in metas:
            part = meta[KEY]["part"] or {}
            kind = part.get("part_kind")
            call_id = part.get("tool_call_id")
            if kind == "text":
                self.session.add_text(mid, part["content"], streaming=False, metadata=meta)
            elif kind == "thinking":
                self.session.add_reasoning(mid, part["content"], streaming=False, metadata=meta)
            elif (kind == "tool-call" and call_id and part.get("tool_name")
                  and (mid, call_id) not in self.session.lifecycle.call_ids):
                args, raw = _args(part)
                self._calls[call_id] = self.session.add_tool(
                    mid, call_id, part["tool_name"], input=args, raw=raw, metadata=meta)
            else:
                self.session.add_text(mid, "", streaming=False, ignored=True, metadata=meta)

    def _settle(self, *, abort: bool) -> None:
        if self._assistant is None or (self._calls and not abort):
            return
        mid, self._assistant = self._assistant, None
        if self._calls:
            self._calls.clear()
            self.session.abort(mid, "the run went on before its tool calls were answered")
        else:
            self.session.complete_message(mid)


def record_messages(session: Session, messages: Sequence[ModelMessage], *,
                    agent: str = "") -> None:
    """Write ``messages`` into ``session`` (a fresh writer: no call is left waiting)."""
    MessageWriter(session, agent=agent).write(messages)
