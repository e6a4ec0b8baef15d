"""Gemini CLI sessions: the older single JSON file and the newer append-only JSONL.

JSONL: the first line is the session's metadata; each later line is a record
keyed by ``id`` (a line with a known id replaces that record where it stands),
``{"$set": {...}}`` (metadata), or ``{"$rewindTo": id}``. A rewind drops the
record ``id`` and everything after it from the conversation going on; convlog
keeps both: the records before the rewind stay the session, and what follows
becomes a fork sharing the prefix, as a rewind in Claude Code does.

Each ``gemini`` record carries its tool calls with their results inside, so a
record maps on its own: thoughts become reasoning parts, the content a text
part, each call a tool part taken to its status (success, error, cancelled,
executing stays running, validating/scheduled stay pending, awaiting_approval
asks for approval). ``info``, ``warning`` and ``error`` records are listed in
the report with their text; no event carries a UI notice.
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path
from typing import Any, Final

import attrs
import msgspec

from engine import events as ev
from engine.events import Event
from engine.importers.base import (
    MAX_LINE,
    SHAPE_ERRORS,
    ImportInputError,
    ImportReport,
    Plan,
    PlannedSession,
    decode,
    json_document,
    json_lines,
    loads,
    ms_of,
    open_binary,
    seal,
    shape_error,
    stable_part_id,
    stable_uuid,
)

FORMAT: Final = "gemini"
_NOTICES: Final = frozenset({"info", "warning", "error"})
_MODEL_FIELDS: Final = ("toolCalls", "thoughts", "tokens", "model")
# A large tool output Gemini CLI moved out of the history, to
# <project temp dir>/tool-outputs/[session-<id>/]<file>.txt: masked (the whole response as
# JSON in the file, a preview in the record), or truncated (the raw output in the file).
TOOL_OUTPUTS: Final = "tool-outputs"
_MASKED: Final = "<tool_output_masked>"
_TRUNCATED: Final = "Output too large. Showing first "
_SAVED_AT: Final = re.compile(
    r"(?:Full output available at|Full string saved to|For full output see): ([^\n\]]+)")


@attrs.define
class _Branch:
    records: list[dict[str, Any]]
    parent: int | None = None  # index of the branch it was rewound from
    lines: dict[str, int] = attrs.field(factory=dict)


# A record as the session's events read it (``ConversationRecord`` in Gemini CLI's
# chatRecordingService.ts), converted once per record. Lenient where the reader always
# was: a leaf value is read as before (``str()`` of an id, a count that is not a
# non-negative integer read as 0), so it is ``Any``; what is declared is the structure:
# ``thoughts`` and ``toolCalls`` are lists, ``tokens`` an object. A value of another
# shape there is refused naming the file, the line and its JSON path; before, it was read
# as none (or a string's characters taken as calls). The record stays the dict it was
# read as beside it: its id hashes it whole, and a field's presence is kept.
class _Tokens(msgspec.Struct, gc=False):
    input: Any = None
    output: Any = None
    thoughts: Any = None
    cached: Any = None


class _Record(msgspec.Struct, gc=False):
    id: Any = None
    type: Any = None
    timestamp: Any = None
    content: Any = None  # a PartListUnion: a string, a part, or a list of both
    summary: Any = None  # a compression marker's
    model: Any = None
    thoughts: list[Any] | None = None  # each an object (others are skipped)
    toolCalls: list[Any] | None = None  # noqa: N815 - Gemini CLI's spelling; each an object
    tokens: _Tokens | None = None


class _Call(msgspec.Struct, gc=False):
    """A tool call (``ToolCallRecord``); the fields kept verbatim are taken from it as
    saved, where present."""

    name: Any = None
    id: Any = None
    args: Any = None  # an object is the call's input; anything else reads as {}
    status: Any = None
    result: Any = None  # a PartListUnion
    resultDisplay: Any = None  # noqa: N815


def _checked(record: dict[str, Any], path: Path, line: int | None) -> dict[str, Any]:
    """``record`` once its shape is known good: every record read is checked where it is
    read, before the passes that compare and rewrite records rely on its shape (a
    ``toolCalls`` of 5 in a rewritten history was an internal TypeError there)."""
    try:
        msgspec.convert(record, _Record)
    except msgspec.ValidationError as exc:
        raise shape_error(str(path), exc, line) from exc
    return record


def _key(record: dict[str, Any]) -> str:
    return hashlib.blake2b(json.dumps(record, sort_keys=True).encode(),
                           digest_size=8).hexdigest()


class _Events:
    """One session's events, ids keyed by the session and the record."""

    def __init__(self, sid: str, report: ImportReport, outputs: Path | None = None) -> None:
        self.sid = sid
        self.report = report
        self.outputs = outputs  # the project's tool-outputs/ directory, when it is here
        self.events: list[Event] = []
        self.last_user: str | None = None

    def record(self, r: dict[str, Any], line: int | None) -> None:
        said = msgspec.convert(r, _Record)  # a field of the wrong shape: its path
        rid = str(said.id or "")
        kind = said.type
        time = max(ms_of(said.timestamp), 1)
        count = 0

        def add(e: Event, when: int = time) -> None:
            nonlocal count
            count += 1
            eid = stable_uuid(when, FORMAT, self.sid, rid, _key(r), str(count))
            self.events.append(msgspec.structs.replace(e, id=eid, time=when))

        if kind == _COMPRESSION:
            mid = stable_uuid(time, FORMAT, "message", self.sid, rid)
            add(ev.MessageStarted(message_id=mid, role="user"))
            add(ev.CompactionAdded(message_id=mid, part_id=stable_part_id(rid, "compaction")))
            summary = str(said.summary or "")
            if summary:
                pid = stable_part_id(rid, "summary")
                add(ev.TextAdded(message_id=mid, part_id=pid, text=summary, synthetic=True))
                add(ev.PartEnded(message_id=mid, part_id=pid))
            add(ev.MessageCompleted(message_id=mid))
            self.last_user = mid
            return
        if kind in _NOTICES:
            self.report.note(f"{kind} record: not mapped ({_text(said.content)[:60]!r})", line)
            return
        if kind not in ("user", "gemini"):
            if not isinstance(kind, str) or not any(k in r for k in _MODEL_FIELDS):
                self.report.note(f"record type {kind!r}: not mapped", line)
                return
            # A Gemini CLI fork writes the same record under its own name for the model's
            # turns (IBM Bob shell: "bob-shell"): it carries the model's fields.
            self.report.note(f"record type {kind!r} read as the model's turn (a Gemini CLI "
                             "fork's name for it)", line)
        mid = stable_uuid(time, FORMAT, "message", self.sid, rid)
        meta = {"gemini": {k: r[k] for k in ("id", "displayContent") if k in r}}
        files: list[tuple[int, str, str]] = []  # (index, mime, url) of inlineData / fileData
        for i, part in enumerate(_parts(said.content)):
            found = _file(part)
            if found is not None:
                files.append((i, *found))
            elif not isinstance(part, str) and not (
                    isinstance(part, dict) and isinstance(part.get("text"), str)):
                keys = sorted(part) if isinstance(part, dict) else [type(part).__name__]
                self.report.note(f"a content part {keys}: not mapped (text and files only)",
                                 line)

        def add_files() -> None:
            for i, mime, url in files:
                add(ev.FileAdded(message_id=mid, part_id=stable_part_id(rid, "file", str(i)),
                                 mime=mime, url=url))

        if kind == "user":
            add(ev.MessageStarted(message_id=mid, role="user"))
            pid = stable_part_id(rid, "text")
            add(ev.TextAdded(message_id=mid, part_id=pid, text=_text(said.content),
                             metadata=meta))
            add(ev.PartEnded(message_id=mid, part_id=pid))
            add_files()
            add(ev.MessageCompleted(message_id=mid))
            self.last_user = mid
            return
        model = said.model
        provider = "google" if kind == "gemini" else str(kind)
        add(ev.MessageStarted(message_id=mid, role="assistant", parent_id=self.last_user,
                              model=ev.ModelRef(provider_id=provider, model_id=model)
                              if isinstance(model, str) and model else None))
        for i, thought in _thoughts(said.thoughts, self.report, line):
            pid = stable_part_id(rid, "thought", str(i))
            add(ev.ReasoningAdded(message_id=mid, part_id=pid,
                                  text=str(thought.get("description") or ""),
                                  metadata={"gemini": {k: thought[k] for k in
                                                       ("subject", "timestamp") if k in thought}}))
            add(ev.PartEnded(message_id=mid, part_id=pid))
        text = _text(said.content)
        if text:
            pid = stable_part_id(rid, "text")
            add(ev.TextAdded(message_id=mid, part_id=pid, text=text, metadata=meta))
            add(ev.PartEnded(message_id=mid, part_id=pid))
        add_files()
        settled = all([self._call(mid, rid, i, call, add=add, line=line)
                       for i, call in enumerate(said.toolCalls or [])])
        if settled:
            add(ev.MessageCompleted(message_id=mid, tokens=_tokens(said.tokens)))
        else:
            self.report.note("a gemini record with an unsettled tool call: left open", line)

    def _call(self, mid: str, rid: str, i: int, saved: Any, *, add: Any, line: int | None
              ) -> bool:
        call = msgspec.convert(saved, _Call) if isinstance(saved, dict) else _Call()
        if not call.name:
            self.report.note("a tool call without a name: not mapped", line)
            return True
        pid = stable_part_id(rid, "call", str(i))
        ids: dict[str, Any] = {"message_id": mid, "part_id": pid}
        args = call.args
        extra = {k: saved[k] for k in ("displayName", "description", "timestamp",
                                       "resultDisplay", "renderOutputAsMarkdown", "agentId")
                 if k in saved}
        add(ev.ToolAdded(**ids, call_id=str(call.id or pid), tool=str(call.name),
                         input=args if isinstance(args, dict) else {},
                         metadata={"gemini": extra} if extra else None))
        status = call.status
        if status in ("validating", "scheduled"):
            return False
        if status == "awaiting_approval":
            add(ev.ToolApprovalRequested(**ids))
            return False
        if status == "cancelled":
            add(ev.ToolFailed(**ids, error="cancelled", kind="cancelled"))
            return True
        add(ev.ToolStarted(**ids))
        if status == "executing":
            return False
        output, moved = self._saved(_result_text(call.result), line)
        kept = {"gemini": {"saved_output": moved}} if moved else None
        if status == "success":
            shown = call.resultDisplay or ""
            # An edit's display is an object ({fileDiff, fileName, ...}): JSON, not a repr.
            output = output or (shown if isinstance(shown, str) else json.dumps(shown))
            if not output:
                self.report.note("an empty tool result reads '(no output)'", line)
            add(ev.ToolCompleted(**ids, output=output or "(no output)", metadata=kept))
        elif status == "error":
            add(ev.ToolFailed(**ids, error=output or "error", metadata=kept))
        else:
            self.report.note(f"tool call status {status!r}: left running", line)
            return False
        return True


    def _saved(self, text: str, line: int | None) -> tuple[str, dict[str, Any] | None]:
        """A masked or truncated output read back from its ``tool-outputs/`` file when the
        file is here (the preview kept in metadata), else the preview, reported."""
        masked = _MASKED in text
        found = _SAVED_AT.search(text) if masked or text.startswith(_TRUNCATED) else None
        if found is None:
            return text, None
        # The path is the writer's own (Windows or POSIX): its last two names locate it.
        names = re.split(r"[\\/]", found.group(1).strip())
        name, folder = names[-1], names[-2] if len(names) > 1 else ""
        kept: dict[str, Any] = {"file": name, "preview": text}
        candidates: list[Path] = []
        if self.outputs is not None and name:
            if folder.startswith("session-"):
                candidates.append(self.outputs / folder / name)
            candidates.append(self.outputs / name)  # saved without a session folder
        for candidate in candidates:
            if candidate.is_file():
                try:
                    with candidate.open("rb") as f:
                        saved = f.read(MAX_LINE).decode("utf-8", "replace")
                except OSError:
                    break
                return (_unmasked(saved) if masked else saved), kept
        self.report.note(f"a {'masked' if masked else 'truncated'} tool output whose "
                         f"{TOOL_OUTPUTS}/ file is not here: the preview is the output", line)
        return text, kept


