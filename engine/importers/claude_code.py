"""Claude Code JSONL transcripts (``~/.claude/projects/<cwd>/<sessionId>.jsonl``) as sessions.

Order comes from the ``parentUuid`` DAG, not from timestamps or line order:

- lines of one assistant turn (one per content block) share ``message.id`` and
  become one assistant message; it completes when the conversation moves on
  with every tool settled, or stays open (visibly unfinished) when it does not;
- a node with two message children (a rewind) forks: the earliest child
  continues the session, each later one becomes a convlog fork sharing the
  prefix;
- a resumed session replays the prefix with the same ``uuid``s: they dedupe;
- ``isSidechain`` chains (inline, or ``subagents/agent-<id>.jsonl``) become child
  sessions, linked from the spawning Task tool part's metadata;
- a ``compact_boundary`` (``parentUuid: null`` + ``logicalParentUuid``) becomes a
  user message with a compaction part, where the logical parent left off;
- tool results pair with their ``tool_use`` by id, in whatever order they come.

Records that carry no message (``progress``, ``file-history-snapshot``,
``queue-operation``, ``attachment``, ``last-prompt``, unknown types) keep the
DAG connected and are counted in the report with their line numbers.
"""

from __future__ import annotations

import base64
import copy
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Final

import attrs
import msgspec

from engine import events as ev
from engine.collector import collector_paused
from engine.events import Event
from engine.importers.base import (
    MAX_LINE,
    SHAPE_ERRORS,
    ImportReport,
    Plan,
    PlannedSession,
    json_lines,
    loads,
    ms_of,
    seal,
    shape_error,
    stable_part_id,
    stable_uuid,
)

FORMAT: Final = "claude-code"
_PERSISTED: Final = "<persisted-output>"
_SAVED_TO: Final = re.compile(r"Full output saved to: (\S+)")
_API_STATUS: Final = re.compile(r"^API Error: (\d{3})\b")
_MESSAGE_TYPES: Final = frozenset({"user", "assistant"})
# The session's name: a /rename beats a generated title, which beats a summary.
_TITLE_TYPES: Final = {"custom-title": "customTitle", "ai-title": "aiTitle"}
_PASSIVE_TYPES: Final = frozenset({"progress", "file-history-snapshot", "queue-operation",
                                   "attachment", "last-prompt"})
# Envelope fields the importer reads; every other one rides in part metadata.
_READ: Final = frozenset({"uuid", "parentUuid", "logicalParentUuid", "isSidechain", "type",
                          "timestamp", "message", "toolUseResult", "isMeta",
                          "isCompactSummary", "sessionId", "subtype", "content",
                          "compactMetadata", "level"})
_USAGE: Final = frozenset({"input_tokens", "output_tokens", "cache_read_input_tokens",
                           "cache_creation_input_tokens"})
_TASK_TOOLS: Final = frozenset({"Task", "Agent"})
_EMPTY_OUTPUT: Final = "(no output)"


# The shapes read, declared once (an Anthropic Messages object inside Claude Code's line
# envelope). Lenient as Claude Code's own reader: unknown fields are ignored (every
# envelope field not read rides whole in part metadata, from the line's dict), missing
# ones default, ``content`` is a string or a list of blocks. A field of another type
# than Claude Code writes is a shape error naming its path (msgspec's ValidationError:
# ``at `$.message.content[2].input```). What is given back whole (a block convlog does
# not model, a tool_result's content, ``toolUseResult``) is read from the line's dict.
# ``gc=False``: what JSON decodes holds no cycles, and a transcript's nodes stay alive
# through the whole import (tracked, every collection would walk them again).


class _Block(msgspec.Struct, tag_field="type", gc=False):
    """A content block of a kind convlog maps, each kind reading its own fields (a list
    of such blocks is read in one call, the kind from ``type``)."""

    @property
    def type(self) -> str:
        return str(self.__struct_config__.tag)


class _Other(msgspec.Struct, gc=False):
    """A block of a kind convlog does not map (kept whole: its fields of any shape), or
    of no type (reported)."""

    type: str | None = None


class _Text(_Block, tag="text"):
    text: str | None = None
    citations: Any = None


class _Thinking(_Block, tag="thinking"):
    thinking: str | None = None
    signature: str | None = None


class _Redacted(_Block, tag="redacted_thinking"):
    data: str | None = None


class _ToolUse(_Block, tag="tool_use"):
    id: str | None = None
    name: str | None = None
    input: Any = None  # an object or null (checked by _blocks_of: not copied)


class _ToolResult(_Block, tag="tool_result"):
    tool_use_id: str | None = None
    content: Any = None  # a string or blocks of any tool's making: kept whole, read leniently
    is_error: bool | None = None


class _File(_Block):
    """An image or document block (its source read as the old Messages API shapes)."""

    source: Any = None
    title: Any = None


class _Image(_File, tag="image"):
    pass


class _Document(_File, tag="document"):
    pass


class _Source(msgspec.Struct, gc=False):
    type: Any = None
    media_type: Any = None
    data: Any = ""
    url: Any = None


class _Inner(msgspec.Struct, gc=False):
    """A block inside a tool_result (any tool's making, MCP servers too): read leniently."""

    type: Any = None
    text: Any = ""
    tool_name: Any = None
    source: Any = None


# The kinds of block convlog maps; a block of another kind is kept whole (its fields of
# any shape), one that is no object is reported.
_KNOWN: Final = (_Text, _Thinking, _Redacted, _ToolUse, _ToolResult, _Image, _Document)
_KINDS: Final[dict[str, type[_Block]]] = {str(k.__struct_config__.tag): k for k in _KNOWN}


class _Known(msgspec.Struct, array_like=True, gc=False):
    """A content list of only known kinds (a Struct: msgspec keeps its type's reader
    built, where a bare ``list[Union]`` would be rebuilt on every call)."""

    blocks: list[_Text | _Thinking | _Redacted | _ToolUse | _ToolResult | _Image | _Document]


