"""ConversationState: Q CLI's conversation, folded from the same log as WithParts.

How messages become history (one completed assistant message = one model
request = one :class:`HistoryEntry`):

- A completed **user message** sets the next message: its non-ignored,
  non-synthetic text parts joined with ``\\n`` are the prompt (``Empty prompt``
  when there is none), synthetic text parts are the ``additional_context``, image
  file parts the ``images``; the timestamp is the message's start time.
- A completed **assistant message** pairs the next message (the user side) with
  a ``Response``, or a ``ToolUse`` when it has tool parts (``id`` = callID,
  ``name`` = tool, ``orig_name`` / ``orig_args`` from the tool part's metadata
  when given). Its text parts joined with ``\\n`` are the content; a newer
  save's ``thinking`` comes from a reasoning part's ``metadata.qcli.thinking``
  (other reasoning has no place in Q CLI's history). Request
  metadata is built from the message (times, sizes, tool ids, model, cost,
  tokens).
- The tool parts' outcomes become the **next** user side: ``ToolUseResults``
  (completed: the output, success; failed: the error, error; compacted: ``[Old
  tool result content cleared]``), or ``CancelledToolUses`` when any tool was
  aborted, cancelled or denied (``Tool use was cancelled by the user``, error).
  A prompt typed while results are pending joins them as ``CancelledToolUses``
  (the one variant that carries both); consecutive prompts join with ``\\n``.
- An assistant message with no user side before it pairs with ``Prompt("")``;
  the sendable view repairs that to ``Empty prompt`` and reports it.

Fields that no event carries (an imported Q CLI file's exact timestamp,
request metadata, message id or result blocks) ride in part metadata under the
``"qcli"`` key; see ``engine/adapters/qcli_import.py``.

Checkpoints and the tangent keep *references*: history and transcript are
windows over lists that are only appended to, so keeping one is O(1) and a
later append never changes it (a window that falls behind copies itself out
before appending). Nothing here reads a clock: times come from events.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, ClassVar

import attrs

from engine import events as ev
from engine.events import Event
from engine.tables import ABORT_LIKE
from projections.dispatch import bind, event_fold, fold_all, handles, unhandled
from projections.qcli import messages as m
from projections.qcli.as_sent import (
    blocks_from_json,
    env_context,
    format_timestamp,
    summary_context,
    utf8_len,
)
from projections.qcli.limits import (
    MAX_CONVERSATION_STATE_HISTORY_LEN,
    MAX_TRANSCRIPT_LEN,
    valid_history_range,
)
from projections.qcli.window import Window

# --------------------------------------------------------------------------- fold records


class _Text:
    __slots__ = ("chunks", "ignored", "metadata", "synthetic")

    def __init__(self, e: ev.TextAdded) -> None:
        self.chunks = [e.text] if e.text else []
        self.synthetic = e.synthetic
        self.ignored = e.ignored
        self.metadata = e.metadata

    def text(self) -> str:
        return "".join(self.chunks)


class _Tool:
    __slots__ = ("call_id", "compacted", "error", "input", "kind", "metadata", "output",
                 "override", "status", "tool")

    def __init__(self, e: ev.ToolAdded) -> None:
        self.call_id = e.call_id
        self.tool = e.tool
        self.input: dict[str, Any] = dict(e.input)
        self.metadata = e.metadata or {}
        self.status = "pending"
        self.output = ""
        self.error = ""
        self.kind = ""
        self.override: Any = None  # result blocks given under metadata["qcli"]["content"]
        self.compacted = False

    def result(self) -> m.ToolUseResult:
        if self.status == "completed":
            blocks = (blocks_from_json(self.override) if self.override is not None
                      else (m.TextBlock(self.output),))
            if self.compacted:
                blocks = (m.TextBlock(m.COMPACTED_TOOL_RESULT),)
            return m.ToolUseResult(self.call_id, blocks, "Success")
        if self.status != "error" or self.kind in ABORT_LIKE:
            return m.cancelled_result(self.call_id)
        blocks = (blocks_from_json(self.override) if self.override is not None
                  else (m.TextBlock(self.error),))
        return m.ToolUseResult(self.call_id, blocks, "Error")

    def cancelled(self) -> bool:
        return self.status != "completed" and (self.status != "error"
                                               or self.kind in ABORT_LIKE)

    def tool_use(self) -> m.AssistantToolUse:
        return m.AssistantToolUse(self.call_id, self.tool,
                                  self.metadata.get("orig_name", self.tool), self.input,
                                  self.metadata.get("orig_args", self.input))


class _Message:
    __slots__ = ("images", "model_id", "parts", "role", "start", "thinking")

    def __init__(self, e: ev.MessageStarted) -> None:
        self.role = e.role
        self.start = e.time
        self.model_id = e.model.model_id if e.model is not None else None
        self.parts: dict[str, _Text | _Tool] = {}
        self.images: list[dict[str, Any]] = []
        self.thinking: dict[str, Any] | None = None  # a Q CLI save's, kept whole

    def texts(self) -> list[_Text]:
        return [p for p in self.parts.values() if isinstance(p, _Text) and not p.ignored]

    def tools(self) -> list[_Tool]:
        return [p for p in self.parts.values() if isinstance(p, _Tool)]

    def override(self) -> dict[str, Any]:
        """Q CLI fields given in the text parts' metadata under ``"qcli"``."""
        out: dict[str, Any] = {}
        for p in self.parts.values():
            if isinstance(p, _Text) and p.metadata and isinstance(p.metadata.get("qcli"), dict):
                out.update(p.metadata["qcli"])
        return out


