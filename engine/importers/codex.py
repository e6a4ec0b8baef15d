"""OpenAI Codex CLI rollouts (``rollout-<ts>-<uuid>.jsonl``, lines ``{timestamp, type, payload}``).

One user message per user input, one assistant message per turn (everything
the model did between two inputs). The file is read twice, line by line: the
first pass only hashes the visible texts of ``response_item``s, so that the
``event_msg`` copies of those texts (Codex writes them twice) are recognised
as duplicates while an ``event_msg`` with no counterpart still comes in.

What stays open stays open: a rollout that ends mid-turn leaves its assistant
message open and a call without output running; no result is invented. A
``turn_aborted`` is a recorded fact, so it settles what is running as aborted.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Final

import attrs
import msgspec

from engine import events as ev
from engine.collector import collector_paused
from engine.events import Event
from engine.importers.base import (
    MAX_LINE,
    PROGRESS,
    PROGRESS_EVERY,
    SHAPE_ERRORS,
    SKIPPED,
    ImportInputError,
    ImportReport,
    Plan,
    PlannedSession,
    check_text,
    decode,
    loads,
    mended_line,
    ms_of,
    open_binary,
    read_line,
    seal,
    shape_error,
    stable_part_id,
    stable_uuid,
    time_head,
    uuid_text,
)

FORMAT: Final = "codex"
_ENV: Final = "<environment_context>"
_DUPLICATED: Final = frozenset({"user_message", "agent_message", "agent_reasoning",
                                "agent_reasoning_raw_content"})
# Codex serialises its turn events as task_started/task_complete and accepts the
# turn_started/turn_complete spellings too.
_TURN_STARTED: Final = frozenset({"task_started", "turn_started"})
_TURN_COMPLETE: Final = frozenset({"task_complete", "turn_complete"})
_EMPTY_OUTPUT: Final = "(no output)"


def _digest(text: str) -> bytes:
    return _blake2b(text.encode(), digest_size=12).digest()


_blake2b: Final = hashlib.blake2b


_UNSET: Final = msgspec.UNSET
# An event's count within its line, as the bytes its id hashes (a line makes a few).
_COUNTED: Final = 64
_COUNTS: Final = tuple(str(n).encode() for n in range(_COUNTED))


class _Payload(msgspec.Struct):
    """A line's ``payload`` (a response item, an event_msg, a compacted or
    inter-agent line), decoded once: the fields read of every kind, as codex-rs
    writes them. Lenient as the reader always was across Codex versions: unknown
    fields are ignored, a missing one is None (or UNSET where only its presence is
    kept), and a value of another JSON type than Codex writes comes in as it is for
    the reader to judge (a shape error still names the line)."""

    type: Any = None
    # response items
    role: Any = None
    content: Any = None
    summary: Any = None
    encrypted_content: Any = None
    id: Any = _UNSET
    name: Any = None
    arguments: Any = None
    input: Any = None
    call_id: Any = None
    action: Any = None
    status: Any = _UNSET
    namespace: Any = _UNSET
    execution: Any = _UNSET
    output: Any = None
    ghost_commit: Any = None
    revised_prompt: Any = None
    result: Any = None
    tools: Any = None
    phase: Any = _UNSET
    end_turn: Any = _UNSET
    # messages between agents
    author: Any = _UNSET
    recipient: Any = _UNSET
    other_recipients: Any = _UNSET
    trigger_turn: Any = _UNSET
    # event_msg
    message: Any = None
    text: Any = None
    info: Any = None
    rate_limits: Any = None
    reason: Any = None
    error: Any = None
    status_code: Any = None
    http_status_code: Any = None
    thread_name: Any = None
    item: Any = None
    num_turns: Any = None
    # compacted
    replacement_history: Any = None


class _Line(msgspec.Struct):
    """A rollout line in the ``{timestamp, type, payload}`` envelope."""

    timestamp: Any = None
    type: Any = None
    payload: _Payload | msgspec.UnsetType | None = _UNSET
    ordinal: Any = None


_LINE: Final = msgspec.json.Decoder(_Line)
# Kinds whose payload is kept whole (metadata) or listed field by field: a dict.
_WHOLE: Final = frozenset({"session_meta", "turn_context"})


def _decode_line(raw: bytes) -> Any:
    """A line as a :class:`_Line` with its payload decoded once; any other shape (no
    envelope, a payload that is not an object, a kind kept whole) as a dict."""
    try:
        line = _LINE.decode(raw)
    except (msgspec.ValidationError, RecursionError):
        return decode(raw)  # another shape: read as any JSON (or its DecodeError)
    if line.payload.__class__ is not _Payload or line.type.__class__ is not str or (
            line.type in _WHOLE):
        return decode(raw)
    return line


def _present(p: _Payload, names: tuple[str, ...]) -> dict[str, Any]:
    """The fields of ``names`` the payload had (its UNSET ones left out). ``names`` in
    sorted order: the order every store reads a JSON object back in (canonical bytes
    sort the keys), whatever order the file wrote them in."""
    return {k: v for k in names if (v := getattr(p, k)) is not _UNSET}


@attrs.define
class _State:
    sid: str = ""
    time: int = 1
    line: int = 0
    count: int = 0
    assistant: str | None = None
    last_user: str | None = None
    model: ev.ModelRef | None = None
    provider: str = "openai"
    instructions: str | None = None
    meta: dict[str, Any] | None = None  # a later session_meta, kept on the next part
    first_meta: dict[str, Any] | None = None  # the first: session.imported's metadata
    context: dict[str, Any] | None = None  # the turn_context for the next assistant message
    tools: dict[str, tuple[str, str]] = attrs.field(factory=dict)  # call id -> (msg, part)
    tokens: ev.Tokens | None = None
    tasks: bool = False  # the rollout writes task_started/task_complete
    search: str | None = None  # the last tool_search_call (an output may omit its call_id)
    last_total: Any = None  # the last token_count's total_token_usage (a repeat is no request)
    error: ev.MessageError | None = None  # an error event of the open turn
    title: str = ""  # the thread's name (thread_name_updated: the latest wins)


class _Rollout:
    def __init__(self, path: Path, report: ImportReport, lenient: bool, max_line: int) -> None:
        self.path = path
        self.report = report
        self.lenient = lenient
        self.max_line = max_line
        self.seen: set[bytes] = set()
        # The line's hashed id prefixes, made by its first add() and _pid(): a copier of
        # the BLAKE2b state of FORMAT, sid and line (with the id's time head), and of sid
        # and line.
        self.line_ids: tuple[Callable[[], Any], str] | None = None
        self.line_parts: Callable[[], Any] | None = None
        self.recognised = 0  # lines shaped like a rollout's
        self.events: list[Event] = []  # the own events of the session being written
        self.s = _State()
        # A thread_rolled_back turns what follows into a fork: the sessions so far, and
        # where each user turn starts (its seq in the lineage, the user message before it).
        self.forks: list[PlannedSession] = []
        self.current: PlannedSession | None = None  # the fork being written (None: main)
        self.turns: list[tuple[int, str | None]] = []
        # (the line's ordinal, the seq before it): where an `exec fork` of this thread
        # that keeps the items before an ordinal branches off.
        self.ordinals: list[tuple[int, int]] = []

    # ------------------------------------------------------------------ passes

    def _seq(self) -> int:
        """The seq (without session.imported) the next event gets in the lineage."""
        return (self.current.fork_seq or 0) + len(self.events) if self.current else len(
            self.events)

    def run(self) -> list[PlannedSession]:
        self.seen = _visible_digests(self.path, self.max_line)
        first_time = 0
        # Lines written together share their timestamp: the last one's time is reused.
        last_stamp, last_ms = None, 0
        s = self.s
        for number, record in self._records():
            s.line, s.count = number, 0
            self.line_ids = self.line_parts = None  # the line's id prefixes (add, _pid)
            if record.__class__ is _Line:  # the envelope every rollout has
                stamp, kind, payload, ordinal = (record.timestamp, record.type, record.payload,
                                                 record.ordinal)
            else:
                stamp, ordinal = record.get("timestamp"), record.get("ordinal")
                kind, payload = _envelope(record)
                if kind not in _WHOLE and isinstance(payload, dict):
                    payload = msgspec.convert(payload, _Payload)
            if stamp.__class__ is not str or stamp != last_stamp:
                last_ms = ms_of(stamp)
                last_stamp = stamp if stamp.__class__ is str else None
            s.time = last_ms if last_ms > s.time else s.time
            first_time = first_time or s.time
            if not s.sid:
                s.sid = stable_uuid(s.time, FORMAT, "session", self._session_key(kind, payload))
            if kind == _STATE_MARKER:
                self.recognised += 1
                self.report.note("a legacy {record_type: state} line: nothing to map", number)
                continue
            if kind is not None:
                self.recognised += 1
            if payload.__class__ is not _Payload and not isinstance(payload, dict):
                named = record.type if record.__class__ is _Line else record.get("type")
                self.report.note(f"a {named!r} line without an object payload", number)
                continue
            if self.current is None:  # (the seq before the line: len(self.events))
                self.ordinals.append((ordinal if type(ordinal) is int else number - 1,
                                      len(self.events)))
            try:
                self._line(kind, payload)
            except SHAPE_ERRORS as exc:
                raise shape_error(str(self.path), exc, number) from exc
        if not self.recognised:
            raise ImportInputError(str(self.path), "no Codex rollout lines ({timestamp, type, "
                                   "payload}) in this file", 1)
        self._end()
        meta = self.s.first_meta or {}
        main = self.forks[0] if self.forks else None
        if main is None:
            main = PlannedSession(self.s.sid, "main", self.events)
        else:
            assert self.current is not None
            self.current.events = self.events
        main.created, main.source = max(first_time, 1), self.path.name
        main.original_id = str(meta.get("id") or "")
        main.tool_version = str(meta.get("cli_version") or "")
        main.metadata = {"session_meta": meta} if meta else None
        if self.s.title:
            main.title, main.title_source = self.s.title, f"{FORMAT} thread_name"
        return [main, *self.forks[1:], *([self.current] if self.current else [])]

    def _records(self) -> Iterator[tuple[int, Any]]:
        """:func:`json_lines` with ``_decode_line``: the same lines, numbers, values and
        errors. A line that starts with ``{``, ends with a newline and decodes into the
        envelope with a :class:`_Payload` (every line of a rollout but its metadata) is
        decoded here, in the loop; any other goes through :func:`read_line`, as
        json_lines reads it (a call and a test less per line)."""
        name, report, lenient, max_line = str(self.path), self.report, self.lenient, self.max_line
        progress = PROGRESS.get()
        decode_line, whole = _LINE.decode, _WHOLE
        with open_binary(self.path) as f:
            check_text(self.path, f.peek(4096)[:4096])
            size = self.path.stat().st_size if progress else 0
            readline, limit = f.readline, max_line + 1
            number = 0
            while raw := readline(limit):
                number += 1
                if progress and not number % PROGRESS_EVERY:
                    progress(name, f.tell(), size)
                if raw[-1] == 10 and raw[0] == 123:  # b"\n", b"{": not blank, not cut
                    try:
                        line = decode_line(raw)
                    except (msgspec.DecodeError, RecursionError):
                        pass  # read_line decodes it again, as _decode_line does
                    else:
                        kind = line.type
                        if (line.payload.__class__ is _Payload and kind.__class__ is str
                                and kind not in whole):
                            yield number, line
                            continue
                value = read_line(f, raw, number, name=name, report=report, lenient=lenient,
                                  max_line=max_line, decoder=_decode_line)
                if value is not SKIPPED:
                    yield number, value
            if progress:
                progress(name, size, size)

    def _rollback(self, p: _Payload) -> None:
        """``thread_rolled_back {num_turns}``: Codex drops the last turns from the thread
        and goes on from there. The log keeps them: what follows becomes a fork at the
        start of the first dropped turn, as a rewind does elsewhere."""
        s = self.s
        n = p.num_turns
        if type(n) is not int or not 0 < n <= len(self.turns):
            self.report.note(f"thread_rolled_back of {n!r} turns ({len(self.turns)} recorded): "
                             "not applied", s.line)
            return
        at, before = self.turns[-n]
        del self.turns[-n:]
        if self.current is None:  # the main session ends here
            self.forks.append(PlannedSession(s.sid, "main", self.events))
        else:
            self.current.events = self.events
            self.forks.append(self.current)
        parent = self.forks[-1]
        self.current = PlannedSession(
            stable_uuid(s.time, FORMAT, "fork", s.sid, str(s.line)), "fork", parent=parent.id,
            fork_seq=at, created=s.time)
        self.events = []
        s.assistant, s.tools, s.last_user, s.tokens = None, {}, before, None

    def _line(self, kind: Any, payload: Any) -> None:
        """One line's payload: a :class:`_Payload`, or a dict for the kinds kept whole."""
        if kind == "response_item":  # (the kinds are exclusive: the commonest first)
            self._item(payload)
        elif kind == "event_msg":
            self._event(payload)
        elif kind == "session_meta":
            self._session_meta(payload)
        elif kind == "turn_context":
            self._turn_context(payload)
        elif kind == "inter_agent_communication":
            self._inter_agent(payload)
        elif kind in _NOT_CONVERSATION:
            self.report.note(f"{kind} line: not mapped ({_NOT_CONVERSATION[kind]})", self.s.line)
        elif kind == "compacted":
            if payload.replacement_history is not None:
                self.report.note("compacted replacement_history: not mapped (the items it "
                                 "replaced stay in the log)", self.s.line)
            self._compaction(str(payload.message or ""), payload)
        else:
            self.report.note(f"unknown line type {kind!r}: not mapped", self.s.line)

    def _session_key(self, kind: str | None, payload: Any) -> str:
        if kind == "session_meta" and isinstance(payload, dict) and payload.get("id"):
            return str(payload["id"])
        return self.path.name

    # ------------------------------------------------------------------ emitting

    def add(self, e: Event) -> None:
        s = self.s
        s.count = count = s.count + 1
        ids = self.line_ids
        if ids is None:
            # stable_uuid(time, FORMAT, sid, line, count): the line's prefix hashed once,
            # its state copied for each event's count (BLAKE2b hashes a stream: the same
            # digest as of the joined key), the id's time head made once.
            ids = self.line_ids = (_blake2b(f"{FORMAT}\x1f{s.sid}\x1f{s.line}\x1f".encode(),
                                            digest_size=10).copy, time_head(s.time))
        h = ids[0]()
        h.update(_COUNTS[count] if count < _COUNTED else str(count).encode())
        self.events.append(msgspec.structs.replace(e, id=uuid_text(ids[1], h.digest()),
                                                   time=s.time))

    def _pid(self, *key: str) -> str:
        """``stable_part_id(sid, line, *key)``: the line's prefix hashed once (as add)."""
        parts = self.line_parts
        if parts is None:
            s = self.s
            parts = self.line_parts = _blake2b(f"{s.sid}\x1f{s.line}".encode(),
                                               digest_size=13).copy
        h = parts()
        if key:
            h.update(("\x1f" + "\x1f".join(key)).encode())
        return "prt_" + h.hexdigest()

    def _ids(self, what: str) -> tuple[str, str]:
        s = self.s
        return (stable_uuid(s.time, FORMAT, s.sid, "message", str(s.line), what),
                self._pid(what, str(s.count)))

    def _part_meta(self, extra: dict[str, Any] | None = None) -> dict[str, Any] | None:
        if self.s.meta is None:  # (nearly every part: no session_meta to carry)
            return {"codex": {**extra}} if extra else None
        meta: dict[str, Any] = {}
        if self.s.meta is not None:
            meta["session_meta"], self.s.meta = self.s.meta, None
        if extra:
            meta.update(extra)
        return {"codex": meta} if meta else None

    def _assistant(self) -> str:
        s = self.s
        if s.assistant is None:
            mid, _ = self._ids("assistant")
            cwd = (s.context or {}).get("cwd")
            self.add(ev.MessageStarted(
                message_id=mid, role="assistant", model=s.model, parent_id=s.last_user,
                path=ev.PathInfo(cwd=cwd, root=cwd) if isinstance(cwd, str) and cwd else None))
            s.assistant, s.tokens = mid, None
        return s.assistant

    def _close(self, *, error: ev.MessageError | None = None) -> None:
        s = self.s
        mid = s.assistant
        if mid is None:
            return
        mine = [c for c, (m, _) in s.tools.items() if m == mid]
        if mine and error is None:
            # Cannot complete with a running tool: stays open. Its output may still come
            # (a developer message between a call and its output): what is left running
            # is reported once, at the end of the rollout, as the store holds it.
            return
        for call in mine:
            _, pid = s.tools.pop(call)
            self.add(ev.ToolFailed(message_id=mid, part_id=pid, error="turn aborted",
                                   kind="aborted"))
        self.add(ev.MessageCompleted(message_id=mid, tokens=s.tokens, error=error or s.error))
        s.assistant, s.tokens, s.error = None, None, None

    def _user(self, blocks: list[tuple[str, Any]], *, synthetic: bool = False,
              raw: dict[str, Any] | None = None) -> None:
        self._close()
        s = self.s
        if not synthetic:
            self.turns.append((self._seq(), s.last_user))
        mid, _ = self._ids("user")
        self.add(ev.MessageStarted(message_id=mid, role="user", system=s.instructions))
        for i, (kind, value) in enumerate(blocks):
            pid = self._pid("user", str(i))
            if kind in ("unknown", "refusal"):
                self.report.note(f"user content {value if kind == 'unknown' else kind!r}: "
                                 "not mapped", s.line)
            elif kind == "text":
                self.add(ev.TextAdded(message_id=mid, part_id=pid, text=value,
                                      synthetic=synthetic or value.lstrip().startswith(_ENV),
                                      metadata=self._part_meta(raw)))
                self.add(ev.PartEnded(message_id=mid, part_id=pid))
            else:
                url = str(value)
                mime = url[5:url.index(";")] if url.startswith("data:") and ";" in url else (
                    "image/png" if kind == "image" else "application/octet-stream")
                self.add(ev.FileAdded(message_id=mid, part_id=pid, mime=mime, url=url))
        self.add(ev.MessageCompleted(message_id=mid))
        s.last_user = mid

    # ------------------------------------------------------------------ lines

    def _session_meta(self, payload: dict[str, Any]) -> None:
        s = self.s
        meta = {k: v for k, v in payload.items() if k != "instructions"}
        if s.first_meta is None:
            s.first_meta = meta
        else:
            s.meta = meta
        if isinstance(payload.get("instructions"), str):
            s.instructions = payload["instructions"]
        if isinstance(payload.get("model_provider"), str):
            s.provider = payload["model_provider"]

    def _turn_context(self, payload: dict[str, Any]) -> None:
        s = self.s
        s.context = payload
        for key in sorted(set(payload) - {"cwd", "model"}):
            self.report.note(f"turn_context field {key!r}: not mapped", s.line)
        if isinstance(payload.get("model"), str) and payload["model"]:
            s.model = ev.ModelRef(provider_id=s.provider, model_id=payload["model"])

    def _item(self, p: _Payload) -> None:
        kind = p.type
        s = self.s
        if kind == "message":
            role = p.role
            blocks = _blocks(p.content)
            if role == "assistant":
                mid = self._assistant()
                for i, (k, text) in enumerate(blocks):
                    if k == "unknown":
                        self.report.note(f"assistant content {text!r}: not mapped", s.line)
                        continue
                    pid = self._pid("text", str(i))
                    extra = {"openai": {"item_id": p.id}} if p.id else {}
                    phase = _present(p, ("end_turn", "phase"))
                    self.add(ev.TextAdded(message_id=mid, part_id=pid, text=str(text),
                                          metadata={**extra, **(self._part_meta(phase) or {})}
                                          or None))
                    self.add(ev.PartEnded(message_id=mid, part_id=pid))
                    if k != "text":
                        self.report.note(f"assistant content {k!r}: kept as text", s.line)
            elif role in ("user", "developer", "system"):
                if role != "user":
                    self.report.note(f"a {role} message: imported as a synthetic user text",
                                     s.line)
                self._user(blocks, synthetic=role != "user")
            else:
                self.report.note(f"message role {role!r}: not mapped", s.line)
        elif kind == "reasoning":
            self._reasoning(p)
        elif kind in ("function_call", "custom_tool_call", "local_shell_call",
                      "web_search_call"):
            self._call(kind, p)
        elif kind in ("function_call_output", "custom_tool_call_output",
                      "local_shell_call_output"):
            self._output(p)
        elif kind == "ghost_snapshot":
            commit = p.ghost_commit
            snap = commit.get("id") if isinstance(commit, dict) else None
            if isinstance(snap, str) and snap:
                mid = self._assistant()
                self.add(ev.SnapshotAdded(message_id=mid, part_id=self._ids("snap")[1],
                                          snapshot=snap))
            else:
                self.report.note("ghost_snapshot without a commit id: not mapped", s.line)
        elif kind in ("compaction", "compaction_summary", "context_compaction"):
            self._compaction("", p)  # compaction_summary: an older name
        elif kind == "image_generation_call":
            self._image(p)
        elif kind == "tool_search_call":
            self._call(kind, p)
        elif kind == "tool_search_output":
            self._search_output(p)
        elif kind == "agent_message":
            texts = [str(c.get("text") or "") if c.get("type") == "input_text"
                     else str(c.get("encrypted_content")) for c in p.content or []
                     if isinstance(c, dict) and (c.get("type") == "input_text"
                                                 or _plain(c.get("encrypted_content")))]
            if len(texts) != len(p.content or []):
                self.report.note("an agent_message's encrypted_content: not kept", s.line)
            self._inter_agent(_Payload(id=p.id, author=p.author, recipient=p.recipient,
                                       content="\n".join(texts)))
        else:
            self.report.note(f"response_item type {kind!r}: not mapped", s.line)

    def _reasoning(self, p: _Payload) -> None:
        summary = [str(x.get("text", "")) for x in p.summary or [] if isinstance(x, dict)]
        content = [str(x.get("text", "")) for x in p.content
                   if isinstance(x, dict)] if p.content else []
        openai: dict[str, Any] = {"item_id": p.id or "rs_" + self._pid()[4:], "summary": summary}
        if p.encrypted_content:
            openai["encrypted_content"] = p.encrypted_content
        if content:
            openai["content"] = content
        mid = self._assistant()
        pid = self._pid("reasoning")
        metadata = {"openai": openai}
        if self.s.meta is not None:
            metadata.update(self._part_meta() or {})
        self.add(ev.ReasoningAdded(message_id=mid, part_id=pid, text="\n\n".join(summary),
                                   metadata=metadata))
        self.add(ev.PartEnded(message_id=mid, part_id=pid))

    def _call(self, kind: str, p: _Payload) -> None:
        s = self.s
        call = p.call_id or p.id
        if not isinstance(call, str) or not call:
            call = f"{kind}_{s.line}"
        raw = ""
        if kind == "function_call":
            name, raw = str(p.name or ""), str(p.arguments or "")
            try:
                parsed = json_text(raw) if raw else {}
            except ValueError:
                parsed = None
            if not isinstance(parsed, dict):
                self.report.note("function_call arguments that are not a JSON object: kept raw",
                                 s.line)
                parsed = {}
            args: dict[str, Any] = parsed
        elif kind == "custom_tool_call":
            name, raw = str(p.name or ""), str(p.input or "")
            args = {"input": raw}
        elif kind == "tool_search_call":  # arguments: a JSON value, not a string
            name, value = "tool_search", p.arguments
            args = value if isinstance(value, dict) else {"arguments": value}
            s.search = call
        elif kind == "local_shell_call":
            name, action = "local_shell", p.action
            args = action if isinstance(action, dict) else {}
        else:
            name, action = "web_search", p.action
            args = action if isinstance(action, dict) else {}
        if not name:
            self.report.note(f"a {kind} without a name: not mapped", s.line)
            return
        if call in s.tools:
            self.report.note(f"call id {call!r} repeats: the repeat is not mapped", s.line)
            return
        mid = self._assistant()
        pid = self._pid("call")
        extra = _present(p, ("execution", "id", "namespace", "status", "type"))
        self.add(ev.ToolAdded(message_id=mid, part_id=pid, call_id=call, tool=name, input=args,
                              raw=raw, metadata=self._part_meta(extra)))
        self.add(ev.ToolStarted(message_id=mid, part_id=pid))
        s.tools[call] = (mid, pid)
        if kind == "web_search_call":  # a hosted tool: the rollout keeps no result text
            self.report.note("web_search_call has no output in a rollout: the tool reads "
                             "its status", s.line)
            self._settle(call, f"web search {p.status or 'completed'}", None)

    def _search_output(self, p: _Payload) -> None:
        """``tool_search_output {call_id?, status, execution, tools}``: the tools found,
        as JSON; a missing ``call_id`` answers the last search."""
        call = p.call_id or self.s.search
        if not isinstance(call, str) or call not in self.s.tools:
            self.report.note("a tool_search_output for an unknown call: not mapped", self.s.line)
            return
        tools = p.tools
        meta = _present(p, ("execution", "status"))
        self._settle(call, json.dumps(tools if isinstance(tools, list) else []), meta or None)

    def _image(self, p: _Payload) -> None:
        """``image_generation_call {id, status, revised_prompt?, result}``: a hosted tool
        whose result is the image (base64 PNG): a completed tool part with the image as
        its attachment, or failed, or still running while ``generating``."""
        s = self.s
        call = str(p.id or f"image_generation_call_{s.line}")
        prompt = p.revised_prompt
        status = None if p.status is _UNSET else p.status
        if call in s.tools:
            self.report.note(f"call id {call!r} repeats: the repeat is not mapped", s.line)
            return
        mid = self._assistant()
        pid = self._pid("call")
        self.add(ev.ToolAdded(message_id=mid, part_id=pid, call_id=call, tool="image_generation",
                              input={"revised_prompt": prompt} if isinstance(prompt, str) else {},
                              metadata=self._part_meta({"type": "image_generation_call",
                                                        "status": status})))
        self.add(ev.ToolStarted(message_id=mid, part_id=pid))
        result = p.result
        if status == "failed":
            self.add(ev.ToolFailed(message_id=mid, part_id=pid, error="image generation failed"))
        elif status == "completed" and isinstance(result, str) and result:
            url = result if result.startswith("data:") else f"data:image/png;base64,{result}"
            self.add(ev.ToolCompleted(
                message_id=mid, part_id=pid, output=prompt if isinstance(prompt, str) and prompt
                else "image generated", attachments=[ev.Attachment(
                    part_id=self._pid("image"), mime="image/png",
                    url=url)]))
        else:
            s.tools[call] = (mid, pid)
            self.report.note(f"image_generation_call with status {status!r} and no image: "
                             "left running", s.line)

    def _inter_agent(self, p: _Payload) -> None:
        """A message between agents (``inter_agent_communication`` line, or an
        ``agent_message`` item): it reaches this thread as input, so a user message whose
        text is synthetic (no person typed it), author and recipient in its metadata."""
        text = str(p.content or "")
        hidden = p.encrypted_content
        if not text and _plain(hidden):
            # A spawned agent's task arrives in plain text in this field: it is the
            # child's prompt (dropping it left the child session without its task).
            text = str(hidden)
            self.report.note("an inter-agent message's task in encrypted_content (plain "
                             "text): read as its text", self.s.line)
        elif hidden:
            self.report.note("an inter-agent message's encrypted_content: not kept", self.s.line)
        who = _present(p, ("author", "id", "other_recipients", "recipient",
                                 "trigger_turn"))
        self._user([("text", text)], synthetic=True, raw={"inter_agent": who})

    def _output(self, p: _Payload) -> None:
        call = p.call_id
        if not isinstance(call, str) or call not in self.s.tools:
            self.report.note("an output for an unknown call id: not mapped", self.s.line)
            return
        output = p.output
        text, meta = _output_text(output)
        # An image a tool returned (view_image, an MCP tool): input_image content items.
        images = [i["image_url"] for i in output if isinstance(i, dict) and i.get(
            "type") == "input_image" and isinstance(i.get("image_url"), str)
            and i["image_url"]] if isinstance(output, list) else []
        attachments = [ev.Attachment(part_id=stable_part_id(self.s.sid, call, "image", str(n)),
                                     mime=_image_mime(url), url=url)
                       for n, url in enumerate(images)]
        self._settle(call, text, meta, attachments)

    def _settle(self, call: str, text: str, meta: dict[str, Any] | None,
                attachments: list[ev.Attachment] | None = None) -> None:
        mid, pid = self.s.tools.pop(call)
        if not text and not attachments:
            self.report.note(f"an empty output reads {_EMPTY_OUTPUT!r}", self.s.line)
        self.add(ev.ToolCompleted(message_id=mid, part_id=pid, output=text or _EMPTY_OUTPUT,
                                  metadata={"codex": meta} if meta else None,
                                  attachments=attachments or []))

    def _compaction(self, summary: str, payload: _Payload) -> None:
        self._close()
        s = self.s
        mid, pid = self._ids("compaction")
        self.add(ev.MessageStarted(message_id=mid, role="user"))
        self.add(ev.CompactionAdded(message_id=mid, part_id=pid))
        if summary:
            tid = self._pid("summary")
            self.add(ev.TextAdded(message_id=mid, part_id=tid, text=summary, synthetic=True))
            self.add(ev.PartEnded(message_id=mid, part_id=tid))
        if payload.encrypted_content:
            self.report.note("a compaction's encrypted_content is not kept", s.line)
        self.add(ev.MessageCompleted(message_id=mid))
        s.last_user = mid

    def _event(self, p: _Payload) -> None:
        s = self.s
        kind = p.type
        if kind in _DUPLICATED:
            text = p.text if kind.startswith("agent_reasoning") else p.message
            if isinstance(text, str) and _digest(text) in self.seen:
                return  # the response_item already carries it
            if not isinstance(text, str):
                self.report.note(f"event_msg {kind!r} without text: not mapped", s.line)
            elif kind == "user_message":
                self._user([("text", text)])
            elif kind == "agent_message":
                self._item(_Payload(type="message", role="assistant",
                                    content=[{"type": "output_text", "text": text}]))
            else:
                self._reasoning(_Payload(summary=[{"type": "summary_text", "text": text}]))
        elif kind == "token_count":
            info = p.info
            if p.rate_limits is not None:
                self.report.note("token_count rate_limits: not mapped", s.line)
            if not isinstance(info, dict):
                return  # Codex writes null info before the first response: nothing to map
            last, total = info.get("last_token_usage"), info.get("total_token_usage")
            if total is not None and total == s.last_total:
                return  # the same count again (Codex repeats it with new rate limits)
            s.last_total = total
            if isinstance(last, dict):
                # One token_count per request: a turn of several tool rounds is their sum.
                s.tokens = _tokens(last) if s.tokens is None else _sum(s.tokens, _tokens(last))
        elif kind == "turn_aborted":
            self._close(error=ev.MessageError(kind="aborted",
                                              message=str(p.reason or "aborted")))
        elif kind in _TURN_STARTED:
            s.tasks = True
        elif kind in _TURN_COMPLETE:
            s.tasks = True
            failed = _error_of(p.error) or s.error
            if failed is not None:
                self._assistant()  # a request that failed before any output: its message
            self._close(error=failed)
        elif kind == "error":
            failed = _error_of({"message": p.message, "error": p.error, "status_code":
                                p.status_code, "http_status_code": p.http_status_code})
            if failed is not None:
                s.error = failed  # the turn's message ends with it when the turn ends
            else:
                self.report.note("event_msg 'error' without a message: not mapped", s.line)
        elif kind == "thread_name_updated":
            name = p.thread_name
            if isinstance(name, str) and name.strip():
                s.title = name
        elif kind == "context_compacted":
            pass  # the compacted line or compaction item carries it
        elif kind == "item_completed":
            self._turn_item(p.item)
        elif kind == "thread_rolled_back":
            self._rollback(p)
        else:
            self.report.note(f"event_msg type {kind!r}: not mapped", s.line)

    def _turn_item(self, item: Any) -> None:
        """``event_msg item_completed {item: TurnItem}`` (``"type"``: the variant name).
        Newer ("paginated") rollouts write one per item; most repeat a ``response_item``
        and are skipped when they do. Text a response item does not carry comes in."""
        s = self.s
        kind = item.get("type") if isinstance(item, dict) else None
        if not isinstance(item, dict) or kind not in _TURN_ITEM_TEXT:
            self.report.note(f"event_msg item_completed {kind!r}: not mapped (a response_item "
                             "carries what it shows)", s.line)
            return
        text = "\n".join(_turn_item_texts(item))
        if not text or _digest(text) in self.seen:
            return  # empty, or the response_item already carries it
        if kind == "UserMessage":
            self._user([("text", text)])
        elif kind == "Reasoning":
            self._reasoning(_Payload(summary=[{"type": "summary_text", "text": text}]))
        else:  # AgentMessage, Plan
            mid = self._assistant()
            pid = self._pid("turn_item")
            self.add(ev.TextAdded(message_id=mid, part_id=pid, text=text,
                                  metadata=self._part_meta({"turn_item": kind})))
            self.add(ev.PartEnded(message_id=mid, part_id=pid))

    def _end(self) -> None:
        s = self.s
        if s.assistant is None:
            return
        if s.error is not None:  # an error the rollout recorded, and no turn end after it
            self._close(error=s.error)
            return
        if s.tasks:
            self.report.note("the rollout ends mid-turn: the last assistant message stays open",
                             s.line)
        else:
            # Older rollouts write no task_complete: whether the last turn ended is not
            # recorded. Left open (so a later import of the grown file can continue it).
            self.report.note("an older rollout (no task_complete) does not say whether its "
                             "last turn ended: that assistant message stays open", s.line)
        for call in s.tools:
            self.report.note(f"call {call!r} has no output: left running (unfinished)", s.line)


# Line kinds that carry no conversation, with what they are.
_NOT_CONVERSATION: Final = {
    "inter_agent_communication_metadata": "whether a message between agents starts a turn",
    "world_state": "the AGENTS.md and environment baseline the model was given",
}
_TURN_ITEM_TEXT: Final = frozenset({"UserMessage", "AgentMessage", "Reasoning", "Plan"})


def _turn_item_texts(item: dict[str, Any]) -> list[str]:
    kind = item.get("type")
    if kind == "Plan":
        return [str(item.get("text") or "")]
    if kind == "Reasoning":
        return [str(t) for t in item.get("summary_text") or [] if isinstance(t, str)]
    return [str(c.get("text") or "") for c in item.get("content") or []
            if isinstance(c, dict) and c.get("type") in ("text", "Text")]


_STATE_MARKER: Final = "state"
_LEGACY_ITEMS: Final = frozenset({"message", "reasoning", "function_call",
                                  "function_call_output", "custom_tool_call",
                                  "custom_tool_call_output", "local_shell_call",
                                  "local_shell_call_output", "web_search_call"})


def _envelope(record: dict[str, Any]) -> tuple[str | None, Any]:
    """A line's kind and payload. Rollouts before the ``{timestamp, type, payload}``
    envelope (codex-rs up to about 0.2x, still on users' disks) wrote a bare header
    ``{id, timestamp, instructions, git}``, then each Responses item bare, with
    ``{record_type: "state"}`` markers between turns; they read as the same kinds."""
    kind = record.get("type")
    if "payload" in record and isinstance(kind, str):
        return kind, record["payload"]
    if "record_type" in record and kind is None:
        return _STATE_MARKER, None
    if kind is None and "id" in record and "timestamp" in record:
        return "session_meta", record
    if isinstance(kind, str) and kind in _LEGACY_ITEMS:
        return "response_item", record
    return None, record.get("payload")


class _Seen(msgspec.Struct):
    """What pass one reads of a response item: its kind and where its visible text is.
    The rest (a call's output, encrypted reasoning: most of a rollout's bytes) is
    skipped by the decoder, not built."""

    type: Any = None
    content: Any = None
    summary: Any = None


class _SeenLine(msgspec.Struct):
    type: Any = None
    payload: _Seen | None = None


_PASS_ONE: Final = msgspec.json.Decoder(_SeenLine)


def _visible_digests(path: Path, max_line: int) -> set[bytes]:
    """Pass one: the digests (:func:`_digest`) of the visible texts of response items;
    other lines are not even decoded."""
    seen: set[bytes] = set()
    add = seen.add
    with open_binary(path) as f:
        while raw := f.readline(max_line + 1):
            if b"response_item" not in raw:
                continue
            try:
                line = _PASS_ONE.decode(raw)
            except (msgspec.DecodeError, RecursionError):
                line = None  # another shape, or no JSON: read as pass two reads it
            if line is not None:
                if line.type != "response_item" or line.payload is None:
                    continue
                payload: Any = line.payload
            else:
                try:
                    record = decode(raw)
                except msgspec.DecodeError:
                    record = mended_line(raw)  # a lone surrogate, as pass two reads it
                    if record is None:
                        continue  # pass two reports it
                if not isinstance(record, dict) or record.get("type") != "response_item":
                    continue
                payload = record.get("payload")
            try:
                texts = _visible(payload)
            except SHAPE_ERRORS:
                continue  # pass two names the line
            for text in texts:  # _digest, inlined
                add(_blake2b(text.encode(), digest_size=12).digest())
            if len(raw) > max_line and not raw.endswith(b"\n"):
                while chunk := f.readline(1 << 20):
                    if chunk.endswith(b"\n"):
                        break
    return seen


def _blocks(content: Any) -> list[tuple[str, Any]]:
    out: list[tuple[str, Any]] = []
    for block in content if isinstance(content, list) else []:
        if not isinstance(block, dict):
            continue
        kind = block.get("type")
        if kind in ("input_text", "output_text", "text"):
            out.append(("text", str(block.get("text") or "")))
        elif kind == "input_image":
            out.append(("image", block.get("image_url") or ""))
        elif kind == "refusal":
            out.append(("refusal", str(block.get("refusal") or "")))
        elif kind == "input_audio":
            out.append(("audio", block.get("audio_url") or ""))
        else:
            out.append(("unknown", str(kind)))
    return out


def _visible(payload: Any) -> list[str]:
    """The visible texts of a response item's payload (a dict, or pass one's view)."""
    if isinstance(payload, dict):
        payload = _Seen(payload.get("type"), payload.get("content"), payload.get("summary"))
    if not isinstance(payload, _Seen):
        return []
    if payload.type == "message":
        return [str(t) for k, t in _blocks(payload.content) if k == "text"]
    if payload.type == "reasoning":  # summaries, and the raw content when kept
        return [str(x.get("text", "")) for value in (payload.summary, payload.content)
                for x in value or [] if isinstance(x, dict)]
    return []


def _image_mime(url: str) -> str:
    """A ``data:`` URL's own mime type; any other URL an image of unknown kind."""
    if url.startswith("data:"):
        head = url[5:].split(",", 1)[0].split(";", 1)[0]
        if "/" in head:
            return head
    return "image/*"


def _output_text(output: Any) -> tuple[str, dict[str, Any] | None]:
    """Every generation: a JSON string ``{output, metadata}`` (0.4x-0.5x), plain text, or
    (newer) a list of content items (``input_text`` joined; images kept in metadata)."""
    if isinstance(output, dict):
        inner = output.get("content") or output.get("output") or ""
        if isinstance(inner, list):  # content items inside an object: their text
            inner = _output_text(inner)[0]
        # Never a Python repr as the output: other values are JSON (the raw is kept).
        return (inner if isinstance(inner, str) else json.dumps(inner)), {"raw": output}
    if isinstance(output, list):
        texts = [str(i.get("text") or "") for i in output
                 if isinstance(i, dict) and i.get("type") in ("input_text", "output_text")]
        others = [i for i in output if not (isinstance(i, dict) and i.get("type") in (
            "input_text", "output_text"))]
        return "\n".join(texts), {"content_items": others} if others else None
    if not isinstance(output, str):
        return "", None
    if output.startswith("{"):
        try:
            parsed = json_text(output)
        except ValueError:
            parsed = None
        if isinstance(parsed, dict) and "output" in parsed:
            meta = parsed.get("metadata")
            text = parsed["output"]
            return (text if isinstance(text, str) else json.dumps(text),
                    {"metadata": meta} if meta is not None else None)
    return output, None


def json_text(text: str) -> Any:
    """:func:`loads` of a JSON text a rollout holds in a string (a call's arguments, a
    0.4x output), by msgspec's decoder where it reads the text as ``json.loads`` does:
    it refuses what the two read differently (a lone surrogate, NaN, a number out of
    the double range, nesting too deep), and :func:`loads` reads those."""
    try:
        return msgspec.json.decode(text)
    except (msgspec.DecodeError, UnicodeEncodeError, RecursionError):
        return loads(text)


def _count(value: Any) -> int:
    return value if type(value) is int and value >= 0 else 0  # not a bool


def _tokens(usage: dict[str, Any]) -> ev.Tokens:
    get = usage.get
    return ev.Tokens(input=_count(get("input_tokens")), output=_count(get("output_tokens")),
                     reasoning=_count(get("reasoning_output_tokens")),
                     cache=ev.CacheTokens(read=_count(get("cached_input_tokens"))))


def _plain(value: Any) -> bool:
    """Whether an ``encrypted_content`` value is plain text (words and spaces), which
    Codex writes there for a spawned agent's task, rather than an opaque blob."""
    if not isinstance(value, str) or not value.strip():
        return False
    flat = value.replace("\n", " ").replace("\t", " ")
    return " " in flat and flat.isprintable()


def _sum(a: ev.Tokens, b: ev.Tokens) -> ev.Tokens:
    return ev.Tokens(input=a.input + b.input, output=a.output + b.output,
                     reasoning=a.reasoning + b.reasoning,
                     cache=ev.CacheTokens(read=a.cache.read + b.cache.read,
                                          write=a.cache.write + b.cache.write))


def _error_of(value: Any) -> ev.MessageError | None:
    """An API error as Codex records it: a message string, or ``{message, ...}``."""
    if isinstance(value, str) and value:
        return ev.MessageError(kind="api", message=value)
    if isinstance(value, dict):
        text = value.get("message") or value.get("error")
        if isinstance(text, str) and text:
            status = value.get("status_code") or value.get("http_status_code")
            return ev.MessageError(kind="api", message=text,
                                   status_code=status if type(status) is int else None)
    return None


def plan_codex(path: Path, *, lenient: bool = False, max_line: int = MAX_LINE) -> Plan:
    """One rollout file, or every ``rollout-*.jsonl`` under a directory."""
    files = sorted(path.rglob("rollout-*.jsonl")) if path.is_dir() else [path]
    return plan_codex_files(files, path, lenient=lenient, max_line=max_line)


@collector_paused()  # builds only: see engine.collector
def plan_codex_files(files: list[Path], root: Path, *, lenient: bool = False,
                     max_line: int = MAX_LINE) -> Plan:
    """Rollouts read together, so a spawned agent's thread finds its parent's."""
    report = ImportReport(str(root), FORMAT)
    rollouts = [_Rollout(f, report, lenient, max_line) for f in files]
    read = [(r, r.run()) for r in rollouts]
    sessions = [s for _, found in read for s in found]
    _link_subagents(sessions, report)
    _link_forks(read, report)
    return seal(Plan(report, sorted(sessions, key=lambda s: (s.kind == "child",
                                                              s.kind == "fork"))))


def _link_forks(read: list[tuple[_Rollout, list[PlannedSession]]],
                report: ImportReport) -> None:
    """``codex exec fork`` writes a rollout of the new turns only, whose ``session_meta``
    names the thread it forked (``forked_from_id``) and where its inherited history ends
    (``forked_from_ordinal_exclusive``: the items of the parent's rollout before that
    ordinal). With the parent's rollout in the import it is a fork sharing that prefix;
    alone, its own session, reported."""
    mains = {found[0].original_id: (rollout, found) for rollout, found in read
             if found and found[0].original_id}
    for _, found in read:
        s = found[0] if found else None
        meta = (s.metadata or {}).get("session_meta") if s is not None else None
        parent = meta.get("forked_from_id") if isinstance(meta, dict) else None
        if s is None or s.kind != "main" or not isinstance(parent, str) or not parent:
            continue
        end = meta.get("forked_from_ordinal_exclusive") if isinstance(meta, dict) else None
        if parent not in mains or len(found) > 1 or len(mains[parent][1]) > 1:
            report.note("an exec fork's rollout whose parent thread is not in the import (or "
                        "either was rolled back): imported as its own session", s.source)
            continue
        owner, (head, *_) = mains[parent]
        seqs = [seq for ordinal, seq in owner.ordinals
                if type(end) is int and ordinal >= end]
        s.kind, s.parent = "fork", head.id
        s.fork_seq = seqs[0] if seqs else len(head.events)


def _parent_thread(meta: dict[str, Any]) -> str | None:
    """The thread that spawned this one: ``source: {subagent: {thread_spawn:
    {parent_thread_id, depth, agent_path, agent_nickname, agent_role}}}``."""
    source = meta.get("source")
    sub = source.get("subagent") if isinstance(source, dict) else None
    spawn = sub.get("thread_spawn") if isinstance(sub, dict) else None
    parent = spawn.get("parent_thread_id") if isinstance(spawn, dict) else None
    return parent if isinstance(parent, str) and parent else None


def _link_subagents(sessions: list[PlannedSession], report: ImportReport) -> None:
    """A spawned agent's rollout is a child session of its parent thread's, when that
    rollout is in the import too."""
    mains = {s.original_id: s.id for s in sessions if s.kind == "main" and s.original_id}
    for s in sessions:
        meta = (s.metadata or {}).get("session_meta")
        parent = _parent_thread(meta) if isinstance(meta, dict) and s.kind == "main" else None
        if parent is None:
            continue
        if parent in mains:
            s.kind, s.parent = "child", mains[parent]
        else:
            report.note("a spawned agent's rollout whose parent thread is not in the import: "
                        "imported as its own session", s.source)