class _Message(msgspec.Struct, gc=False):
    id: str | None = None
    model: str | None = None
    stop_reason: str | None = None
    # Checked by _blocks_of, not declared: a declared container is converted into a copy,
    # and a transcript's copies stay alive beside the line (twice the objects for the
    # collector to walk: the read took twice as long).
    usage: Any = None  # an object or null
    content: Any = None  # a string, a list of blocks or null


_EMPTY: Final = _Message()


class _Compact(msgspec.Struct, gc=False):
    trigger: str | None = None


class _Any(msgspec.Struct, gc=False):
    """What is read of every line, before its kind is known. Any shape: a record type
    convlog does not map (a newer version's metadata record) may hold anything."""

    type: Any = None
    uuid: Any = None
    parentUuid: Any = None  # noqa: N815 - Claude Code's spelling
    subtype: Any = None
    sessionId: Any = None  # noqa: N815
    message: Any = None
    attachment: Any = None  # many kinds; a queued_command is read as _Queued
    # summary, custom-title and ai-title records
    leafUuid: Any = None  # noqa: N815
    summary: Any = None
    customTitle: Any = None  # noqa: N815
    aiTitle: Any = None  # noqa: N815


class _Line(msgspec.Struct, gc=False):
    """The envelope of a line that carries a message (or a compaction boundary)."""

    type: str | None = None
    uuid: str | None = None
    parentUuid: str | None = None  # noqa: N815 - Claude Code's spelling
    logicalParentUuid: str | None = None  # noqa: N815
    isSidechain: bool | None = None  # noqa: N815
    subtype: str | None = None
    sessionId: str | None = None  # noqa: N815
    timestamp: str | None = None
    cwd: str | None = None
    version: str | None = None
    agentId: str | None = None  # noqa: N815
    teamName: str | None = None  # noqa: N815
    agentName: str | None = None  # noqa: N815
    isMeta: bool | None = None  # noqa: N815
    isCompactSummary: bool | None = None  # noqa: N815
    isApiErrorMessage: bool | None = None  # noqa: N815
    compactMetadata: _Compact | None = None  # noqa: N815
    toolUseResult: Any = None  # noqa: N815 - a string or any tool's object, kept whole
    message: _Message = msgspec.field(default_factory=lambda: _EMPTY)


class _Queued(msgspec.Struct, gc=False):
    type: Any = None
    prompt: Any = None  # text, or text and image blocks


class _Spawned(msgspec.Struct, gc=False):
    """What a tool's typed result says of the agent it spawned."""

    status: Any = None
    agent_id: Any = None
    agentId: Any = None  # noqa: N815


_Read = _Block | _Other  # a block read (as written, it is the same index of the content)
_JSON_TYPES: Final = {str: "str", int: "int", float: "float", bool: "bool", list: "array",
                      dict: "object", type(None): "null"}


def _expect(value: Any, kinds: tuple[type, ...], expected: str, at: str) -> None:
    """What msgspec says of a declared field, for the containers read uncopied."""
    if not isinstance(value, kinds):
        raise msgspec.ValidationError(
            f"Expected `{expected}`, got `{_JSON_TYPES.get(type(value), 'value')}` - at `{at}`")
_AT: Final = "at `$"


def _blocks_of(message: _Message) -> list[_Read]:
    """A message's blocks, each read as its kind (a block of a kind convlog does not map
    only by its type); a shape error names its path from the line
    (``$.message.content[2].input``)."""
    # (the checks inline, a call only to refuse: this runs for most lines)
    if message.usage is not None and not isinstance(message.usage, dict):
        _expect(message.usage, (dict,), "object | null", "$.message.usage")
    content = message.content
    if isinstance(content, str):
        return [_Text(text=content)]
    if not content:
        if content is not None and not isinstance(content, list):
            _expect(content, (list,), "str | array | null", "$.message.content")
        return []
    if not isinstance(content, list):
        _expect(content, (list,), "str | array | null", "$.message.content")
    try:  # the common case: every block of a kind convlog maps, read in one call
        blocks: list[_Read] = list(msgspec.convert((content,), _Known).blocks)
    except msgspec.ValidationError:
        blocks = []  # a block of another kind (or of a wrong shape: named below)
    if not blocks:
        for i, block in enumerate(content):
            kind = block.get("type") if isinstance(block, dict) else None
            read = _KINDS.get(kind) if isinstance(kind, str) else None
            if read is None:
                blocks.append(_Other(type=kind if isinstance(kind, str) else None))
                continue
            try:
                blocks.append(msgspec.convert(block, read))
            except msgspec.ValidationError as exc:
                raise msgspec.ValidationError(
                    str(exc).replace(_AT, f"{_AT}.message.content[{i}]", 1)) from None
    for i, b in enumerate(blocks):
        if type(b) is _ToolUse and b.input is not None and not isinstance(b.input, dict):
            _expect(b.input, (dict,), "object | null", f"$.message.content[{i}].input")
    return blocks


def _raws(node: _Node) -> list[Any]:
    """The message's blocks as written (what is kept whole), index for index."""
    content = node.head.message.content
    return content if isinstance(content, list) else [None] if isinstance(content, str) else []


@attrs.define
class _Node:
    """One message-bearing line (user, assistant, or a compaction boundary)."""

    uuid: str
    parent: str | None  # the nearest message-bearing ancestor
    raw_parent: str | None
    kind: str  # "user", "assistant" or "compact"
    line: int | str  # "file:line" when the import reads several files
    time: int
    record: dict[str, Any]  # the line as written: what is kept whole comes from here
    head: _Line  # the same line, read
    blocks: list[_Read]  # its message's content blocks, read
    sidechain: bool
    queued: bool = False  # a queued_command attachment read as the user's prompt
    file: int = 0  # which file of the import it was read from
    agent: str | None = None  # the subagent file's id (agent-<id>.jsonl), None in a session file
    previous: str | None = None  # the message line before it in its file (same sessionId)
    index: int = 0  # file order (across files: the order they were read)


@attrs.define
class _Tool:
    message_id: str
    part_id: str
    name: str