def _unmasked(saved: str) -> str:
    """A masked output's file holds the whole ``functionResponse.response`` as JSON: its
    output (or error) as the record would have held it."""
    try:
        response = loads(saved)
    except ValueError:
        return saved
    if not isinstance(response, dict):
        return saved
    value = response.get("output", response.get("error", response))
    return value if isinstance(value, str) else json.dumps(value)


def outputs_dir(path: Path) -> Path | None:
    """The ``tool-outputs/`` beside a session file's ``chats/`` (a subagent's is one level
    deeper), or beside a checkpoint."""
    for folder in list(path.parents)[:3]:
        if (folder / TOOL_OUTPUTS).is_dir():
            return folder / TOOL_OUTPUTS
    return None


def _masking_pass(before: list[dict[str, Any]], after: list[dict[str, Any]]) -> bool:
    """Whether ``after`` is ``before`` (then possibly more records) with nothing changed
    but tool results replaced by masked previews, or content re-spelled (a string as
    a list of text parts: the sync writes the model's own parts back)."""
    if len(after) < len(before) or not before:
        return False
    return all(_same_but_masked(a, b) for a, b in zip(before, after, strict=False))


def _same_but_masked(a: dict[str, Any], b: dict[str, Any]) -> bool:
    if a == b:
        return True
    rest = ("content", "toolCalls")
    if {k: v for k, v in a.items() if k not in rest} != {
            k: v for k, v in b.items() if k not in rest}:
        return False
    if _text(a.get("content")) != _text(b.get("content")) or [
            _file(p) for p in _parts(a.get("content"))] != [
            _file(p) for p in _parts(b.get("content"))]:
        return False
    calls_a, calls_b = a.get("toolCalls") or [], b.get("toolCalls") or []
    if not isinstance(calls_a, list) or not isinstance(calls_b, list) or len(
            calls_a) != len(calls_b):
        return False
    for x, y in zip(calls_a, calls_b, strict=True):
        if x == y:
            continue
        if not isinstance(x, dict) or not isinstance(y, dict) or {
                k: v for k, v in x.items() if k != "result"} != {
                k: v for k, v in y.items() if k != "result"}:
            return False
        if _MASKED not in json.dumps(y.get("result")):
            return False
    return True