@attrs.frozen
class _Snapshot:
    """The restorable part of the conversation at one point: references only."""

    history: Window[m.HistoryEntry]
    transcript: Window[str]
    next_message: m.UserMessage | None
    latest_summary: tuple[str, m.JSON] | None
    file_line_tracker: dict[str, m.FileLineTracker]
    tangent_appended: int
    time: int


@attrs.frozen
class _CheckpointRecord:
    tag: str
    time: int
    description: str
    is_turn: bool
    tool_name: str | None
    snapshot: _Snapshot


@attrs.frozen
class CompactionMark:
    """Where a compaction cut the history: visible to an auditor, the log keeps all."""

    seq: int
    time: int
    dropped: int
    kept: int


# --------------------------------------------------------------------------- the fold


@event_fold
class ConversationFold:
    """Folds events into a :class:`ConversationState`, one event at a time."""

    # Parts Q CLI's history has no place for: the seed history carries no reasoning
    # (a newer save's assistant ``thinking`` is read from reasoning.added's metadata),
    # steps, approvals or OpenCode's extra part kinds; raw argument fragments are
    # superseded by tool.input_ready.
    IGNORES: ClassVar[frozenset[type[Event]]] = frozenset[type[Event]]({
        ev.ReasoningDelta,
        ev.ToolInputDelta,
        ev.ToolApprovalRequested,
        ev.ToolApprovalGranted,
        ev.ToolProgress,
        ev.StepStarted,
        ev.StepFinished,
        # The stream's envelope: Q CLI keeps the completion's usage (which repeats it).
        ev.MessageStreamEnded,
        ev.SnapshotAdded,
        ev.PatchAdded,
        ev.AgentAdded,
        ev.SubtaskAdded,
        ev.RetryAdded,
        ev.CompactionAdded,
        ev.SessionImported,  # where the session came from: not part of the conversation
        ev.SessionTitled,  # the session's name: not part of the conversation
        # A framework's own memory (projections.integrations) and its run checks.
        ev.ItemPopped,
        ev.ItemsCleared,
        ev.GuardrailTripped,
        ev.RunUsageRecorded,
        ev.GraphCheckpointSaved,  # a graph framework's state (engine.integrations.langgraph)
        ev.GraphWritesSaved,
    }) | ev.MAILBOX_EVENT_TYPES  # the mailbox log is not a conversation

    def __init__(self, session_id: str, *,
                 history_cap: int = MAX_CONVERSATION_STATE_HISTORY_LEN,
                 transcript_cap: int = MAX_TRANSCRIPT_LEN) -> None:
        self.session_id = session_id
        self.history_cap = history_cap
        self.transcript_cap = transcript_cap
        self.seq = 0
        self.time = 0  # of the last event folded: the fold's only notion of "now"
        self.conversation_id: str | None = None
        self.model_info: m.ModelInfo | None = None
        self.mcp_enabled = True
        self.os = ""
        self.cwd = ""
        self.utc_offset_minutes = 0
        self.tools: dict[str, tuple[m.ToolSpec, ...]] = {}
        self.context_paths: tuple[str, ...] | None = None
        self.next_message: m.UserMessage | None = None
        self.history: Window[m.HistoryEntry] = Window()
        self.transcript: Window[str] = Window()
        self.latest_summary: tuple[str, m.JSON] | None = None
        self.file_line_tracker: dict[str, m.FileLineTracker] = {}
        self.checkpoints: list[_CheckpointRecord] = []
        self._checkpoint_index: dict[str, int] = {}
        self.tangent: _Snapshot | None = None
        self.tangent_appended = 0  # history entries appended since the tangent began
        self.compactions: list[CompactionMark] = []
        self._messages: dict[str, _Message] = {}
        self._call_of: dict[tuple[str, str], str] = {}  # settled tool part -> callID
        self._view: m.ConversationState | None = None
        self._env_cache: m.UserEnvContext | None = None
        self._fold: dict[type[Event], Callable[[Any], None]] = bind(self)

    # ------------------------------------------------------------------ folding

    def apply(self, e: Event) -> None:
        try:
            self._fold[type(e)](e)
        except KeyError:
            if type(e) not in self._fold:
                raise unhandled(self, e) from None
            raise
        self.seq = e.seq
        self.time = e.time
        self._view = None

    __call__ = apply  # usable directly as a Session subscriber

    def apply_all(self, events: Iterable[Event]) -> ConversationFold:
        last = fold_all(self, self._fold, events)
        if last is not None:
            self.seq, self.time = last.seq, last.time
            self._view = None
        return self

    # ------------------------------------------------------------------ helpers

    def _env(self) -> m.UserEnvContext:
        env = self._env_cache
        if env is None:
            env = self._env_cache = env_context(self.os, self.cwd)
        return env

    def _stamp(self, ms: int) -> str:
        return format_timestamp(ms, self.utc_offset_minutes)

    def _note(self, line: str) -> None:
        self.transcript.append(line)
        over = len(self.transcript) - self.transcript_cap
        if over > 0:
            self.transcript.drop_front(over)

    def _note_user(self, prompt: str) -> None:
        self._note("> " + prompt.replace("\n", "\n> "))

    def _push(self, entry: m.HistoryEntry) -> None:
        self.history.append(entry)
        if self.tangent is not None:
            self.tangent_appended += 1
        self._cap_history()

    def _cap_history(self) -> None:
        over = len(self.history) - self.history_cap
        if over > 0:
            self.history.drop_front(over)  # the view forgets; the log keeps everything

    def _with_prompt(self, prompt: str, extra: str, timestamp: str | None, *,
                     replace: bool) -> m.UserMessage:
        """The next message once the user types ``prompt`` (see the module docstring)."""
        nm = self.next_message
        if nm is None:
            return m.UserMessage(extra, self._env(), m.Prompt(prompt), timestamp)
        content = nm.content
        old = nm.prompt()
        text = prompt if replace or not old else f"{old}\n{prompt}"
        new: m.UserMessageContent = (m.Prompt(text) if isinstance(content, m.Prompt)
                                     else m.CancelledToolUses(text, content.tool_use_results))
        if not replace and nm.additional_context and extra:
            extra = f"{nm.additional_context}\n{extra}"
        elif not replace and not extra:
            extra = nm.additional_context
        return attrs.evolve(nm, additional_context=extra, content=new, timestamp=timestamp)

    # ------------------------------------------------------------------ messages

    @handles(ev.MessageStarted)
    def _message_started(self, e: ev.MessageStarted) -> None:
        self._messages[e.message_id] = _Message(e)

    @handles(ev.TextAdded)
    def _text_added(self, e: ev.TextAdded) -> None:
        self._messages[e.message_id].parts[e.part_id] = _Text(e)

    @handles(ev.ReasoningAdded)
    def _reasoning_added(self, e: ev.ReasoningAdded) -> None:
        # Only a Q CLI save's own thinking has a place in its history: other
        # reasoning (a provider's, streamed) is not part of Q CLI's format.
        qcli = (e.metadata or {}).get("qcli")
        thinking = qcli.get("thinking") if isinstance(qcli, dict) else None
        msg = self._messages.get(e.message_id)
        if msg is not None and isinstance(thinking, dict):
            msg.thinking = thinking

    @handles(ev.TextDelta)
    def _text_delta(self, e: ev.TextDelta) -> None:
        part = self._messages[e.message_id].parts[e.part_id]
        assert isinstance(part, _Text)
        part.chunks.append(e.delta)

    @handles(ev.PartEnded)
    def _part_ended(self, e: ev.PartEnded) -> None:
        msg = self._messages.get(e.message_id)
        part = None if msg is None else msg.parts.get(e.part_id)
        if isinstance(part, _Text) and e.metadata:
            part.metadata = {**(part.metadata or {}), **e.metadata}

    @handles(ev.FileAdded)
    def _file_added(self, e: ev.FileAdded) -> None:
        if e.mime.startswith("image/"):
            image = {"format": e.mime.removeprefix("image/"), "source": {"Bytes": e.url}}
            self._messages[e.message_id].images.append(image)

    @handles(ev.ToolAdded)
    def _tool_added(self, e: ev.ToolAdded) -> None:
        self._messages[e.message_id].parts[e.part_id] = _Tool(e)

    def _tool(self, e: ev.PartEvent) -> _Tool:
        part = self._messages[e.message_id].parts[e.part_id]
        assert isinstance(part, _Tool)
        return part

    @handles(ev.ToolInputReady)
    def _tool_input_ready(self, e: ev.ToolInputReady) -> None:
        self._tool(e).input = dict(e.input)

    @handles(ev.ToolStarted)
    def _tool_started(self, e: ev.ToolStarted) -> None:
        if e.input is not None:
            self._tool(e).input = dict(e.input)

    @staticmethod
    def _result_override(metadata: dict[str, Any] | None) -> Any:
        qcli = (metadata or {}).get("qcli")
        return qcli.get("content") if isinstance(qcli, dict) else None

    @handles(ev.ToolCompleted)
    def _tool_completed(self, e: ev.ToolCompleted) -> None:
        t = self._tool(e)
        t.status, t.output, t.override = "completed", e.output, self._result_override(e.metadata)
        self._call_of[(e.message_id, e.part_id)] = t.call_id

    @handles(ev.ToolFailed)
    def _tool_failed(self, e: ev.ToolFailed) -> None:
        t = self._tool(e)
        t.status, t.error, t.kind = "error", e.error, e.kind
        t.override = self._result_override(e.metadata)

    @handles(ev.ToolApprovalDenied)
    def _tool_denied(self, e: ev.ToolApprovalDenied) -> None:
        t = self._tool(e)
        t.status, t.kind = "error", "denied"

    @handles(ev.ToolOutputCompacted)
    def _tool_output_compacted(self, e: ev.ToolOutputCompacted) -> None:
        msg = self._messages.get(e.message_id)
        if msg is not None:  # still open: the result is built later
            self._tool(e).compacted = True
            return
        call_id = self._call_of.get((e.message_id, e.part_id))
        if call_id is not None:
            self._clear_result(call_id)

    def _clear_result(self, call_id: str) -> None:
        """Show a compacted output as cleared, wherever its result now is."""
        def cleared(msg: m.UserMessage) -> m.UserMessage | None:
            results = msg.tool_use_results()
            if not results or all(r.tool_use_id != call_id for r in results):
                return None
            new = tuple(attrs.evolve(r, content=(m.TextBlock(m.COMPACTED_TOOL_RESULT),))
                        if r.tool_use_id == call_id and r.status == "Success" else r
                        for r in results)
            return attrs.evolve(msg, content=m.with_results(msg.content, new))

        if self.next_message is not None:
            new_next = cleared(self.next_message)
            if new_next is not None:
                self.next_message = new_next
                return
        for i in range(len(self.history) - 1, -1, -1):
            entry = self.history[i]
            new_user = cleared(entry.user)
            if new_user is not None:
                self.history.replace(i, attrs.evolve(entry, user=new_user))
                return

    @handles(ev.MessageCompleted)
    def _message_completed(self, e: ev.MessageCompleted) -> None:
        msg = self._messages.pop(e.message_id)
        if msg.role == "user":
            self._user_completed(msg, e)
        else:
            self._assistant_completed(msg, e)

    def _user_completed(self, msg: _Message, e: ev.MessageCompleted) -> None:
        texts = msg.texts()
        prompt = "\n".join(t.text() for t in texts if not t.synthetic) or m.EMPTY_PROMPT
        extra = "\n".join(t.text() for t in texts if t.synthetic)
        nm = self._with_prompt(prompt, extra, self._stamp(msg.start), replace=False)
        over = msg.override()
        if msg.images:
            nm = attrs.evolve(nm, images=(*(nm.images or ()), *msg.images))
        if over:
            nm = _apply_user_override(nm, over)
        self.next_message = nm
        self._note_user(prompt)

    def _assistant_completed(self, msg: _Message, e: ev.MessageCompleted) -> None:
        over = msg.override()
        content = "\n".join(t.text() for t in msg.texts())
        if not content and e.error is not None and e.error.kind == "timeout":
            content = m.TIMED_OUT_RESPONSE
        tools = msg.tools()
        message_id = over.get("message_id", e.message_id)
        assistant: m.AssistantMessage = (
            m.ToolUse(message_id, content, tuple(t.tool_use() for t in tools), msg.thinking)
            if tools else m.Response(message_id, content, msg.thinking)
        )
        user = self.next_message or m.UserMessage("", self._env(), m.Prompt(""))
        if "request_metadata" in over:  # given as is, even null
            metadata = over["request_metadata"]
        else:
            model_id = msg.model_id or (self.model_info.model_id if self.model_info else None)
            metadata = _request_metadata(msg, e, user, assistant, content=content,
                                          model_id=model_id)
        self._push(m.HistoryEntry(user, assistant, metadata))
        names = ",".join(t.name for t in m.tool_uses_of(assistant)) or "none"
        self._note(f"{content}\n[Tool uses: {names}]")
        if e.error is not None and e.error.kind != "timeout":
            self._note(f"Error: {e.error.message or e.error.kind}")
        self.next_message = None
        if tools:
            results = tuple(t.result() for t in tools)
            content_: m.UserMessageContent = (
                m.CancelledToolUses(None, results) if any(t.cancelled() for t in tools)
                else m.ToolUseResults(results)
            )
            self.next_message = m.UserMessage("", self._env(), content_)

    # ------------------------------------------------------------------ conversation events

    @handles(ev.ConversationCreated)
    def _conversation_created(self, e: ev.ConversationCreated) -> None:
        self.conversation_id = e.conversation_id
        self.model_info = e.model_info
        self.mcp_enabled = e.mcp_enabled
        self.os, self.cwd, self.utc_offset_minutes = e.os, e.cwd, e.utc_offset_minutes
        self._env_cache = None

    @handles(ev.ModelSelected)
    def _model_selected(self, e: ev.ModelSelected) -> None:
        self.model_info = e.model_info

    @handles(ev.ToolsChanged)
    def _tools_changed(self, e: ev.ToolsChanged) -> None:
        key = tool_origin_key(e.origin, e.server)
        tools = dict(self.tools)
        if e.tools:
            tools[key] = tuple(e.tools)
        else:
            tools.pop(key, None)
        self.tools = tools

    @handles(ev.ContextFileAdded)
    def _context_file_added(self, e: ev.ContextFileAdded) -> None:
        self.context_paths = (*(self.context_paths or ()), e.path)

    @handles(ev.ContextFileRemoved)
    def _context_file_removed(self, e: ev.ContextFileRemoved) -> None:
        self.context_paths = tuple(p for p in self.context_paths or () if p != e.path)

    @handles(ev.NextMessageSet)
    def _next_message_set(self, e: ev.NextMessageSet) -> None:
        prompt = e.prompt or m.EMPTY_PROMPT
        self.next_message = self._with_prompt(prompt, e.additional_context,
                                              self._stamp(e.time), replace=True)
        self._note_user(prompt)

    @handles(ev.NextMessageCleared)
    def _next_message_cleared(self, e: ev.NextMessageCleared) -> None:
        self.next_message = None

    @handles(ev.HistoryCompacted)
    def _history_compacted(self, e: ev.HistoryCompacted) -> None:
        dropped = max(len(self.history) - e.keep_last, 0)
        self.history.drop_front(dropped)
        self.latest_summary = (e.summary, dict(e.request_metadata or {}))
        self.tangent_appended = min(self.tangent_appended, len(self.history))
        self.compactions.append(CompactionMark(e.seq, e.time, dropped, len(self.history)))

    @handles(ev.HistoryCleared)
    def _history_cleared(self, e: ev.HistoryCleared) -> None:
        self.history = Window()
        self.next_message = None
        self.latest_summary = None  # Q CLI once kept it after /clear; a clear clears
        self.tangent_appended = 0

    def _snapshot(self, time: int) -> _Snapshot:
        return _Snapshot(self.history.fork(), self.transcript.fork(), self.next_message,
                         self.latest_summary, self.file_line_tracker, self.tangent_appended,
                         time)

    def _restore(self, snap: _Snapshot) -> None:
        self.history = snap.history.fork()
        self.transcript = snap.transcript.fork()
        self.next_message = snap.next_message
        self.latest_summary = snap.latest_summary

    @handles(ev.TangentEntered)
    def _tangent_entered(self, e: ev.TangentEntered) -> None:
        self.tangent = self._snapshot(e.time)
        self.tangent_appended = 0

    @handles(ev.TangentExited)
    def _tangent_exited(self, e: ev.TangentExited) -> None:
        main = self.tangent
        assert main is not None  # the lifecycle rejects an exit outside a tangent
        grown = self.history.tail(min(self.tangent_appended, len(self.history)))
        tail: list[m.HistoryEntry] = []
        if e.tail == "thread":
            tail = grown
        elif e.tail == "last_entry" and grown:
            # The last exchange: back to the last typed prompt, so a tool-using tail
            # keeps the tool uses its results answer (never an orphan result).
            starts = [i for i, entry in enumerate(grown) if not entry.user.has_tool_use_results()]
            tail = grown[starts[-1]:] if starts else grown
        pending = self.next_message
        self._restore(main)
        for entry in tail:
            self.history.append(entry)
        self._cap_history()
        if tail:
            self.next_message = pending  # the conversation goes on from the tail's end
        self.tangent = None
        self.tangent_appended = 0

    @handles(ev.CheckpointCreated)
    def _checkpoint_created(self, e: ev.CheckpointCreated) -> None:
        self._checkpoint_index[e.tag] = len(self.checkpoints)
        self.checkpoints.append(_CheckpointRecord(e.tag, e.time, e.description, e.is_turn,
                                                  e.tool_name, self._snapshot(e.time)))

    @handles(ev.CheckpointRestored)
    def _checkpoint_restored(self, e: ev.CheckpointRestored) -> None:
        snap = self.checkpoints[self._checkpoint_index[e.tag]].snapshot
        self._restore(snap)
        self.file_line_tracker = snap.file_line_tracker
        self.tangent_appended = snap.tangent_appended if self.tangent is not None else 0

    @handles(ev.FileLinesChanged)
    def _file_lines_changed(self, e: ev.FileLinesChanged) -> None:
        tracker = dict(self.file_line_tracker)  # copied: checkpoints hold the old one
        tracker[e.path] = m.FileLineTracker(
            prev_fswrite_lines=e.after_lines, before_fswrite_lines=e.before_lines,
            after_fswrite_lines=e.after_lines, lines_added_by_agent=e.lines_added_by_agent,
            lines_removed_by_agent=e.lines_removed_by_agent, is_first_write=False,
        )
        self.file_line_tracker = tracker

    @handles(ev.TranscriptNoted)
    def _transcript_noted(self, e: ev.TranscriptNoted) -> None:
        self._note(e.text)

    @handles(ev.TranscriptReplaced)
    def _transcript_replaced(self, e: ev.TranscriptReplaced) -> None:
        self.transcript = Window(e.lines[-self.transcript_cap:] if self.transcript_cap else [])

    # ------------------------------------------------------------------ reading

    def tangent_duration_seconds(self) -> int | None:
        """Seconds from entering the tangent to the last event folded (no clock read)."""
        return None if self.tangent is None else (self.time - self.tangent.time) // 1000

    def state(self) -> m.ConversationState:
        """The frozen view, cached until the next event."""
        if self._view is None:
            self._view = self._build()
        return self._view

    def _build(self) -> m.ConversationState:
        history = tuple(self.history.items())
        summary = self.latest_summary
        tangent = self.tangent
        return m.ConversationState(
            conversation_id=self.conversation_id or self.session_id,
            next_message=self.next_message,
            history=history,
            valid_history_range=valid_history_range(history, self.history_cap),
            transcript=tuple(self.transcript.items()),
            tools=dict(self.tools),
            context_manager=(None if self.context_paths is None
                             else m.ContextManager(self.context_paths)),
            context_message_length=(None if summary is None
                                    else utf8_len(summary_context(summary[0])[0])),
            latest_summary=summary,
            model_info=self.model_info,
            file_line_tracker=dict(self.file_line_tracker),
            checkpoint_manager=None if not self.checkpoints else m.CheckpointManager(tuple(
                m.Checkpoint(c.tag, c.time, c.description, c.is_turn, c.tool_name,
                             m.HistorySnapshot(*c.snapshot.history.share()))
                for c in self.checkpoints)),
            mcp_enabled=self.mcp_enabled,
            tangent_state=None if tangent is None else m.ConversationCheckpoint(
                tuple(tangent.history.items()), tangent.next_message,
                tuple(tangent.transcript.items()), tangent.latest_summary, tangent.time),
        )