@attrs.define
class _Turn:
    """What is open while a chain is walked: copied when a fork branches off."""

    assistant: str | None = None  # the open assistant message id
    source_id: str | None = None  # its Anthropic message.id
    last_time: int = 1
    finish: str | None = None
    tokens: ev.Tokens | None = None
    error: ev.MessageError | None = None  # an isApiErrorMessage turn
    tools: dict[str, _Tool] = attrs.field(factory=dict)  # unsettled tools by call id
    open_tools: dict[str, set[str]] = attrs.field(factory=dict)  # message id -> call ids
    waiting: list[str] = attrs.field(factory=list)  # open messages with unsettled tools
    early: dict[str, tuple[_ToolResult, _Node]] = attrs.field(factory=dict)
    last_user: str | None = None
    started: set[str] = attrs.field(factory=set)  # assistant message ids begun on this branch


class _Reader:
    def __init__(self, report: ImportReport, lenient: bool, max_line: int) -> None:
        self.report = report
        self.lenient = lenient
        self.max_line = max_line
        self.nodes: dict[str, _Node] = {}
        self.links: dict[str, str | None] = {}  # any uuid -> its parentUuid (for passive lines)
        self.order: list[str] = []  # message nodes in file order
        self.titles: dict[str, str] = {}  # leafUuid -> summary
        self.named: dict[str, dict[str, str]] = {}  # sessionId -> custom-title / ai-title
        self.last_file = ""  # the name of the file read last (the only one, usually)
        self.agent_meta: dict[str, dict[str, Any]] = {}  # agent id -> its .meta.json
        self.dirs: list[Path] = []  # where the transcripts are (tool-results/ is beside them)
        self.files = 0  # files read so far
        # The last message line of each (file, sessionId, sidechain): where a line whose
        # parent is missing attaches.
        self.last_of: dict[tuple[int, str, bool], str] = {}
        # Sessions whose transcript a compaction summary names ("read the full transcript
        # at: .../<id>.jsonl") under another sessionId: the file copies that session's
        # lines (a --fork-session of a compacted session), by the id it names.
        self.copied_from: dict[str, int | str] = {}
        self.session_ids: set[str] = set()

    def read(self, path: Path, *, several: bool = False) -> None:
        if path.name == "journal.jsonl" and "workflows" in path.parts:
            # A workflow's {type: started|result, key, agentId} log: which agents ran and
            # what they returned, which their own transcripts hold.
            self.report.note("a workflow journal: not a transcript, not imported (its "
                             "agents' transcripts are)", path.name)
            return
        agent = path.stem.removeprefix("agent-") if path.stem.startswith("agent-") else None
        label = path.name
        if path.parent not in self.dirs:
            self.dirs.append(path.parent)
        if agent is None:
            self.last_file = path.name
        else:  # agent-<id>.meta.json: the subagent's type, description, model, depth
            meta = path.with_name(path.stem + ".meta.json")
            try:
                found = loads(meta.read_text()) if meta.is_file() else None
            except (OSError, ValueError):
                found = None
                self.report.note("a subagent .meta.json that is not JSON: not mapped",
                                 meta.name)
            if isinstance(found, dict):
                self.agent_meta[agent] = found
        if path.is_relative_to(self.report.source) and str(path) != self.report.source:
            label = str(path.relative_to(self.report.source))  # subagents/agent-x.jsonl
        self.files += 1
        for number, record in json_lines(path, self.report, lenient=self.lenient,
                                          max_line=self.max_line):
            try:
                self._record(record, f"{label}:{number}" if several else number, agent)
            except SHAPE_ERRORS as exc:
                if not self.lenient:
                    raise shape_error(str(path), exc, number) from exc
                self.report.skipped.append((number, str(shape_error(str(path), exc, number))))

    def _record(self, record: dict[str, Any], line: int | str, agent: str | None) -> None:
        kind = record.get("type")
        queued = None
        if kind in _MESSAGE_TYPES and isinstance(record.get("message"), dict):
            # Most lines: the envelope and the message read in one pass.
            head = msgspec.convert(record, _Line)
            if not head.uuid or head.uuid in self.links:
                self._placed(head.uuid, kind, line)  # reports it
                return
            message_kind = kind
        else:
            seen = msgspec.convert(record, _Any)
            if not self._placed_any(seen, line):
                return
            if kind == "system" and seen.subtype == "compact_boundary":
                message_kind = "compact"
            elif kind == "attachment" and (queued := _queued(seen.attachment)) is not None:
                # A prompt typed while the agent worked (2.1.2xx) is recorded only as this
                # attachment: it is the person's message, images and all.
                record = {**record, "message": {"role": "user", "content": queued},
                          "queued": True}
                message_kind = "user"
                self.report.note("queued_command attachment: read as the user's prompt", line)
            else:
                what = (f"system record subtype {seen.subtype!r}" if kind == "system"
                        else f"record type {kind!r}" if kind in _PASSIVE_TYPES
                        else f"unknown record type {kind!r}")
                self.report.note(f"{what}: not mapped (kept in the DAG order only)", line)
                parent = seen.parentUuid
                self.links[seen.uuid] = parent if isinstance(parent, str) else None
                return
            head = msgspec.convert(record, _Line)
        uuid = head.uuid
        assert uuid is not None  # placed
        blocks = _blocks_of(head.message)
        parent = head.parentUuid
        if message_kind == "compact":
            parent = parent or head.logicalParentUuid
        self.links[uuid] = parent
        own = head.sessionId
        if own is not None:
            self.session_ids.add(own)
            if head.isCompactSummary is True and agent is None:
                named = _TRANSCRIPT_AT.search(_text_of(blocks))
                if named and named.group(1) != own:
                    self.copied_from.setdefault(named.group(1), line)
        if agent is not None and "agentId" not in record:
            record["agentId"] = head.agentId = agent
        sidechain = bool(head.isSidechain) or agent is not None
        key = (self.files, own or "", sidechain)
        self.nodes[uuid] = _Node(uuid, None, parent, message_kind, line, ms_of(head.timestamp),
                                 record, head, blocks, sidechain,
                                 queued=queued is not None,
                                 file=self.files, agent=agent, previous=self.last_of.get(key),
                                 index=len(self.order))
        self.last_of[key] = uuid
        self.order.append(uuid)

    def _placed(self, uuid: Any, kind: Any, line: int | str) -> bool:
        """Whether a line with ``uuid`` takes a place in the DAG (a line without one,
        or one seen before, does not)."""
        if not isinstance(uuid, str) or not uuid:
            self.report.note(f"record type {kind!r} without a uuid: not placed", line)
            return False
        if uuid in self.links:
            self.report.note("a uuid seen before (a resumed session's replayed prefix): "
                             "deduplicated", line)
            return False
        return True

    def _placed_any(self, seen: _Any, line: int | str) -> bool:
        """A line of another type than user or assistant: the titles are kept, the rest
        is placed (or reported)."""
        kind = seen.type
        if kind == "summary":
            if isinstance(seen.leafUuid, str) and isinstance(seen.summary, str):
                self.titles[seen.leafUuid] = seen.summary
            self.report.note("summary record: kept as the session title only", line)
            return False
        if kind in _TITLE_TYPES:  # /rename and the generated title: {type, <field>, sessionId}
            title = seen.customTitle if kind == "custom-title" else seen.aiTitle
            if isinstance(title, str) and title:
                self.named.setdefault(str(seen.sessionId or ""), {})[kind] = title
                self.report.note(f"{kind} record: kept as the session title", line)
            else:
                self.report.note(f"{kind} record without a title: not mapped", line)
            return False
        if kind == "agent-name":
            self.report.note("agent-name record (the agent's display name): not mapped", line)
            return False
        return self._placed(seen.uuid, kind, line)

    def resolve(self) -> None:
        """Each message node's parent: the nearest message-bearing ancestor."""
        for node in self.nodes.values():
            up, seen, dangling = node.raw_parent, 0, False
            while up is not None and up not in self.nodes:
                if up not in self.links or seen > len(self.links):
                    dangling = True  # the links end at a uuid no line of the input has
                    break
                up = self.links[up]
                seen += 1
            if node.agent is not None and up is not None and not dangling and \
                    self.nodes[up].file != node.file:
                # A subagent file's lines (a compaction agent's too) may name lines of
                # the main file: the file is a child session of its own, never a branch
                # of the main conversation.
                dangling = True
            if dangling:
                up = node.previous
                if node.agent is not None and up is None:
                    self.report.note("a subagent file's first line names a line of another "
                                     "file: the subagent is a child session", node.line)
                else:
                    self.report.note(
                        "parentUuid names no line of its file (a Stop hook's line, a "
                        "compaction): attached to the line before it in the file"
                        if up is not None else "parentUuid names no line of the input: "
                        "the file's first line starts its session", node.line)
            node.parent = up if up in self.nodes else None
        self._break_cycles()

    def _break_cycles(self) -> None:
        """Lines whose parents lead back to themselves (a damaged or hand-edited file)
        reach no root, and the walk from the roots would drop them all: the cycle's
        earliest line in file order starts a new chain instead."""
        index = {uuid: i for i, uuid in enumerate(self.order)}
        done: set[str] = set()
        for uuid in self.order:
            path: list[str] = []
            seen: set[str] = set()
            up: str | None = uuid
            while up is not None and up not in done and up not in seen:
                path.append(up)
                seen.add(up)
                up = self.nodes[up].parent
            if up is not None and up in seen:
                first = min(path[path.index(up):], key=index.__getitem__)
                self.nodes[first].parent = None
                self.report.note("parentUuid forms a cycle: its earliest line starts a new "
                                 "chain", self.nodes[first].line)
            done.update(path)