def _thoughts(thoughts: Any, report: ImportReport, line: int | None
              ) -> list[tuple[int, dict[str, Any]]]:
    """The record's thoughts, less the snapshots a streaming writer left behind: a thought
    whose next one has the same subject and extends its description (IBM Bob shell
    records one per streamed chunk, each the text so far) is kept as that next one. Each
    with its index in the record (part ids are derived from it)."""
    if not isinstance(thoughts, list):
        return []
    kept: list[tuple[int, dict[str, Any]]] = []
    dropped = 0
    for i, thought in enumerate(thoughts):
        if not isinstance(thought, dict):
            continue
        after = thoughts[i + 1] if i + 1 < len(thoughts) else None
        text = thought.get("description")
        if isinstance(after, dict) and isinstance(text, str) and after.get(
                "subject") == thought.get("subject") and isinstance(
                after.get("description"), str) and after["description"].startswith(text):
            dropped += 1
            continue
        kept.append((i, thought))
    if dropped:
        report.note("thoughts that are a streamed snapshot of the next one (each the text "
                    "so far): the last snapshot kept", line)
    return kept


def _parts(content: Any) -> list[Any]:
    """A ``PartListUnion`` as a list: a string, one part, or a list of parts and strings."""
    if isinstance(content, list):
        return content
    return [] if content is None else [content]


def _text(content: Any) -> str:
    return "".join(p if isinstance(p, str) else p["text"] for p in _parts(content)
                   if isinstance(p, str) or (isinstance(p, dict)
                                             and isinstance(p.get("text"), str)))


def _file(part: Any) -> tuple[str, str] | None:
    """The mime type and URL of an ``inlineData {mimeType, data}`` (base64) or ``fileData
    {mimeType, fileUri}`` part."""
    if not isinstance(part, dict):
        return None
    inline, ref = part.get("inlineData"), part.get("fileData")
    if isinstance(inline, dict) and isinstance(inline.get("data"), str):
        mime = str(inline.get("mimeType") or "application/octet-stream")
        return mime, f"data:{mime};base64,{inline['data']}"
    if isinstance(ref, dict) and isinstance(ref.get("fileUri"), str):
        return str(ref.get("mimeType") or "application/octet-stream"), str(ref["fileUri"])
    return None


