"""Import a saved Q CLI conversation (its JSON) as events, reporting what does not map.

The importer writes the events that make ``projections.qcli``'s fold rebuild
the saved state: a ``conversation.created``, the tools and context files, then
each history entry as the messages that produce it (a typed prompt is a user
message, an assistant turn is an assistant message whose tool parts settle the
way the next entry's results say), the tangent and checkpoints at the points
they were taken, and the transcript as saved. Fields that no event carries
(a timestamp's exact text, Q CLI's message id and request metadata, result
blocks that are not one text) ride in part metadata under ``"qcli"``.

It runs on the write side: it never imports ``projections`` and parses the
JSON itself. What it cannot map it lists in :attr:`ImportResult.unmapped`;
nothing is dropped silently.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Final

import attrs
import msgspec

from engine import events as ev
from engine.codec import decode_json, encode_json, encode_msgpack
from engine.errors import ConvlogError, EventDecodeError
from engine.events import Event, tag_of
from engine.importers import qcli_shapes as shape
from engine.importers.base import (
    ImportInputError,
    ImportReport,
    Plan,
    PlannedSession,
    json_document,
    loads,
    seal,
    stable_part_id,
    stable_uuid,
)
from engine.session import Session

CANCELLED_TEXT: Final = "Tool use was cancelled by the user"
REDACTED: Final = "<tool result redacted>"
_EPOCH: Final = datetime(1970, 1, 1, tzinfo=UTC)
_ORIGINS: Final = {"native___": "builtin", "custom___": "custom", "mcp___": "mcp"}
# Top-level keys the importer maps (directly or by recomputing them).
_KNOWN: Final = frozenset({
    "conversation_id", "next_message", "history", "valid_history_range", "transcript",
    "tools", "context_manager", "context_message_length", "latest_summary", "model",
    "model_info", "file_line_tracker", "checkpoint_manager", "mcp_enabled", "tangent_state",
    "convlog_schema_version",
})
_MODEL_FIELDS: Final = ("model_id", "model_name", "description", "context_window_tokens",
                        "rate_multiplier", "rate_unit")


class QCliFormatError(ConvlogError):
    """The input is not a Q CLI conversation this importer can read."""


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


@attrs.frozen(eq=False)
class _Said:
    """A user message the import walks: its declared reading, and the message as saved,
    which is compared whole (there an unknown field, or a missing key against a null
    one, makes two messages differ)."""

    said: shape.Message
    saved: Mapping[str, Any]


@attrs.frozen(eq=False)
class _Turn:
    """A history entry the import walks: its declared reading, and the entry as saved in
    the newest shape (a pair as the object it reads as), which is compared whole."""

    said: shape.Turn
    saved: Mapping[str, Any]

    @property
    def user(self) -> _Said:
        return _Said(self.said.user, self.saved["user"])


def _as_saved(saved: Any, said: shape.Walked | shape.Snapshot) -> Mapping[str, Any]:
    """The saved entry in the newest shape, as the declared reading ``said`` found it."""
    if isinstance(said, tuple):  # a [user, assistant] pair (a list or a tuple)
        return {"user": saved[0], "assistant": saved[1], "request_metadata": None}
    return saved  # type: ignore[no-any-return]


def _turns(saved: Any, said: list[shape.Walked] | None) -> list[_Turn]:
    """A history the import walks; ``saved`` is the list ``said`` was read from."""
    if said is None:  # a null (or missing) history is empty
        return []
    return [_Turn(shape.newest(d), _as_saved(s, d)) for s, d in zip(saved, said, strict=True)]


def _said(saved: Any, said: shape.Message | None) -> _Said | None:
    return None if said is None else _Said(said, saved)


@attrs.frozen
class ImportResult:
    events: tuple[Event, ...]
    unmapped: tuple[str, ...]  # what could not be mapped, one note each
    seqs: tuple[int, ...] = ()  # the seqs the events got, once appended


def _ms(text: str) -> int:
    when = datetime.fromisoformat(text)
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return (when - _EPOCH) // timedelta(milliseconds=1)


def _offset_minutes(text: str) -> int:
    offset = datetime.fromisoformat(text).utcoffset()
    return 0 if offset is None else int(offset.total_seconds() // 60)


def _time_array_ms(data: Any) -> int:
    if isinstance(data, str):
        return _ms(data)
    year, day, hour, minute, second, nanos, *offset = data
    off = [*offset, 0, 0, 0][:3]
    t = datetime(year, 1, 1, tzinfo=UTC) + timedelta(days=day - 1, hours=hour, minutes=minute,
                                                    seconds=second)
    t -= timedelta(hours=off[0], minutes=off[1], seconds=off[2])
    return (t - _EPOCH) // timedelta(milliseconds=1) + int(nanos) // 1_000_000


# AssistantMessage::Response / ToolUse fields (``thinking`` in newer saves).
_ASSISTANT_FIELDS: Final = frozenset({"message_id", "content", "tool_uses", "thinking"})


def _block_text(block: Any) -> str:
    (kind, value), = block.items()
    return value if kind == "Text" else json.dumps(value, separators=(",", ":"),
                                                   ensure_ascii=False)


class _Importer:
    def __init__(self, data: Mapping[str, Any]) -> None:
        if not isinstance(data, Mapping) or "conversation_id" not in data:
            raise QCliFormatError("a Q CLI conversation is an object with a conversation_id")
        self.data = data
        try:  # read once, as saved: a value of the wrong shape is named by its path
            self.shape = said = shape.check(data)
        except msgspec.ValidationError as exc:
            raise QCliFormatError(f"not a Q CLI conversation this importer can read: {exc}"
                                  ) from exc
        # What the walk goes through, each beside the value it was read from (a value
        # the declared reading found present is there, of the shape it was read as).
        self.history = _turns(data.get("history"), said.history)
        self.next_message = _said(data.get("next_message"), said.next_message)
        self.tangent: tuple[list[_Turn], _Said | None] | None = None
        if said.tangent_state is not None:
            tangent = data["tangent_state"]
            self.tangent = (_turns(tangent.get("main_history"), said.tangent_state.main_history),
                            _said(tangent.get("main_next_message"),
                                  said.tangent_state.main_next_message))
        self.checkpoints: list[_Checkpoint] = []
        if said.checkpoint_manager is not None:
            for cp, saved in zip(said.checkpoint_manager.placed,
                                 data["checkpoint_manager"].get("checkpoints") or [], strict=True):
                snapshot = [_as_saved(s, d) for s, d in zip(
                    saved.get("history_snapshot") or [], cp.history_snapshot or [], strict=True)]
                self.checkpoints.append((cp, snapshot))
        self.key = str(data["conversation_id"])
        self.counter = 0
        self.events: list[Event] = []
        self.unmapped: list[str] = []
        self.time = self._first_time()
        self.call_ids: set[str] = set()
        self.pending_tools = False  # the last assistant used tools: results are pending
        # The prompt the fold's pending results already carry, and the message it came from.
        self.joined: tuple[str, _Said] | None = None
        self.env: Any = None

    # ------------------------------------------------------------------ helpers

    def _message_id(self) -> str:
        # Stable across imports of the same save: derived from the conversation id.
        self.counter += 1
        return stable_uuid(self.time, "qcli", self.key, "message", str(self.counter))

    def _part_id(self) -> str:
        self.counter += 1
        return stable_part_id("qcli", self.key, "part", str(self.counter))

    def note(self, text: str) -> None:
        self.unmapped.append(text)

    def emit(self, e: Event, time: int | None = None) -> None:
        if time is not None and time > 0:
            self.time = time
        if isinstance(e, ev.NextMessageCleared | ev.HistoryCleared):
            self.pending_tools, self.joined = False, None  # the fold's next message is gone
        self.events.append(msgspec.structs.replace(e, time=self.time))

    def _first_time(self) -> int:
        for turn in self.history:
            entry = turn.said
            stamp = entry.user.timestamp
            if stamp:
                return _ms(stamp)  # a wrong type fails in fromisoformat, as before
            start = entry.request_metadata and entry.request_metadata.request_start_timestamp_ms
            if start:
                return int(start)
        return 1  # the log fills a zero time with its clock; keep imports deterministic

    # ------------------------------------------------------------------ the conversation

    def run(self) -> None:
        data = self.data
        for key in data:
            if key not in _KNOWN:
                self.note(f"top-level field {key!r} is not mapped")
        told = self.shape.tangent_state or shape.Tangent()
        main, main_next = self.tangent or ([], None)
        users = [t.said.user for t in [*main, *self.history]]
        stamps = [u.timestamp for u in users if u.timestamp]
        # The environment of tool-result messages comes from the conversation.
        result_envs = [u.env for u in users if u.content.kind != "Prompt"]
        self.env = (result_envs or [u.env for u in users] or [None])[0]
        env_state = (self.env or {}).get("env_state") or {}
        self.emit(ev.ConversationCreated(
            conversation_id=data["conversation_id"], model_info=self._model_info(),
            mcp_enabled=bool(self.shape.mcp_enabled),
            os=env_state.get("operating_system") or "",
            cwd=env_state.get("current_working_directory") or "",
            utc_offset_minutes=_offset_minutes(stamps[0]) if stamps else 0,
        ))
        self._tools(self.shape.tools or {})
        self._context(data.get("context_manager"), self.shape.context_manager)
        checkpoints = list(self.checkpoints)
        history = self.history
        if self.tangent is not None:
            self._thread(main, told.main_latest_summary, checkpoints, main_next)
            self._next_message(main_next)
            self.emit(ev.TranscriptReplaced(lines=list(told.main_transcript or [])))
            self.emit(ev.TangentEntered(), None if told.tangent_start_time is msgspec.UNSET
                      else _time_array_ms(told.tangent_start_time))
            if not self.pending_tools and main_next is not None:
                self.emit(ev.NextMessageCleared())  # the tangent's turns bring their own prompt
            if _saved(history[:len(main)]) == _saved(main) and self.shape.latest_summary == (
                    told.main_latest_summary):
                self._entries(history, len(main), [], self.next_message)
            else:
                self.emit(ev.HistoryCleared())
                self.pending_tools = False
                self._thread(history, self.shape.latest_summary, [], self.next_message)
        else:
            self._thread(history, self.shape.latest_summary, checkpoints, self.next_message)
        self._next_message(self.next_message)
        for cp, _ in checkpoints:
            self.note(f"checkpoint {cp.tag!r}: its history is not a prefix of the "
                      "history at a point the import passes; not imported")
        self._file_lines(self.shape.file_line_tracker or {})
        self.emit(ev.TranscriptReplaced(lines=list(self.shape.transcript or [])))
        if self.shape.context_message_length is not None:
            self.note("context_message_length is recomputed from the summary")

    def _model_info(self) -> ev.ModelInfo | None:
        info = self.shape.model_info
        if info:
            extra = sorted(set(info) - set(_MODEL_FIELDS))
            if extra:
                self.note(f"model_info fields {extra} are not mapped")
            return ev.ModelInfo(**{k: info[k] for k in _MODEL_FIELDS if info.get(k) is not None})
        model = self.shape.model
        if model:
            self.note("the legacy model string became model_info; the model field is not kept")
            return ev.ModelInfo(model_id=model)
        return None

    def _tools(self, tools: Mapping[str, list[dict[str, shape.ToolSpec]]]) -> None:
        for key, specs in tools.items():
            origin = _ORIGINS.get(key, "mcp")
            parsed = []
            for spec in specs:
                if len(spec) != 1:
                    raise QCliFormatError(f"tool must be an object with one variant key, "
                                          f"not {spec!r}")
                (body,) = spec.values()
                schema = body.input_schema or {}
                parsed.append(ev.ToolSpec(name=body.name, description=body.description or "",
                                          input_schema=dict(schema.get("json") or {})))
            if not parsed:
                self.note(f"the empty tool group {key!r} is not kept")
                continue
            self.emit(ev.ToolsChanged(origin=origin, tools=parsed,  # type: ignore[arg-type]
                                      server=None if key in _ORIGINS else key))

    def _context(self, manager: Mapping[str, Any] | None,
                 declared: shape.ContextManager | None) -> None:
        if not manager or declared is None:
            return
        paths = list(declared.paths or [])
        for path in dict.fromkeys(paths):
            self.emit(ev.ContextFileAdded(path=path))
        extra = sorted(k for k in manager if k != "paths")
        if extra:
            self.note(f"context_manager fields {extra} are not mapped (only paths are)")
        if not paths:
            self.note("an empty context_manager is not kept (it appears with its first file)")

    def _file_lines(self, trackers: Mapping[str, shape.LineTracker]) -> None:
        for path, t in trackers.items():
            after = t.after_fswrite_lines
            prev = after if t.prev_fswrite_lines is msgspec.UNSET else t.prev_fswrite_lines
            if prev != after or t.is_first_write:
                self.note(f"file_line_tracker {path!r}: only the state after a write is kept "
                          "(prev_fswrite_lines = after_fswrite_lines, is_first_write false)")
            self.emit(ev.FileLinesChanged(
                path=path, before_lines=t.before_fswrite_lines, after_lines=after,
                lines_added_by_agent=t.lines_added_by_agent,
                lines_removed_by_agent=t.lines_removed_by_agent))

    # ------------------------------------------------------------------ history

    def _thread(self, history: list[_Turn], summary: Any, checkpoints: list[_Checkpoint],
                final: _Said | None) -> None:
        """A summary, then the entries, with checkpoints placed where their history matches.

        ``final`` is the next message after the last entry (it holds that entry's results).
        """
        if summary is None:
            self._entries(history, 0, checkpoints, final)
            return
        text, metadata = (summary, None) if isinstance(summary, str) else summary
        compaction = ev.HistoryCompacted(summary=text, request_metadata=metadata or {},
                                         keep_last=len(history))
        first = history[0].user if history else None
        if first is None or first.said.content.kind == "Prompt":
            self.emit(msgspec.structs.replace(compaction, keep_last=0))
            self._entries(history, 0, checkpoints, final)
            return
        # Compaction kept an entry whose results answer a dropped turn: import a stand-in
        # for that turn, then compact it away, as Q CLI's own compaction did.
        ids = [_result_id(r, "entry 0") for r in first.said.content.results.tool_use_results
               or []]
        self.note(f"entry 0 answers tool uses {ids} that the compaction dropped: a stand-in "
                  "turn supplies them and the compaction removes it again")
        self._checkpoints_at(0, history, checkpoints)  # taken before any entry: still exact
        prompt = {"content": {"Prompt": {"prompt": "Empty prompt"}}}
        self._user_message(_Said(msgspec.convert(prompt, shape.Message), prompt),
                           "Empty prompt", "stand-in")
        uses: list[dict[str, Any]] = [{"id": i, "name": "unknown", "args": {}} for i in ids]
        turn = {"user": prompt, "assistant": {"ToolUse": {"message_id": None, "content": "",
                                                          "tool_uses": uses}}}
        self._assistant(_Turn(msgspec.convert(turn, shape.Turn), turn), first, "stand-in")
        self._entries(history, 0, [], final)
        for cp, _ in checkpoints:
            self.note(f"checkpoint {cp.tag!r}: not placed in a history that starts "
                      "with results of compacted turns")
        checkpoints.clear()
        self.emit(compaction)

    def _checkpoints_at(self, k: int, history: list[_Turn],
                        checkpoints: list[_Checkpoint]) -> None:
        while checkpoints and checkpoints[0][1] == _saved(history[:k]):
            cp, _ = checkpoints.pop(0)
            self.emit(ev.CheckpointCreated(
                tag=cp.tag, description=cp.description or "", is_turn=bool(cp.is_turn),
                tool_name=cp.tool_name), _ms(cp.timestamp) if cp.timestamp else None)

    def _entries(self, history: list[_Turn], first: int, checkpoints: list[_Checkpoint],
                 final: _Said | None) -> None:
        self._checkpoints_at(first, history, checkpoints)
        for i in range(first, len(history)):
            entry = history[i]
            after = history[i + 1].user if i + 1 < len(history) else final
            self._user_side(entry.user, f"entry {i}")
            self._assistant(entry, after, f"entry {i}")
            self._checkpoints_at(i + 1, history, checkpoints)

    def _user_side(self, user: _Said, where: str) -> None:
        """The events that make the fold's next message ``user``.

        Results need no event: the previous assistant's tool parts produced them
        (``pending_tools``); a prompt typed with them joins them.
        """
        said = user.said
        content = said.content  # one known variant (refused otherwise when the save was read)
        if isinstance(content.Prompt, shape.PromptBody):
            if self.pending_tools:  # a typed prompt where results were due: drop them
                self.emit(ev.NextMessageCleared())
                self.pending_tools = False
            prompt = content.Prompt.prompt or ""
            if prompt == "" and _bare(said, self.env):
                return  # a turn nobody prompted: the fold pairs it with an empty prompt
            self._user_message(user, prompt, where)
        elif not self.pending_tools:
            self._orphan_results(user, content.results, where)
        elif (joined := content.results.prompt) is not None:
            self._join_prompt(user, joined, where)
        else:
            self._check_env(user, where)

    def _join_prompt(self, user: _Said, prompt: str, where: str) -> None:
        """Give the pending results ``prompt``; the fold joins a new prompt to one it has."""
        if self.joined is None:
            self._user_message(user, prompt, where)
        else:
            had, before = self.joined
            if prompt == had and user.saved == before.saved:
                return  # already there (a tangent starts with the main next message)
            said = user.said
            extra = said.additional_context or ""
            had_extra = before.said.additional_context or ""
            # The fold joins additional context like prompts: old + "\n" + new.
            rest: str | None = None
            if extra == had_extra:
                rest = ""
            elif not had_extra:
                rest = extra
            elif extra.startswith(had_extra + "\n"):
                rest = extra[len(had_extra) + 1:]
            if prompt.startswith(had + "\n") and rest is not None:
                self._user_message(user, prompt[len(had) + 1:], where, extra=rest)
            else:
                # Not a join of the pending prompt (e.g. /tangent then an explicit set):
                # setting the next message replaces the prompt and keeps the results.
                stamp = said.timestamp
                self.emit(ev.NextMessageSet(prompt=prompt, additional_context=extra),
                          _ms(stamp) if stamp else None)
        self.joined = (prompt, user)

    def _check_env(self, user: _Said, where: str) -> None:
        self._env_fields(user, where)
        said = user.said
        if said.env != self.env:
            self.note(f"{where}: the environment of a tool-result message is the "
                      "conversation's; its own is not kept")
        if said.timestamp is not None:
            self.note(f"{where}: a tool-result message has no timestamp of its own here")
        if said.additional_context or said.images:
            self.note(f"{where}: additional context or images on tool results are not kept")

    def _orphan_results(self, user: _Said, body: shape.Results, where: str) -> None:
        texts = [_block_text(b) for r in body.tool_use_results or [] for b in r.content or []]
        prompt = " ".join(texts) or REDACTED
        if body.prompt:
            prompt = f"{body.prompt} {prompt}"
        self.note(f"{where}: tool results with no tool use before them became a prompt")
        self._user_message(user, prompt, where)

    def _env_fields(self, user: _Said, where: str) -> None:
        state = (user.said.env or {}).get("env_state") or {}
        extra = sorted(set(state) - {"operating_system", "current_working_directory"})
        if extra:
            self.note(f"{where}: env_state fields {extra} are not kept")

    def _user_message(self, user: _Said, prompt: str, where: str,
                      extra: str | None = None) -> None:
        """``user`` as a user message with ``prompt``; ``extra``, when given, is its
        additional context (a join's rest) in place of its own."""
        self._env_fields(user, where)
        if prompt == "":
            self.note(f"{where}: an empty prompt becomes 'Empty prompt'")
        said = user.said
        stamp = said.timestamp
        mid = self._message_id()
        override: dict[str, Any] = {"timestamp": stamp, "env_context": said.env}
        if said.images is not None:
            override["images"] = said.images
        self.emit(ev.MessageStarted(message_id=mid, role="user"), _ms(stamp) if stamp else None)
        pid = self._part_id()
        self.emit(ev.TextAdded(message_id=mid, part_id=pid, text=prompt,
                               metadata={"qcli": override}))
        self.emit(ev.PartEnded(message_id=mid, part_id=pid))
        if extra is None:
            extra = said.additional_context or ""
        if extra:
            xid = self._part_id()
            self.emit(ev.TextAdded(message_id=mid, part_id=xid, text=extra, synthetic=True))
            self.emit(ev.PartEnded(message_id=mid, part_id=xid))
        self.emit(ev.MessageCompleted(message_id=mid))

    def _assistant(self, entry: _Turn, after: _Said | None, where: str) -> None:
        reply = entry.said.assistant
        kind, said = reply.kind, reply.body
        body = entry.saved["assistant"][kind]  # as saved: its unknown fields are listed
        metadata = entry.saved.get("request_metadata")  # kept as saved (a pair has none)
        timing = entry.said.request_metadata or shape.RequestMetadata()
        start, end = timing.request_start_timestamp_ms, timing.stream_end_timestamp_ms
        self.pending_tools = False  # this turn consumes the next message
        self.joined = None
        mid = self._message_id()
        self.emit(ev.MessageStarted(message_id=mid, role="assistant"),
                  int(start) if start else None)
        for key in sorted(set(body) - _ASSISTANT_FIELDS):
            self.note(f"{where}: assistant field {key!r} is not mapped")
        thinking = said.thinking
        if isinstance(thinking, dict):
            # Newer saves keep the model's reasoning (ReasoningContentForHistory: text,
            # signature, redacted_content, model_id) on the assistant message.
            rid = self._part_id()
            read = msgspec.convert(thinking, shape.Thinking)
            signed = {"signature": read.signature} if isinstance(read.signature, str) else {}
            self.emit(ev.ReasoningAdded(message_id=mid, part_id=rid,
                                        text=str(read.text or ""),
                                        metadata={"qcli": {"thinking": thinking},
                                                  **({"anthropic": signed} if signed else {})}))
            self.emit(ev.PartEnded(message_id=mid, part_id=rid))
        elif thinking is not None:
            self.note(f"{where}: assistant thinking that is not an object is not kept")
        pid = self._part_id()
        qcli = {"message_id": said.message_id, "request_metadata": metadata}
        self.emit(ev.TextAdded(message_id=mid, part_id=pid, text=said.content or "",
                               metadata={"qcli": qcli}))
        self.emit(ev.PartEnded(message_id=mid, part_id=pid))
        if kind == "ToolUse":
            self._tool_uses(mid, said.tool_uses or [], after, where)
        self.emit(ev.MessageCompleted(message_id=mid), int(end) if end else None)

    def _tool_uses(self, mid: str, uses: list[shape.ToolCall], after: _Said | None,
                   where: str) -> None:
        results: dict[str | None, shape.ToolResult] = {}
        answer_kind = ""
        if after is not None:
            answer_kind = after.said.content.kind
            answer = after.said.content.results
            for r in answer.tool_use_results or []:
                results.setdefault(_result_id(r, where), r)
            if answer_kind == "CancelledToolUses" and answer.prompt is None and not any(
                    _is_cancelled(r) for r in results.values()):
                self.note(f"{where}: cancelled tool uses without a cancelled result read back "
                          "as tool use results")
        used = set()
        for use in uses:
            if use.id is msgspec.UNSET or use.name is msgspec.UNSET:
                raise QCliFormatError(f"{where}: a tool use needs an id and a name")
            call_id = use.id
            if call_id in self.call_ids:
                self.note(f"{where}: tool use id {call_id!r} repeats; the repeat is skipped")
                continue
            self.call_ids.add(call_id)
            used.add(call_id)
            pid = self._part_id()
            args = use.args
            self.emit(ev.ToolAdded(
                message_id=mid, part_id=pid, call_id=call_id, tool=use.name,
                input=args if isinstance(args, dict) else {},
                metadata={"orig_name": use.orig_name or use.name,
                          "orig_args": args if use.orig_args is msgspec.UNSET
                          else use.orig_args}))
            if not isinstance(args, dict):
                self.note(f"{where}: tool use {call_id!r} has non-object args; kept in orig_args")
            self._settle(mid, pid, call_id, results.get(call_id), answer_kind=answer_kind,
                         where=where)
        for orphan in sorted(set(results) - used):  # type: ignore[type-var]
            self.note(f"{where}: result {orphan!r} answers no tool use and is not kept")
        self.pending_tools = bool(used)

    def _settle(self, mid: str, pid: str, call_id: str, result: shape.ToolResult | None, *,
                answer_kind: str, where: str) -> None:
        """End a tool part so that the fold derives ``result`` from it."""
        if result is None:
            if answer_kind in ("ToolUseResults", "CancelledToolUses"):  # a result was due
                self.note(f"{where}: tool use {call_id!r} has no result; imported as cancelled")
            self.emit(ev.ToolFailed(message_id=mid, part_id=pid, error=CANCELLED_TEXT,
                                    kind="cancelled"))
            return
        if answer_kind == "CancelledToolUses" and _is_cancelled(result):
            self.emit(ev.ToolFailed(message_id=mid, part_id=pid, error=CANCELLED_TEXT,
                                    kind="cancelled"))
            return
        blocks = list(result.content or [])  # the blocks as saved, compared whole
        text = " ".join(_block_text(b) for b in blocks)
        # The fold shows an output or error as one text block; anything else rides along.
        metadata = None
        if blocks != [{"Text": text}] or not text.strip():
            metadata = {"qcli": {"content": blocks}}
        self.emit(ev.ToolStarted(message_id=mid, part_id=pid))
        if result.status == "Error":
            error = text if text.strip() else "error"
            self.emit(ev.ToolFailed(message_id=mid, part_id=pid, error=error, metadata=metadata))
        else:
            self.emit(ev.ToolCompleted(message_id=mid, part_id=pid, output=text or REDACTED,
                                       metadata=metadata))

    def _next_message(self, message: _Said | None) -> None:
        if message is None:
            if self.pending_tools:
                self.emit(ev.NextMessageCleared())
                self.pending_tools = False
            return
        self._user_side(message, "next_message")


_Checkpoint = tuple[shape.Checkpoint, list[Mapping[str, Any]]]  # and its snapshot as saved


def _saved(turns: list[_Turn]) -> list[Mapping[str, Any]]:
    """The entries as saved (newest shape), to compare histories whole."""
    return [t.saved for t in turns]


def _bare(said: shape.Message, env: Any) -> bool:
    """A message with nothing of its own: a missing key reads as its default, a null
    additional context or environment does not (compared as saved, always)."""
    return ((said.additional_context is msgspec.UNSET or said.additional_context == "")
            and (said.env_context is msgspec.UNSET or said.env_context == env)
            and said.timestamp is None and said.images is None)


def _is_cancelled(result: shape.ToolResult) -> bool:
    return result.status == "Error" and result.content == [{"Text": CANCELLED_TEXT}]


def _result_id(result: shape.ToolResult, where: str) -> str | None:
    if result.tool_use_id is msgspec.UNSET:
        raise QCliFormatError(f"{where}: a tool result needs a tool_use_id")
    return result.tool_use_id


def events_from_qcli(data: Mapping[str, Any]) -> ImportResult:
    """The events that rebuild ``data`` (a parsed Q CLI conversation), and what did not map.

    Input of the wrong shape anywhere is a :class:`QCliFormatError`, never a crash.
    """
    try:
        importer = _Importer(data)
        importer.run()
    except QCliFormatError:
        raise
    except (KeyError, TypeError, AttributeError, ValueError, IndexError, OverflowError) as exc:
        # The save is parsed JSON of any shape: a field of the wrong type surfaces here.
        raise QCliFormatError(f"not a Q CLI conversation this importer can read: "
                              f"{type(exc).__name__}: {_short(str(exc))}") from exc
    for e in importer.events:
        try:  # values of the wrong type (a null id, a number for a name) fail the typed decode;
            same = decode_json(encode_json(e)) == e  # keys that are not strings do not survive
            encode_msgpack(e)  # the store's msgpack refuses ints over 64 bits
        except (EventDecodeError, TypeError, OverflowError) as exc:
            raise QCliFormatError(f"a value of the wrong type for {tag_of(type(e))}: "
                                  f"{_short(str(exc))}") from exc
        if not same:
            raise QCliFormatError(f"a value in {tag_of(type(e))} that JSON cannot hold "
                                  "(an object key that is not a string)")
    return ImportResult(tuple(importer.events), tuple(importer.unmapped))


def _with_ids(events: Sequence[Event], *key: str) -> list[Event]:
    """Stable event ids: re-importing the same save into the same session adds nothing."""
    return [msgspec.structs.replace(e, id=stable_uuid(e.time, "qcli", *key, str(i)))
            for i, e in enumerate(events)]


def import_qcli(session: Session, data: Mapping[str, Any] | str | bytes) -> ImportResult:
    """Append a saved Q CLI conversation to ``session`` as one atomic batch (idempotent)."""
    try:
        parsed = loads(data) if isinstance(data, str | bytes) else data
    except ValueError as exc:
        raise QCliFormatError(f"not JSON: {exc}") from exc
    result = events_from_qcli(parsed)
    events = _with_ids(result.events, session.id, str(parsed["conversation_id"]))
    seqs = session.append(events)
    return attrs.evolve(result, seqs=tuple(seqs))


def plan_qcli(path: Path) -> Plan:
    """A Q CLI ``/save`` file as one session (its id derived from the conversation id);
    ``engine.importers.qcli_db`` reads the conversations Q CLI saves by itself."""
    report = ImportReport(str(path), "qcli")
    data = json_document(path, report)
    return seal(Plan(report, [plan_conversation(data, report, path.name, str(path))]))


def plan_conversation(data: Any, report: ImportReport, source: str, where: str
                      ) -> PlannedSession:
    """One parsed ``ConversationState`` as a planned session; ``where`` names it in an
    error."""
    try:
        result = events_from_qcli(data)
    except QCliFormatError as exc:
        raise ImportInputError(where, str(exc)) from exc
    for note in result.unmapped:
        report.note(note)
    first = result.events[0].time if result.events else 1
    sid = stable_uuid(first, "qcli", str(data["conversation_id"]), "session")
    events = _with_ids(result.events, sid, str(data["conversation_id"]))
    return PlannedSession(sid, "main", events, created=first, title=str(data["conversation_id"]),
                          source=source, original_id=str(data["conversation_id"]))