class _Builder:
    """Walks the message tree into planned sessions."""

    def __init__(self, reader: _Reader, report: ImportReport) -> None:
        self.reader = reader
        self.report = report
        self.children: dict[str | None, list[_Node]] = {}
        for uuid in reader.order:
            node = reader.nodes[uuid]
            self.children.setdefault(node.parent, []).append(node)
        for kids in self.children.values():
            # The earliest child continues the session, later ones (rewinds) fork; file
            # order breaks ties. Stable for any line order a copy or a merge produces.
            kids.sort(key=lambda n: n.time)
        self.sessions: list[PlannedSession] = []
        self.child_of_prompt: dict[str, str] = {}  # sidechain root prompt -> child session
        self.child_of_agent: dict[str, str] = {}
        self.visited: set[str] = set()
        # A Claude Code sessionId -> the main session its lines were walked into (a
        # directory of several sessions holds the subagents of each).
        self.main_of: dict[str, str] = {}

    def build(self) -> list[PlannedSession]:
        roots = self.children.get(None, [])
        mates = {r.uuid: mate for r in roots if (mate := _teammate(r.head)) is not None}
        for root in roots:  # child sessions first get their ids, so Task parts can link
            if root.uuid in mates:  # an Agent Teams teammate: the lead's Agent call names it
                self.child_of_agent.setdefault(
                    mates[root.uuid], stable_uuid(root.time, FORMAT, "session", root.uuid))
            if root.sidechain:
                sid = stable_uuid(root.time, FORMAT, "session", root.uuid)
                prompt = _text_of(root.blocks)
                if prompt:
                    self.child_of_prompt.setdefault(prompt, sid)
                if root.head.agentId is not None:
                    self.child_of_agent.setdefault(root.head.agentId, sid)
        mains = [r for r in roots if not r.sidechain and r.uuid not in mates]
        spawned = self._teammates_spawned() if mates else {}
        for root in mains + [r for r in roots if r.sidechain or r.uuid in mates]:
            sid = stable_uuid(root.time, FORMAT, "session", root.uuid)
            kind = "child" if root.sidechain else "main"
            parent = None
            if root.sidechain and mains:  # the session it ran in: its sessionId names it
                # A workflow agent's sessionId reads "<session>#agent-<id>".
                main = str(root.head.sessionId).split("#", 1)[0]
                parent = self.main_of.get(main) or self.sessions[0].id
            elif root.uuid in mates:
                # A teammate's transcript is a session file of its own; the lead's
                # Agent call that spawned it names it as "<name>@<team>".
                parent = self.main_of.get(spawned.get(mates[root.uuid], ""))
                if parent is not None:
                    kind = "child"
                else:
                    self.report.note(f"an Agent Teams teammate ({mates[root.uuid]}) whose "
                                     "lead's transcript is not in the input: imported as "
                                     "a session of its own", root.line)
            planned = PlannedSession(sid, kind, created=max(root.time, 1), parent=parent,
                                     **self._origin(root))
            self._walk(planned, root, _Turn(last_time=max(root.time, 1)))
        by_id = {s.id: s for s in self.sessions}
        for original, planned_id in self.main_of.items():
            names = self.reader.named.get(original, {})
            kind = "custom-title" if names.get("custom-title") else "ai-title"
            if names.get(kind) and planned_id in by_id:
                by_id[planned_id].title = names[kind]
                by_id[planned_id].title_source = f"{FORMAT} {kind}"
        if "" in self.reader.named and len(self.sessions) == 1:  # a title line without its id
            names = self.reader.named[""]
            kind = "custom-title" if names.get("custom-title") else "ai-title"
            self.sessions[0].title = names[kind]
            self.sessions[0].title_source = f"{FORMAT} {kind}"
        for uuid in self.reader.order:
            if uuid not in self.visited:  # only a parentUuid cycle hides a line from every root
                self.report.note("a line on a parentUuid cycle: not reachable, not imported",
                                 self.reader.nodes[uuid].line)
        return self.sessions

    def _teammates_spawned(self) -> dict[str, str]:
        """Each teammate (``<name>@<team>``) -> the Claude Code session of the lead whose
        Agent call spawned it (its result: ``status: teammate_spawned``)."""
        out: dict[str, str] = {}
        for uuid in self.reader.order:
            head = self.reader.nodes[uuid].head
            if not isinstance(head.toolUseResult, dict):
                continue
            typed = msgspec.convert(head.toolUseResult, _Spawned)
            if typed.status == "teammate_spawned" and isinstance(typed.agent_id, str) and \
                    head.sessionId is not None:
                out.setdefault(typed.agent_id, head.sessionId)
        return out

    def _origin(self, root: _Node) -> dict[str, Any]:
        """What the session.imported of a session rooted at ``root`` says."""
        record, head = root.record, root.head
        source = (Path(root.line.rpartition(":")[0]).name if isinstance(root.line, str)
                  else self.reader.last_file)
        meta: dict[str, Any] = {k: record[k] for k in ("cwd", "gitBranch", "agentId")
                                if k in record}
        if head.agentId in self.reader.agent_meta:
            meta["agent"] = self.reader.agent_meta[head.agentId]
        return {"source": source, "original_id": head.sessionId or "",
                "tool_version": head.version or "", "metadata": meta or None}

    def _walk(self, planned: PlannedSession, start: _Node, turn: _Turn) -> None:
        """Walk one branch. The lines of one assistant message and the tool results that
        answer it are one turn whatever their parent links (parallel calls make a tree:
        the second call's line and the first call's result are both children of the
        first call's line), so the walk keeps a frontier and takes every such line
        before anything that starts something new. Only a second new start (a prompt
        typed again, a regenerated answer) is a rewind: it forks."""
        self.sessions.append(planned)
        frontier: list[_Node] = [start]
        last = start
        while frontier:
            pick = next((n for n in frontier if _in_turn(n, turn)), None)
            if pick is None:  # nothing of this turn is left: a new start continues
                # A line of another file and another sessionId goes on from here: a
                # --fork-session (or an older --resume) made a session of its own,
                # which forks here; the branch continues with its own session's line.
                own = [n for n in frontier if not _elsewhere(n, last)]
                later = own[1:] + [n for n in frontier if n not in own]
                pick = own[0] if own else None
                for other in later:  # a rewind: the later branch forks here
                    fork = PlannedSession(
                        stable_uuid(other.time, FORMAT, "fork", other.uuid), "fork",
                        parent=planned.id, fork_seq=self._shared(planned),
                        created=max(other.time, 1))
                    self._walk(fork, other, copy.deepcopy(turn))
                if pick is None:
                    break
                frontier = [pick]
            frontier.remove(pick)
            self._step(planned, pick, turn)
            last = pick
            kids = self.children.get(pick.uuid)
            if kids:
                frontier.extend(kids)
                if len(frontier) > 1:  # earliest first; file order breaks ties (stable)
                    frontier.sort(key=lambda n: (n.time, n.index))
        self._end(planned, turn, last)

    def _step(self, planned: PlannedSession, node: _Node, turn: _Turn) -> None:
        """One node's events into ``planned`` (a record of the wrong shape names its line)."""
        self.visited.add(node.uuid)
        if planned.kind == "main" and node.head.sessionId is not None:
            self.main_of.setdefault(node.head.sessionId, planned.id)
        try:
            self._node(planned, node, turn)
        except SHAPE_ERRORS as exc:
            if isinstance(node.line, str):  # "file:line" of a directory import
                name, _, number = node.line.rpartition(":")
                raise shape_error(str(Path(self.report.source) / name), exc,
                                  int(number)) from exc
            raise shape_error(self.report.source, exc, node.line) from exc
        title = self.reader.titles.get(node.uuid)
        if title:
            planned.title, planned.title_source = title, f"{FORMAT} summary"

    def _shared(self, planned: PlannedSession) -> int:
        """A fork's seq in its parent: the parent's own events plus what it shares."""
        base = planned.fork_seq or 0
        return base + len(planned.events)

    # ------------------------------------------------------------------ one node

    def _node(self, planned: PlannedSession, node: _Node, turn: _Turn) -> None:
        out = _Out(planned.events, node)
        turn.last_time = max(node.time, turn.last_time)
        if node.kind == "assistant":
            self._assistant(out, node, turn)
        elif node.kind == "compact":
            self._close(out, turn)
            mid = stable_uuid(out.time, FORMAT, "message", node.uuid)
            meta = node.head.compactMetadata
            out.add(ev.MessageStarted(message_id=mid, role="user"))
            out.add(ev.CompactionAdded(
                message_id=mid, part_id=stable_part_id(node.uuid, "compaction"),
                auto=meta is not None and meta.trigger == "auto"))
            out.add(ev.MessageCompleted(message_id=mid))
            turn.last_user = mid
        else:
            self._user(out, node, turn)

    def _assistant(self, out: _Out, node: _Node, turn: _Turn) -> None:
        message = node.head.message
        source = message.id
        if turn.assistant is None or source is None or source != turn.source_id:
            self._close(out, turn)
            mid = stable_uuid(out.time, FORMAT, "message", source or node.uuid)
            if mid in turn.started:
                # Lines of one message apart in the chain (lines lost or moved, a parent
                # that names no line): the later ones are a message of their own.
                mid = stable_uuid(out.time, FORMAT, "message", str(source), node.uuid)
                self.report.note("lines of one assistant message apart in the chain: the "
                                 "later lines are a message of their own", node.line)
            turn.started.add(mid)
            model = message.model
            out.add(ev.MessageStarted(
                message_id=mid, role="assistant", parent_id=turn.last_user,
                model=ev.ModelRef(provider_id="anthropic", model_id=model) if model else None,
                path=_path(node.head)))
            turn.assistant, turn.source_id = mid, source
            turn.finish, turn.tokens, turn.error = None, None, _api_error(node)
        mid = turn.assistant
        assert mid is not None
        if message.stop_reason is not None:
            turn.finish = message.stop_reason
        usage = message.usage
        if usage is not None:
            turn.tokens = _tokens(usage)
            for key in sorted(set(usage) - _USAGE):
                self.report.note(f"message.usage field {key!r}: not mapped", node.line)
        for index, (block, raw) in enumerate(zip(node.blocks, _raws(node), strict=True)):
            self._assistant_block(out, node, turn, (mid, index), (block, raw))

    def _assistant_block(self, out: _Out, node: _Node, turn: _Turn, where: tuple[str, int],
                         pair: tuple[_Read, Any]) -> None:
        mid, index = where
        block, raw = pair
        pid = stable_part_id(node.uuid, str(index))
        kind = block.type
        meta: dict[str, Any] = {"claude_code": _envelope(node.record)}
        if isinstance(block, _Text):
            if block.citations:  # where the Anthropic renderer looks for them
                meta["anthropic"] = {"citations": block.citations}
            out.add(ev.TextAdded(message_id=mid, part_id=pid, text=block.text or "",
                                 metadata=meta))
            out.add(ev.PartEnded(message_id=mid, part_id=pid))
        elif isinstance(block, _Thinking | _Redacted):
            data = ({"signature": block.signature or ""} if isinstance(block, _Thinking)
                    else {"redacted": block.data or ""})
            text = block.thinking if isinstance(block, _Thinking) else None
            out.add(ev.ReasoningAdded(message_id=mid, part_id=pid, text=text or "",
                                      metadata={**meta, "anthropic": data}))
            out.add(ev.PartEnded(message_id=mid, part_id=pid))
        elif isinstance(block, _ToolUse) and block.id is not None and block.name:
            call, name, args = block.id, block.name, block.input
            if name in _TASK_TOOLS and args is not None:
                child = self.child_of_prompt.get(str(args.get("prompt")))
                if child:
                    meta["child_session"] = child
            if call in turn.tools:  # every unsettled call is there (open_tools is a subset)
                self.report.note("a tool_use id repeats: the repeat is not mapped", node.line)
                return
            out.add(ev.ToolAdded(message_id=mid, part_id=pid, call_id=call, tool=name,
                                 input=args if args is not None else {}, metadata=meta))
            if args is None:
                self.report.note("tool_use input that is not an object: not mapped", node.line)
            out.add(ev.ToolStarted(message_id=mid, part_id=pid))
            turn.tools[call] = _Tool(mid, pid, name)
            turn.open_tools.setdefault(mid, set()).add(call)
            early = turn.early.pop(call, None)
            if early is not None:  # its result came first
                self._result(_Out(out.events, early[1], f"early:{call}"), early[1], turn, early[0],
                             first=True)
        elif kind is not None:
            # server_tool_use, web_search_tool_result, a newer block type: kept whole as
            # the stream adapter keeps a block convlog does not model (an ignored part the
            # Anthropic renderer sends back as it was).
            out.add(ev.TextAdded(message_id=mid, part_id=pid, text="", synthetic=True,
                                 ignored=True, metadata={**meta, "anthropic": {"block": raw}}))
            out.add(ev.PartEnded(message_id=mid, part_id=pid))
            self.report.note(f"assistant block type {kind!r}: kept whole, not shown",
                             node.line)
        else:
            self.report.note(f"assistant block type {_kind(raw)!r}: not mapped", node.line)

    def _user(self, out: _Out, node: _Node, turn: _Turn) -> None:
        if node.head.message.content is None:
            self.report.note("user message content that is neither text nor blocks", node.line)
            return
        pairs = list(zip(node.blocks, _raws(node), strict=True))
        results = [b for b in node.blocks if isinstance(b, _ToolResult)]
        rest = [p for p in pairs if not isinstance(p[0], _ToolResult)]
        for i, result in enumerate(results):
            self._result(out, node, turn, result, first=i == 0)
        if not rest:
            return
        self._close(out, turn)
        mid = stable_uuid(out.time, FORMAT, "message", node.uuid)
        out.add(ev.MessageStarted(message_id=mid, role="user", path=_path(node.head)))
        meta = {"claude_code": _envelope(node.record)}
        for index, (block, raw) in enumerate(rest):
            pid = stable_part_id(node.uuid, "u", str(index))
            kind = block.type
            if isinstance(block, _Text):
                out.add(ev.TextAdded(message_id=mid, part_id=pid, text=block.text or "",
                                     synthetic=bool(node.head.isMeta), metadata=meta))
                out.add(ev.PartEnded(message_id=mid, part_id=pid))
            elif isinstance(block, _File) and (found := _file_url(kind, block.source)):
                media, url = found
                title = block.title
                out.add(ev.FileAdded(message_id=mid, part_id=pid, mime=media, url=url,
                                     filename=title if isinstance(title, str) else None))
            else:
                self.report.note(f"user block type {_kind(raw)!r}: not mapped", node.line)
        out.add(ev.MessageCompleted(message_id=mid))
        turn.last_user = mid

    def _result(self, out: _Out, node: _Node, turn: _Turn, block: _ToolResult, *,
                first: bool) -> None:
        call = block.tool_use_id
        tool = turn.tools.pop(call, None) if call is not None else None
        if tool is None or call is None:
            if call is not None and call not in turn.early:
                turn.early[call] = (block, node)  # its tool_use may come later in the chain
            else:
                self.report.note("tool_result without a tool_use id: not mapped", node.line)
            return
        content = block.content  # kept whole in metadata, as written
        blocks = [msgspec.convert(b, _Inner) if isinstance(b, dict) else _Inner()
                  for b in content] if isinstance(content, list) else []
        text = content if isinstance(content, str) else "\n".join(
            str(b.text) for b in blocks if b.type == "text")
        persisted = None
        if text.startswith(_PERSISTED):
            text, persisted = self._persisted(text, node)
        others = [b for b in blocks if b.type != "text"]
        if not text:
            # ToolSearch (2.1.x) answers with tool_reference blocks and no text: the names
            # it found are its output (the blocks stay in metadata).
            text = "\n".join(b.tool_name for b in others
                             if b.type == "tool_reference" and isinstance(b.tool_name, str))
        attachments = [ev.Attachment(part_id=stable_part_id(node.uuid, call, str(i)),
                                     mime=found[0], url=found[1])
                       for i, b in enumerate(others)
                       if (found := _file_url(b.type, b.source)) is not None]
        unmapped = len(others) > len(attachments)
        if unmapped:
            self.report.note("non-text blocks in a tool_result: kept in metadata only",
                             node.line)
        # The blocks stay in metadata only when some are not attachments (Read of an
        # image is one image block: its attachment is the whole of it).
        meta: dict[str, Any] = {"claude_code": {"uuid": node.uuid, "content": content}
                                if unmapped else {"uuid": node.uuid}}
        if persisted is not None:
            meta["claude_code"]["persisted"] = persisted
        typed = node.head.toolUseResult
        if first and typed is not None:
            meta["claude_code"]["toolUseResult"] = typed
            if isinstance(typed, dict):
                spawned = msgspec.convert(typed, _Spawned)
                agent = spawned.agentId or spawned.agent_id
                if isinstance(agent, str) and agent in self.child_of_agent:
                    meta["child_session"] = self.child_of_agent[agent]
        if block.is_error:
            out.add(ev.ToolFailed(message_id=tool.message_id, part_id=tool.part_id,
                                  error=text or "error", metadata=meta))
        else:
            if not text and not attachments:
                self.report.note(f"an empty tool result reads {_EMPTY_OUTPUT!r}", node.line)
            out.add(ev.ToolCompleted(message_id=tool.message_id, part_id=tool.part_id,
                                     output=text or _EMPTY_OUTPUT, metadata=meta,
                                     attachments=attachments))
        pending = turn.open_tools.get(tool.message_id)
        if pending is not None:
            pending.discard(call)
            if not pending:  # an emptied set is dropped: forks deep-copy what is left
                del turn.open_tools[tool.message_id]
        if tool.message_id in turn.waiting and not pending:
            turn.waiting.remove(tool.message_id)
            out.add(ev.MessageCompleted(message_id=tool.message_id), key="late")

    def _persisted(self, preview: str, node: _Node) -> tuple[str, dict[str, Any]]:
        """Claude Code 2.1.2+ saves a large tool output to
        ``<session>/tool-results/<id>.txt`` and logs a ``<persisted-output>`` preview:
        the output is the file's text when the file is here, else the preview."""
        found = _SAVED_TO.search(preview)
        name = Path(found.group(1)).name if found else ""
        session = node.head.sessionId or ""
        kept: dict[str, Any] = {"file": name, "preview": preview}
        for base in self.reader.dirs:
            candidate = base / session / "tool-results" / name
            if name and session and candidate.is_file():
                try:
                    with candidate.open("rb") as f:
                        return f.read(MAX_LINE).decode("utf-8", "replace"), kept
                except OSError:
                    break
        self.report.note("a <persisted-output> tool result whose tool-results file is not "
                         "here: the preview is the output", node.line)
        return preview, kept

    def _close(self, out: _Out, turn: _Turn) -> None:
        """The conversation moves on: complete the open assistant message if it can be."""
        mid = turn.assistant
        if mid is None:
            return
        turn.assistant = turn.source_id = None
        if turn.open_tools.get(mid):
            turn.waiting.append(mid)  # completes when its last tool settles
            return
        out.add(ev.MessageCompleted(message_id=mid, finish=turn.finish, tokens=turn.tokens,
                                    error=turn.error), key=f"close:{mid}")

    def _end(self, planned: PlannedSession, turn: _Turn, last: _Node) -> None:
        out = _Out(planned.events, last, "end")
        if turn.assistant is not None and turn.finish is not None:
            self._close(out, turn)  # a finished turn; one without stop_reason stays open
        for call, (_, node) in sorted(turn.early.items()):
            self.report.note(f"tool_result for an unknown tool_use {call!r}: not mapped",
                             node.line)
        for call in turn.tools:
            self.report.note(f"tool {call!r} has no result: left running (unfinished)",
                             last.line)