def _result_text(result: Any) -> str:
    """A tool result (``PartListUnion``): each ``functionResponse``'s output (or error), and
    any text part beside them."""
    texts = []
    for item in _parts(result):
        response = (item.get("functionResponse") or {}).get("response") if isinstance(
            item, dict) else None
        if isinstance(response, dict):
            value = response.get("output", response.get("error", response))
            texts.append(value if isinstance(value, str) else json.dumps(value))
        elif isinstance(item, str) or (isinstance(item, dict)
                                       and isinstance(item.get("text"), str)):
            texts.append(item if isinstance(item, str) else item["text"])
    return "\n".join(texts)


def _tokens(t: _Tokens | None) -> ev.Tokens | None:
    if t is None:
        return None

    def n(v: Any) -> int:
        return v if type(v) is int and v >= 0 else 0  # not a bool

    return ev.Tokens(input=n(t.input), output=n(t.output), reasoning=n(t.thoughts),
                     cache=ev.CacheTokens(read=n(t.cached)))


def _branches(path: Path, report: ImportReport, lenient: bool, max_line: int
              ) -> tuple[dict[str, Any], list[_Branch]]:
    meta: dict[str, Any] = {}
    branches = [_Branch([])]
    current = 0
    aliases: set[str] = set()  # ids a compression gave again to records already read
    resumed = False  # the last lines were a header (and metadata): a --resume's start
    for number, line in json_lines(path, report, lenient=lenient, max_line=max_line):
        if isinstance(line.get("$rewindTo"), str):
            # Gemini CLI drops the target and everything after it; an unknown target
            # drops every message. The branch so far stays: what follows is a fork.
            records = branches[current].records
            cut = next((i for i, r in enumerate(records) if r.get("id") == line["$rewindTo"]),
                       0)
            branches.append(_Branch(list(records[:cut]), parent=current,
                                    lines=dict(branches[current].lines)))
            current = len(branches) - 1
            continue
        if isinstance(line.get("id"), str):
            resumed = False
            branch = branches[current]
            rid = _checked(line, path, number)["id"]
            at = next((i for i, r in enumerate(branch.records) if r.get("id") == rid), None)
            if at is None:
                branch.records.append(line)
            else:
                branch.records[at] = line  # a later line replaces the record in place
            branch.lines[rid] = number
            continue
        if isinstance(line.get("$set"), dict) or (
                isinstance(line.get("sessionId"), str) and "$set" not in line):
            patch = line.get("$set", line)  # an update, or the metadata line
            # A --resume's header is followed by the setup context alone, then the whole
            # history: the first is no rolled-back turn.
            opening = resumed
            resumed = "$set" not in line or (resumed and "messages" not in patch)
            first = meta.get("startTime")
            meta.update({k: v for k, v in patch.items() if k != "messages"})
            if first is not None and "$set" not in line:
                # Each --resume writes the header again with its own start: the session
                # began at the first (its id stays the same as the file grows).
                meta["startTime"] = first
            if isinstance(patch.get("messages"), list):
                # The history rewritten whole (a compression, masked tool output, a
                # rolled-back turn): a fork sharing what did not change.
                records = [_checked(m, path, number) for m in patch["messages"]
                           if isinstance(m, dict) and isinstance(m.get("id"), str)]
                branch = branches[current]
                if not branch.records:
                    # The first history of a session (each --resume opens with a header
                    # and the history so far): the session's records, not a rewrite.
                    for r in records:
                        branch.records.append(r)
                        branch.lines[r["id"]] = number
                    continue
                if _masking_pass(branch.records, records):
                    # Gemini CLI's masking sync (updateMessagesFromHistory) rewrites every
                    # message to put a preview in place of large tool outputs: the same
                    # conversation, not a fork. The outputs as first recorded are kept;
                    # records it adds go on the branch.
                    report.note("a $set of messages that only masks tool outputs (Gemini "
                                "CLI's masking sync): the outputs as first recorded are "
                                "kept, no fork", number)
                    for r in records[len(branch.records):]:
                        branch.records.append(r)
                        branch.lines[r["id"]] = number
                    continue
                if _restates(branch.records, records, aliases):
                    # Each --resume writes the history again, re-spelled from the model's
                    # (new times, calls as functionCall parts, answers as `<id>_response`
                    # records), and a turn the API refused is rolled back from it: the
                    # same conversation, no rewind. The records as first written stay.
                    known = {r["id"] for r in records}
                    if not opening and any(r.get("id") not in known and r.get(
                            "type") != _COMPRESSION for r in branch.records[-1:]):
                        report.note("a $set of messages that leaves out the last records "
                                    "(a turn rolled back): they stay in the session", number)
                    continue
                summary = _compression(branch.records, records, aliases)
                if summary is not None:
                    # The history replaced by a summary, an acknowledgement and the latest
                    # turns again under new ids: the session's compaction, not a fork.
                    marker_id = f"{_COMPRESSION}-{number}"
                    branch.records.append({"id": marker_id, "type": _COMPRESSION,
                                           "timestamp": summary.get("timestamp"),
                                           "summary": _text(summary.get("content"))})
                    branch.lines[marker_id] = number
                    aliases.update(r["id"] for r in records)
                    report.note("a $set of messages that compresses the history (a summary, "
                                "Gemini CLI's acknowledgement, the latest turns again under "
                                "new ids): a compaction with its summary; the copies of the "
                                "latest turns and the acknowledgement are not imported again",
                                number)
                    continue
                if records != branch.records:
                    lines = dict(branches[current].lines)
                    for r in records:
                        lines.setdefault(r["id"], number)
                    branches.append(_Branch(records, parent=current, lines=lines))
                    current = len(branches) - 1
            continue
        report.note("a line that is no record, $set, $rewindTo or metadata: not mapped", number)
    return meta, branches