# --------------------------------------------------------------------------- helpers


def tool_origin_key(origin: str, server: str | None = None) -> str:
    """The key of ``ConversationState.tools``: builtin, custom, mcp or mcp:<server>."""
    return f"mcp:{server}" if origin == "mcp" and server else origin


def _request_metadata(msg: _Message, e: ev.MessageCompleted, user: m.UserMessage,
                      assistant: m.AssistantMessage, *, content: str,
                      model_id: str | None) -> m.JSON:
    """Q CLI's RequestMetadata from what the log knows, plus cost and tokens."""
    uses = m.tool_uses_of(assistant)
    tokens = e.tokens or ev.Tokens()
    return {
        "message_id": e.message_id,
        "request_start_timestamp_ms": msg.start,
        "stream_end_timestamp_ms": e.time,
        "user_prompt_length": utf8_len(user.prompt() or ""),
        "response_size": utf8_len(content),
        "chat_conversation_type": "ToolUse" if uses else "NotToolUse",
        "tool_use_ids_and_names": [[u.id, u.name] for u in uses],
        "model_id": model_id,
        "message_meta_tags": [],
        "cost": e.cost,
        "tokens": {"input": tokens.input, "output": tokens.output,
                   "reasoning": tokens.reasoning,
                   "cache": {"read": tokens.cache.read, "write": tokens.cache.write}},
    }


def _apply_user_override(message: m.UserMessage, over: dict[str, Any]) -> m.UserMessage:
    changes: dict[str, Any] = {}
    if "timestamp" in over:
        changes["timestamp"] = over["timestamp"]
    if "env_context" in over:
        state = (over["env_context"] or {}).get("env_state")
        changes["env_context"] = m.UserEnvContext(None if state is None else m.EnvState(
            state.get("operating_system"), state.get("current_working_directory")))
    if "images" in over:
        images = over["images"]
        changes["images"] = None if images is None else tuple(images)
    return attrs.evolve(message, **changes)