class _Out:
    """Appends one node's events with stable ids derived from its uuid."""

    def __init__(self, events: list[Event], node: _Node, prefix: str = "") -> None:
        self.events = events
        self.node = node
        self.prefix = prefix  # a second writer for the same node keeps its ids apart
        self.time = max(node.time, 1)
        self.count = 0

    def add(self, e: Event, key: str = "") -> None:
        self.count += 1
        eid = stable_uuid(self.time, FORMAT, "event", self.node.uuid, self.prefix, key,
                          str(self.count))
        self.events.append(msgspec.structs.replace(e, id=eid, time=self.time))




def _in_turn(node: _Node, turn: _Turn) -> bool:
    """``node`` continues the open turn rather than starting something new: a line of
    the open assistant message, or a user line that only carries tool results."""
    message = node.head.message
    if node.kind == "assistant":
        return turn.assistant is not None and message.id is not None and \
            message.id == turn.source_id
    if node.kind != "user" or node.queued:
        return False
    return isinstance(message.content, list) and bool(node.blocks) and all(
        isinstance(b, _ToolResult) for b in node.blocks)


def _teammate(head: _Line) -> str | None:
    """An Agent Teams teammate's id (``<name>@<team>``) when ``head`` is a line of a
    teammate's own transcript (Claude Code 2.1.x writes ``teamName`` and ``agentName``
    on each; the lead is ``team-lead``)."""
    team, name = head.teamName, head.agentName
    if team and name and name != "team-lead" and not head.isSidechain:
        return f"{name}@{team}"
    return None