_CONTEXT: Final = "<session_context>"  # how Gemini CLI's setup context message begins
_COMPRESSION: Final = "$compression"  # the type of the record convlog puts where one was
_RESPONSE: Final = "_response"  # a re-spelled history's record of a turn's answers


def _said(record: dict[str, Any]) -> tuple[Any, str, tuple[str, ...]]:
    """What a record says, however it is spelled: its type, its text (thoughts left
    out) and the ids of the calls it makes (``toolCalls`` or ``functionCall`` parts)."""
    parts = _parts(record.get("content"))
    text = "".join(p if isinstance(p, str) else p["text"] for p in parts
                   if isinstance(p, str) or (isinstance(p, dict) and isinstance(
                       p.get("text"), str) and p.get("thought") is not True))
    calls = [c.get("id") for c in record.get("toolCalls") or [] if isinstance(c, dict)]
    calls += [p["functionCall"].get("id") for p in parts if isinstance(p, dict)
              and isinstance(p.get("functionCall"), dict)]
    return record.get("type"), text, tuple(str(c) for c in calls)


def _outputs(records: list[dict[str, Any]]) -> dict[str, str]:
    """Each call's output, from its ``toolCalls`` result or a ``functionResponse`` part."""
    out: dict[str, str] = {}
    for r in records:
        for call in r.get("toolCalls") or []:
            if isinstance(call, dict) and "result" in call:
                out[str(call.get("id"))] = _result_text(call.get("result"))
        for p in _parts(r.get("content")):
            if isinstance(p, dict) and isinstance(p.get("functionResponse"), dict):
                out[str(p["functionResponse"].get("id"))] = _result_text([p])
    return out


def _restates(before: list[dict[str, Any]], after: list[dict[str, Any]],
              aliases: set[str]) -> bool:
    """Whether ``after`` (a ``$set`` of messages) is the history read so far written
    again: every record one already read (the same id saying the same, or an id a
    compression gave again), or the ``<id>_response`` record of one's answers; no
    call's output changed. Records read but left out are a turn rolled back."""
    by_id = {r.get("id"): r for r in before}
    for r in after:
        rid = r["id"]
        if rid in by_id:
            if _said(by_id[rid]) != _said(r):
                return False
        elif rid not in aliases and not (rid.endswith(_RESPONSE) and (
                rid[:-len(_RESPONSE)] in by_id or rid[:-len(_RESPONSE)] in aliases)):
            return False
    was, now = _outputs(before), _outputs(after)
    return all(was[k] == now[k] for k in was.keys() & now.keys())


def _compression(before: list[dict[str, Any]], after: list[dict[str, Any]],
                 aliases: set[str]) -> dict[str, Any] | None:
    """The summary record when ``after`` is the history compressed: records already
    read (the setup context), then a user record of the summary and the model's
    acknowledgement, then the latest turns of ``before`` again under new ids (saying
    the same, with the same outputs); None when it is anything else."""
    by_id = {r.get("id"): r for r in before}
    k = 0
    while k < len(after) and (after[k]["id"] in aliases or (
            after[k]["id"] in by_id and _said(by_id[after[k]["id"]]) == _said(after[k]))):
        k += 1
    if k + 2 > len(after) or after[k].get("type") != "user" or after[k + 1].get(
            "type") != "gemini" or not _said(after[k])[1] or any(
            r["id"] in by_id for r in after[k:]):
        return None
    kept = after[k + 2:]
    read = [r for r in before if r.get("type") != _COMPRESSION]
    # A record of answers alone says nothing but its outputs (compared below); the
    # history may carry one per turn or two (0.61 writes `<id>_response` beside it).
    said_kept = [_said(r) for r in kept if _said(r) != ("user", "", ())]
    said_read = [_said(r) for r in read if _said(r) != ("user", "", ())]
    if len(said_kept) > len(said_read) or said_kept != said_read[
            len(said_read) - len(said_kept):]:
        return None
    was, now = _outputs(read), _outputs(kept)
    if any(was[c] != now[c] for c in was.keys() & now.keys()):
        return None
    return after[k]


def plan_gemini(path: Path, *, lenient: bool = False, max_line: int = MAX_LINE) -> Plan:
    """A session file (``.json`` or ``.jsonl``), a ``logs.json``, a ``/chat save``
    checkpoint, or a directory (``~/.gemini/tmp/<project>/`` or its ``chats/``): its
    session files, ``logs.json`` and checkpoints, and each subagent's
    ``<parent sessionId>/<id>.jsonl`` as a child session of the session it ran in."""
    if not path.is_dir():
        return plan_gemini_files([path], path, lenient=lenient, max_line=max_line)
    # Sessions are chats/session-*; a subagent's is chats/<parent sessionId>/<id>.jsonl.
    # Other JSON under the project directory is no conversation: the /restore snapshots
    # in checkpoints/, the activity logs logs/session-<id>.jsonl.
    def chats(d: Path) -> bool:
        return d == path or d.name == "chats"

    files = sorted(f for f in path.rglob("*.json*") if f.suffix in (".json", ".jsonl") and (
        (f.name.startswith("session-") and chats(f.parent))
        or ((f.name.startswith("checkpoint-") or f.name == LOGS) and f.parent.name != "chats")
        or (f.suffix == ".jsonl" and f.parent != path and chats(f.parent.parent))))
    plan = plan_gemini_files(files, path, lenient=lenient, max_line=max_line)
    if not plan.sessions and not any(f.name == LOGS for f in files):
        raise ImportInputError(str(path), "no Gemini CLI session file in this directory")
    return plan