def _elsewhere(node: _Node, last: _Node) -> bool:
    """``node`` continues ``last`` from another file under another sessionId."""
    return node.file != last.file and not node.sidechain and (
        node.head.sessionId != last.head.sessionId)


def _queued(attachment: Any) -> str | list[Any] | None:
    """The prompt of a ``queued_command`` attachment (text, or text and image blocks)."""
    if not isinstance(attachment, dict):
        return None
    queued = msgspec.convert(attachment, _Queued)
    if queued.type != "queued_command":
        return None
    prompt = queued.prompt
    if isinstance(prompt, str) and prompt:
        return prompt
    if isinstance(prompt, list) and prompt:
        return [{"type": "text", "text": b} if isinstance(b, str) else b for b in prompt]
    return None


def _kind(raw: Any) -> Any:
    """A block's type as written (the report names a type of any shape)."""
    return raw.get("type") if isinstance(raw, dict) else None


def _envelope(record: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in record.items() if k not in _READ or k == "uuid"}


def _path(head: _Line) -> ev.PathInfo | None:
    cwd = head.cwd
    return ev.PathInfo(cwd=cwd, root=cwd) if cwd else None


def _tokens(usage: dict[str, Any]) -> ev.Tokens:
    def n(key: str) -> int:
        value = usage.get(key)
        return value if type(value) is int and value >= 0 else 0  # not a bool

    return ev.Tokens(input=n("input_tokens"), output=n("output_tokens"),
                     cache=ev.CacheTokens(read=n("cache_read_input_tokens"),
                                          write=n("cache_creation_input_tokens")))


def _file_url(kind: Any, source: Any) -> tuple[str, str] | None:
    """The mime type and URL of an ``image`` or ``document`` block (base64 data, a URL,
    or a plain-text document), or None when it is something else."""
    if kind not in ("image", "document") or not isinstance(source, dict):
        return None
    src = msgspec.convert(source, _Source)
    fallback = "image/png" if kind == "image" else "application/octet-stream"
    media = str(src.media_type or fallback)
    if src.type == "base64":
        return media, f"data:{media};base64,{src.data}"
    if src.type == "url" and isinstance(src.url, str):
        return media, src.url
    if src.type == "text" and isinstance(src.data, str):
        encoded = base64.b64encode(src.data.encode()).decode()
        return "text/plain", f"data:text/plain;base64,{encoded}"
    return None


def _api_error(node: _Node) -> ev.MessageError | None:
    """Claude Code logs a failed request (``isApiErrorMessage``, model ``<synthetic>``)
    as an assistant line whose text is the error: it is the API's error, not the
    model's words, so the message ends with that error (renderers never send it)."""
    if not node.head.isApiErrorMessage:
        return None
    text = _text_of(node.blocks)
    status = _API_STATUS.search(text)
    return ev.MessageError(kind="api", message=text,
                           status_code=int(status.group(1)) if status else None)