def plan_gemini_files(files: list[Path], root: Path, *, lenient: bool = False,
                      max_line: int = MAX_LINE) -> Plan:
    """Gemini CLI files read together: a subagent's session finds the session it ran
    in, and a ``logs.json`` session whose chat recording is among them is not
    imported twice (the recording holds the same prompts and the replies)."""
    report = ImportReport(str(root), FORMAT)
    by_original: dict[str, str] = {}
    planned: list[tuple[Path, dict[str, Any], list[PlannedSession]]] = []
    logs: list[tuple[Path, list[PlannedSession]]] = []
    for f in sorted(files, key=lambda f: f.name == LOGS):  # recordings first
        if f.name == LOGS or _looks_like_logs(f):
            logs.append((f, _plan_logs(f, report)))
            continue
        meta, sessions = _plan_file(f, report, lenient, max_line)
        planned.append((f, meta, sessions))
        if sessions and meta.get("kind") != "subagent":
            by_original.setdefault(str(meta.get("sessionId") or ""), sessions[0].id)
    out: list[PlannedSession] = []
    for f, sessions in logs:
        for session in sessions:
            if session.original_id in by_original:
                report.note("a logs.json session whose chat recording is imported too: "
                            "the recording is kept (it has the replies)", f.name)
            else:
                out.append(session)
    for f, meta, sessions in planned:
        parent = by_original.get(f.parent.name) if f.parent.name != "chats" else None
        if meta.get("kind") == "subagent" and sessions:
            sessions[0].kind, sessions[0].parent = "child", parent
            if parent is None:
                report.note("a subagent session whose parent session is not in the import",
                            f.name)
        out.extend(sessions)
    # Parents before their children: the lineage needs them first.
    return seal(Plan(report, sorted(out, key=lambda s: s.kind == "child")))


LOGS: Final = "logs.json"


class _LogEntry(msgspec.Struct):
    """One ``logs.json`` entry as Gemini CLI's ``Logger`` writes it (``sessionId`` a number
    in the first versions). Strict as its reader: an entry it would skip is a
    ValidationError naming the field."""

    sessionId: str | int  # noqa: N815 - Gemini CLI's spelling
    messageId: int  # noqa: N815
    timestamp: str
    type: str
    message: str


_FIELD_IN: Final = re.compile(r"`\$\.(\w+)`|field `(\w+)`")


def _looks_like_logs(path: Path) -> bool:
    if path.suffix != ".json":
        return False
    with open_binary(path) as f:
        head = f.read(4096).lstrip()
    return head.startswith(b"[") and b'"messageId"' in head


def is_logs(data: Any) -> bool:
    """Whether ``data`` is the content of a ``logs.json``: a list of
    ``{sessionId, messageId, timestamp, type, message}``."""
    return isinstance(data, list) and all(
        isinstance(e, dict) and "sessionId" in e and "messageId" in e for e in data[:1])


def _plan_logs(path: Path, report: ImportReport) -> list[PlannedSession]:
    """``<project temp dir>/logs.json``: what Gemini CLI's ``Logger`` keeps for the
    up-arrow history, every session of the project in one JSON array of
    ``{sessionId, messageId, timestamp, type: "user", message}`` (``sessionId`` a
    number in the first versions). It holds the user's prompts only, no replies:
    each session becomes one session of user messages. Entries Gemini CLI itself
    would skip (a field missing or of another type) are reported, never guessed."""
    data = json_document(path, report)
    if not is_logs(data) and data != []:
        raise ImportInputError(str(path), "a Gemini CLI logs.json is a JSON array of "
                               "{sessionId, messageId, timestamp, type, message}")
    if not data:
        report.note("an empty logs.json: nothing to import", path.name)
    sessions: dict[str, list[dict[str, Any]]] = {}
    for i, raw in enumerate(data):
        where = f"{path.name} entry {i}"
        try:
            entry = msgspec.convert(raw, _LogEntry)
        except msgspec.ValidationError as exc:
            found = _FIELD_IN.search(str(exc))
            field = (found.group(1) or found.group(2)) if found else "sessionId"
            report.note(f"a logs.json entry without a valid {field!r}: not mapped", where)
            continue
        if entry.type != "user":
            report.note(f"a logs.json entry of type {entry.type!r}: not mapped", where)
            continue
        records = sessions.setdefault(str(entry.sessionId), [])
        rid = f"log-{entry.messageId}"
        if any(r["id"] == rid and r["content"] == entry.message for r in records):
            report.note("a repeated logs.json entry: imported once", where)
            continue
        records.append({"id": rid, "timestamp": entry.timestamp, "type": "user",
                        "content": entry.message})
    out: list[PlannedSession] = []
    for original, records in sessions.items():
        created = max(min(ms_of(r["timestamp"]) for r in records), 1)
        sid = stable_uuid(created, FORMAT, "logs", original)
        events = _Events(sid, report)
        for r in records:
            events.record(r, None)
        out.append(PlannedSession(sid, "main", events.events, created=created,
                                  source=path.name, original_id=original,
                                  metadata={"file": LOGS, "prompts_only": True}))
    return out


def _is_lines(path: Path, max_line: int) -> bool:
    """Whether a session file is the newer JSONL (its first line one record) rather than
    the older JSON document, decided from its content: a session JSON saved as
    ``*.jsonl`` (or JSONL saved as ``*.json``) is read as what it is."""
    with open_binary(path) as f:
        while raw := f.readline(max_line + 1):
            if raw.strip():
                break
    try:
        first = decode(raw.strip()) if raw.strip() else None
    except msgspec.DecodeError:
        # Not one JSON value: a document spread over lines (or a damaged first record,
        # which the line reader reports as such when the file is named .jsonl).
        return path.suffix == ".jsonl" and raw.lstrip()[:1] == b"{" and raw.rstrip() != b"{"
    # One line that is a whole session ({sessionId, messages: [...]}) or a /chat save
    # ({history: [...]}) is a document too.
    return isinstance(first, dict) and not isinstance(first.get("messages"), list) and \
        not isinstance(first.get("history"), list)