# Claude Code's compaction summary ends by naming the transcript it summarised.
_TRANSCRIPT_AT: Final = re.compile(r"read the full transcript at: \S*?([0-9a-f-]{36})\.jsonl")


def _text_of(blocks: list[_Read]) -> str:
    """A message's text: its string content, or its text blocks' texts."""
    return "\n".join(b.text or "" for b in blocks if isinstance(b, _Text))


def files_of(path: Path) -> list[Path]:
    """A transcript file with its subagents (``<session>/subagents/agent-<id>.jsonl``
    beside it, as Claude Code 2.1+ writes them), or every ``*.jsonl`` under a directory."""
    if path.is_dir():
        return sorted(p for p in path.rglob("*.jsonl") if p.is_file())
    # Workflow agents (2.1.x) sit deeper: subagents/workflows/<run id>/agent-<id>.jsonl.
    return [path, *sorted((path.parent / path.stem / "subagents").rglob("agent-*.jsonl"))]


def _first_time(path: Path) -> int:
    """The first timestamp in a transcript's head (0 when none is there)."""
    try:
        with path.open("rb") as f:
            head = f.read(1 << 16)
    except OSError:
        return 0
    found = _STAMP.search(head)
    return ms_of(found.group(1).decode()) if found else 0


_STAMP: Final = re.compile(rb'"timestamp"\s*:\s*"([^"]{10,40})"')


def plan_claude_code(path: Path, *, lenient: bool = False) -> Plan:
    return plan_files(files_of(path), str(path), lenient=lenient)


@collector_paused()  # builds only: see engine.collector
def plan_files(paths: Iterable[Path], source: str, *, lenient: bool = False,
               max_line: int = MAX_LINE) -> Plan:
    report = ImportReport(source, FORMAT)
    reader = _Reader(report, lenient, max_line)
    # Main transcripts before subagent files, the session begun first first: a file that
    # copies another's lines with their uuids (a --fork-session, an older --resume) is
    # deduplicated against the original, whatever their names (by name, a fork file that
    # sorted first took the original's lines, and the original lost its compaction).
    files = sorted(paths, key=lambda p: (p.stem.startswith("agent-"), _first_time(p), str(p)))
    for path in files:
        reader.read(path, several=len(files) > 1)
    reader.resolve()
    for original, line in reader.copied_from.items():
        if original not in reader.session_ids:
            # Nothing else in the file names the original: without its file the copy
            # stays a main session holding the copied lines; with it, a fork.
            report.note(f"a compaction summary that names another session's transcript "
                        f"({original}.jsonl, not in the import): this file's lines before "
                        "its own prompts copy that session (a --fork-session); imported "
                        "with that file, it is a fork of it", line)
    return seal(Plan(report, _Builder(reader, report).build()))