def _plan_file(path: Path, report: ImportReport, lenient: bool, max_line: int
               ) -> tuple[dict[str, Any], list[PlannedSession]]:
    if _is_lines(path, max_line):
        meta, branches = _branches(path, report, lenient, max_line)
    else:
        data = json_document(path, report)
        history = checkpoint_history(data)
        if isinstance(data, dict) and "toolCall" in data and "messages" not in data:
            # checkpoints/<time>-<file>-<tool>.json: the state /restore rolls back to before
            # a file-changing tool call, a copy of a conversation recorded elsewhere.
            report.note("a /restore snapshot (checkpoints/): not a session, not imported",
                        path.name)
            return {}, []
        if history is not None:
            meta, branches = _checkpoint(path, data, history, report)
        elif not isinstance(data, dict) or not isinstance(data.get("messages"), list):
            raise ImportInputError(str(path), "a Gemini CLI session is {sessionId, messages} "
                                   "and a /chat save is {history} or a list of contents")
        else:
            meta = {k: v for k, v in data.items() if k != "messages"}
            branches = [_Branch([_checked(m, path, None) for m in data["messages"]
                                 if isinstance(m, dict)])]
    if meta.get("kind") != "subagent" and branches and all(
            r.get("type") == "user" and _text(r.get("content")).startswith(_CONTEXT)
            for b in branches for r in b.records):
        # A --resume of 0.61 opens a file of its own (a header and the setup context) and
        # then records into the session it resumed: no turn was ever recorded here.
        report.note("a session file holding only Gemini CLI's setup context (no prompt): "
                    "not imported", path.name)
        return meta, []
    source = str(meta.get("sessionId") or meta.get("checkpoint") or path.stem)
    created = max(ms_of(meta.get("startTime")), 1)
    planned: list[PlannedSession] = []
    branches = [_Branch(_function_parts(b.records, report), b.parent, b.lines)
                for b in branches]
    for i, branch in enumerate(branches):
        sid = stable_uuid(created, FORMAT, "session", source, str(i))
        session = PlannedSession(
            sid, "main" if branch.parent is None else "fork", created=created,
            title=str(meta.get("summary") or ""), title_source=f"{FORMAT} summary",
            source=path.name,
            original_id=str(meta.get("sessionId") or ""),
            # projectHash, startTime, lastUpdated, kind, directories, newer fields
            metadata={k: v for k, v in meta.items() if k not in ("sessionId", "summary")}
            or None)
        start = 0
        if branch.parent is not None:
            parent = branches[branch.parent]
            shared = 0
            while (shared < min(len(parent.records), len(branch.records))
                   and parent.records[shared] == branch.records[shared]):
                shared += 1
            session.parent = planned[branch.parent].id
            session.fork_seq = _events_of(planned, branch.parent, shared, branches)
            start = shared
        out = _Events(sid, report, outputs_dir(path))
        for r in branch.records[start:]:
            line = branch.lines.get(str(r.get("id")))
            try:
                out.record(r, line)
            except SHAPE_ERRORS as exc:
                raise shape_error(str(path), exc, line) from exc
        session.events = out.events
        planned.append(session)
    return meta, planned


def _function_parts(records: list[dict[str, Any]], report: ImportReport
                    ) -> list[dict[str, Any]]:
    """Newer Gemini CLI JSONL records carry the API's own parts: a model record's
    ``functionCall`` parts (no ``toolCalls``), answered by a ``user`` record of
    ``functionResponse`` parts, and ``thought: true`` text parts. Read as the
    ``toolCalls`` (settled by their answers), the ``thoughts`` and the text they are: a
    record of only answers is no user message (each made an empty one), and a thought
    is not glued onto the answer's text. Records that carry none of these are kept as
    they are (the same objects: a fork's shared prefix still compares equal)."""
    out: list[dict[str, Any]] = []
    pending: dict[str, dict[str, Any]] = {}  # call id -> the call made for it
    settled: set[str] = set()  # calls a record's toolCalls holds with their results
    for record in records:
        calls = record.get("toolCalls")
        if isinstance(calls, list):  # any other shape is refused where it is read
            settled.update(str(c.get("id")) for c in calls
                           if isinstance(c, dict) and "result" in c)
        parts = _parts(record.get("content"))
        if not any(isinstance(p, dict) and ("functionCall" in p or "functionResponse" in p
                                             or p.get("thought") is True) for p in parts):
            out.append(record)
            continue
        rest = [p for p in parts if not (isinstance(p, dict) and (
            "functionCall" in p or "functionResponse" in p or p.get("thought") is True))]
        r = {**record, "content": rest}
        thoughts = [{"subject": "", "description": p.get("text")} for p in parts
                    if isinstance(p, dict) and p.get("thought") is True
                    and isinstance(p.get("text"), str)]
        if thoughts:
            r["thoughts"] = [*(r.get("thoughts") or []), *thoughts]
        calls = [p["functionCall"] for p in parts
                 if isinstance(p, dict) and isinstance(p.get("functionCall"), dict)]
        if calls and r.get("type") != "user" and not r.get("toolCalls"):
            made = []
            for j, fc in enumerate(calls):
                cid = str(fc.get("id") or f"{r.get('id')}-call-{j}")
                made.append(pending.setdefault(cid, {
                    "id": cid, "name": fc.get("name"), "args": fc.get("args"),
                    "status": "executing"}))
            r["toolCalls"] = made
        for answer in (p["functionResponse"] for p in parts
                       if isinstance(p, dict) and isinstance(p.get("functionResponse"), dict)):
            call = pending.pop(str(answer.get("id")), None) or next(
                (pending.pop(k) for k, c in list(pending.items())
                 if c.get("name") == answer.get("name")), None)
            if call is None:
                if str(answer.get("id")) not in settled:
                    report.note("a functionResponse that answers no functionCall: not mapped")
                # else the answers 0.61 writes after a record whose toolCalls hold them
                continue
            response = answer.get("response")
            call["result"] = [{"functionResponse": answer}]
            call["status"] = "error" if isinstance(response, dict) and "error" in response \
                else "success"
        if r.get("type") == "user" and not rest:
            continue  # only answers: they settled their calls
        out.append(r)
    return out


def checkpoint_history(data: Any) -> list[Any] | None:
    """The contents of a ``/chat save`` checkpoint (``checkpoint-<tag>.json``):
    ``{history: Content[], authType?}``, or a bare ``Content[]`` from older versions;
    None when ``data`` is not one."""
    history = data.get("history") if isinstance(data, dict) and "messages" not in data else data
    if not isinstance(history, list) or not history:
        return None
    first = history[0]
    return history if isinstance(first, dict) and "role" in first and "parts" in first else None


def _checkpoint(path: Path, data: Any, history: list[Any], report: ImportReport
                ) -> tuple[dict[str, Any], list[_Branch]]:
    """A checkpoint holds the model's own history (``Content`` with ``text``,
    ``thought``, ``functionCall`` and ``functionResponse`` parts) and no ids or times:
    each content becomes a record as the JSONL would hold it, its calls settled by
    the ``functionResponse`` that answers them (by id, else by name)."""
    # The tag alone would make two projects' `/chat save fix` one session: the first
    # content (Gemini's setup context: date, OS, folders) tells them apart.
    first = hashlib.blake2b(json.dumps(history[0], sort_keys=True).encode(),
                            digest_size=6).hexdigest()
    meta: dict[str, Any] = {"checkpoint": f"{path.stem}-{first}"}
    if isinstance(data, dict):
        meta.update({k: v for k, v in data.items() if k != "history"})
    records: list[dict[str, Any]] = []
    open_calls: list[dict[str, Any]] = []
    for i, content in enumerate(history):
        rid = f"content-{i}"
        parts = content.get("parts") if isinstance(content, dict) else None
        if not isinstance(parts, list):
            report.note("a checkpoint content without parts: not mapped", f"content {i}")
            continue
        role = content.get("role")
        answers = [p["functionResponse"] for p in parts
                   if isinstance(p, dict) and isinstance(p.get("functionResponse"), dict)]
        for answer in answers:
            call = next((c for c in open_calls if answer.get("id") and c["id"] == answer["id"]),
                        None) or next((c for c in open_calls
                                      if c["name"] == answer.get("name")), None)
            if call is None:
                report.note("a functionResponse that answers no call: not mapped",
                            f"content {i}")
                continue
            open_calls.remove(call)
            response = answer.get("response")
            failed = isinstance(response, dict) and "error" in response and (
                "output" not in response)
            call["result"] = [{"functionResponse": answer}]
            call["status"] = "error" if failed else "success"
        texts = [p for p in parts if isinstance(p, dict) and isinstance(p.get("text"), str)]
        other = [p for p in parts if isinstance(p, dict) and not isinstance(p.get("text"), str)
                 and "functionCall" not in p and "functionResponse" not in p]
        files = [p for p in other if _file(p) is not None]  # inlineData, fileData
        for p in other:
            if _file(p) is None:
                report.note(f"a checkpoint part {sorted(p)}: not mapped", f"content {i}")
        if role == "model":
            calls = [{"id": str(fc.get("id") or f"{fc.get('name')}-{i}-{j}"),
                      "name": fc.get("name"), "args": fc.get("args"), "status": "executing"}
                     for j, fc in enumerate(p["functionCall"] for p in parts
                                            if isinstance(p, dict)
                                            and isinstance(p.get("functionCall"), dict))]
            open_calls.extend(calls)
            records.append({"id": rid, "type": "gemini",
                            "content": [{"text": "".join(p["text"] for p in texts
                                                         if not p.get("thought"))}, *files],
                            "thoughts": [{"description": p["text"]} for p in texts
                                         if p.get("thought")],
                            "toolCalls": calls})
        elif texts or files:  # a user turn (a content of only functionResponses is none)
            records.append({"id": rid, "type": "user", "content": [
                {"text": "".join(p["text"] for p in texts)}, *files]})
        elif not answers:
            report.note(f"a checkpoint content of role {role!r} with no text: not mapped",
                        f"content {i}")
            continue
    return meta, [_Branch(records)]


def _events_of(planned: list[PlannedSession], index: int, records: int,
               branches: list[_Branch]) -> int:
    """How many events the first ``records`` records of branch ``index`` make (its seq)."""
    branch = branches[index]
    session = planned[index]
    own_start = 0
    base = 0
    if branch.parent is not None:
        parent = branches[branch.parent]
        shared = 0
        while (shared < min(len(parent.records), len(branch.records))
               and parent.records[shared] == branch.records[shared]):
            shared += 1
        if records <= shared:
            return _events_of(planned, branch.parent, records, branches)
        own_start, base = shared, session.fork_seq or 0
    scratch = _Events(session.id, ImportReport("", ""))
    for r in branch.records[own_start:records]:
        scratch.record(r, None)
    return base + len(scratch.events)
