"""OpenCode: ``opencode export`` JSON, the pre-1.2 ``storage/`` tree, the 1.2+ ``opencode.db``.

OpenCode's model is convlog's WithParts, so each part becomes the events that
rebuild it: a text part is ``text.added`` (+ ``part.ended`` when it has an end
time), a tool part the events that take it to its state (``pending`` adds it,
``running`` starts it, ``completed``/``error`` settle it, a compacted output is
compacted), and so on for all twelve part types. Times come from the parts and
infos, so ``convlog export --as opencode`` gives the same JSON back, modulo the
ids convlog requires to be UUIDs (docs/import.md lists every difference).

A live export (a tool still ``running``, no ``time.completed``) imports as an
open message: nothing is settled that OpenCode had not settled.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Final

import msgspec

from engine import events as ev
from engine.events import Event
from engine.importers import opencode_shapes as shape
from engine.importers.base import (
    SHAPE_ERRORS,
    ImportInputError,
    ImportReport,
    Plan,
    PlannedSession,
    json_document,
    loads,
    seal,
    stable_uuid,
)
from engine.importers.copies import content_digest, link_copies
from engine.importers.opencode_v1 import is_v1, v1_message
from engine.importers.opencode_v2 import v2_messages

FORMAT: Final = "opencode"
# OpenCode's error names and convlog's MessageError kinds, both ways.
ERROR_KINDS: Final = {
    "MessageAbortedError": "aborted", "ProviderAuthError": "auth", "APIError": "api",
    "MessageOutputLengthError": "output_length", "ContextOverflowError": "context_overflow",
    "UnknownError": "unknown",
}
# The info fields convlog's message events carry; any other field (``mode``, ``format``,
# ``structured``, a newer version's additions) is kept in ``metadata.opencode.info`` so
# ``convlog export --as opencode`` gives it back.
_USER_FIELDS: Final = frozenset({"id", "sessionID", "role", "time", "agent", "model", "system",
                                 "tools", "variant", "summary"})
_ASSISTANT_FIELDS: Final = frozenset({"id", "sessionID", "role", "time", "parentID", "modelID",
                                      "providerID", "agent", "system", "variant", "path", "cost",
                                      "tokens", "finish", "error"})
_TOKEN_FIELDS: Final = frozenset({"input", "output", "reasoning", "cache"})


def message_uuid(source_id: str, created: int) -> str:
    """The convlog message id of an OpenCode message id (ids must be UUIDs here)."""
    return stable_uuid(created, FORMAT, "message", source_id)


def session_uuid(source_id: str, created: int) -> str:
    return stable_uuid(created, FORMAT, "session", source_id)


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def _error(data: Any) -> ev.MessageError | None:
    if not isinstance(data, dict):
        return None
    name = str(data.get("name") or "UnknownError")
    body = _obj(data.get("data"))
    status = body.get("statusCode")
    retry = body.get("isRetryable")
    return ev.MessageError(
        kind=ERROR_KINDS.get(name, "unknown"),  # type: ignore[arg-type]
        message=str(body.get("message") or ""),
        status_code=status if isinstance(status, int) else None,
        retryable=retry if isinstance(retry, bool) else None)


def _tokens(data: shape.Tokens | None) -> ev.Tokens:
    if data is None:
        return ev.Tokens()
    cache = data.cache or shape.CacheTokens()
    return ev.Tokens(input=_int(data.input), output=_int(data.output),
                     reasoning=_int(data.reasoning),
                     cache=ev.CacheTokens(read=_int(cache.read), write=_int(cache.write)))


def _obj(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _convert(value: Any, kind: Any) -> Any:
    return None if value is None else msgspec.convert(value, kind)


class _Session:
    """One session's messages (each ``{info, parts}``) into events."""

    def __init__(self, report: ImportReport, source: str) -> None:
        self.report = report
        self.source = source
        self.events: list[Event] = []
        self.time = 1
        self.key = ""
        self.count = 0
        self.done = False  # the message being read is finished
        self.step: str | None = None  # the open step-start's part id in this message

    def add(self, e: Event, time: int | None = None) -> None:
        if time:
            self.time = max(time, 1)
        self.count += 1
        eid = stable_uuid(self.time, FORMAT, "event", self.key, str(self.count))
        self.events.append(msgspec.structs.replace(e, id=eid, time=self.time))

    def message(self, info: dict[str, Any], parts: list[dict[str, Any]]) -> None:
        if is_v1(info):  # OpenCode's first format: parts inside the message
            info, inner = v1_message(info, self.report)
            parts = inner + parts
        said = shape.info(info)  # a field of the wrong shape: its path
        source_id = str(said.id or "")
        if not source_id:
            self.report.note("a message without an id: not imported")
            return
        times = said.time or shape.Times()
        created = _int(times.created) or self.time
        self.key, self.count = source_id, 0
        mid = message_uuid(source_id, created)
        role = said.role
        kept = _kept(info, _USER_FIELDS if role == "user" else _ASSISTANT_FIELDS)
        untimed = [str(p.get("id")) for p in parts if p.get("type") == "text" and "time" not in p]
        original: dict[str, Any] = {"id": source_id}
        if kept:
            original["info"] = kept
        if untimed:  # OpenCode's user text parts have no times; convlog times every part
            original["untimed"] = untimed
        retries = {str(p.get("id")): p["error"] for p in parts
                   if p.get("type") == "retry" and not _plain_error(p.get("error"))}
        if retries:  # a retry part has no metadata: its error's other fields are kept here
            original["retry_errors"] = retries
        if isinstance(said, shape.UserInfo):
            model = said.model if isinstance(said.model, dict) else None
            start = ev.MessageStarted(
                message_id=mid, role="user", agent=str(said.agent or ""),
                model=ev.ModelRef(provider_id=str(model.get("providerID", "")),
                                  model_id=str(model.get("modelID", ""))) if model else None,
                system=said.system, tools=said.tools, variant=said.variant,
                summary=_convert(said.summary, ev.UserSummary),
                metadata={"opencode": original})
        elif isinstance(said, shape.AssistantInfo):
            parent = said.parentID
            start = ev.MessageStarted(
                message_id=mid, role="assistant", agent=str(said.agent or ""),
                model=ev.ModelRef(provider_id=str(said.providerID or ""),
                                  model_id=str(said.modelID or ""))
                if said.modelID else None,
                system=said.system, variant=said.variant,
                path=_convert(said.path, ev.PathInfo),
                parent_id=self.parents.get(str(parent)) if parent else None,
                metadata={"opencode": original})
        else:
            self.report.note(f"message role {role!r}: not imported")
            return
        self.parents[source_id] = mid
        self.add(start, created)
        self.done = role == "user" or bool(_int(times.completed) or said.error)
        self.step = None
        settled = True
        for part in sorted(parts, key=lambda p: str(p.get("id", ""))):
            settled = self.part(mid, part) and settled
        completed = _int(times.completed)
        error = _error(said.error)
        if role == "user" or completed or error:
            if not settled:
                self.report.note("a completed message with an unsettled tool: left open")
                return
            if self.step is not None and error is None:
                self._close_step(mid, "the message completed")
            self.add(ev.MessageCompleted(
                message_id=mid, cost=float(said.cost or 0.0),
                tokens=_tokens(said.tokens) if isinstance(said, shape.AssistantInfo) else None,
                finish=said.finish, error=error,
                # The error as OpenCode wrote it (its name and every data field) for export.
                metadata={"opencode": {"error": said.error}} if error is not None else None),
                completed or None)

    parents: dict[str, str]

    def part(self, mid: str, saved: dict[str, Any]) -> bool:
        """The events of one part; False when it is a tool left unsettled."""
        try:  # read as its kind's Struct: a field of the wrong shape is named by its path
            part = shape.part(saved)
        except msgspec.ValidationError as exc:
            raise msgspec.ValidationError(f"part {saved.get('id')!r}: {exc}") from exc
        kind = part.type
        pid = str(part.id or "")
        if not pid:
            self.report.note(f"a {kind!r} part without an id: not imported")
            return True
        if isinstance(part, shape.Text):
            times = part.time or shape.Times()
            meta = part.metadata
            if kind == "text":
                self.add(ev.TextAdded(message_id=mid, part_id=pid, text=str(part.text),
                                      synthetic=bool(part.synthetic),
                                      ignored=bool(part.ignored), metadata=meta),
                         _int(times.start) or None)
            else:
                self.add(ev.ReasoningAdded(message_id=mid, part_id=pid,
                                           text=str(part.text), metadata=meta),
                         _int(times.start) or None)
            if _int(times.end):
                self.add(ev.PartEnded(message_id=mid, part_id=pid), _int(times.end))
            elif not times.start or self.done:
                # No times at all (user parts) or a finished message: the part is complete.
                self.add(ev.PartEnded(message_id=mid, part_id=pid))
            return True
        if isinstance(part, shape.File):
            self.add(ev.FileAdded(message_id=mid, part_id=pid, mime=str(part.mime),
                                  url=str(part.url), filename=part.filename,
                                  source=_convert(part.source, ev.FilePartSource)))
            return True
        if isinstance(part, shape.Tool):
            return self.tool(mid, pid, part)
        if isinstance(part, shape.Simple):
            if kind == "step-start" and self.step is not None:
                self._close_step(mid, "the next step-start")
            elif kind == "step-finish" and self.step is None:
                # A finish with no start before it: its tokens and cost are kept.
                self.report.note("a step-finish without a step-start: a step-start is "
                                 "added before it (its part id ends ':opened')")
                self.add(ev.StepStarted(message_id=mid, part_id=f"{pid}:opened"))
            if kind in ("step-start", "step-finish"):
                self.step = pid if kind == "step-start" else None
            self.add(self.simple(mid, pid, part),
                     _int((part.time or shape.Times()).created) or None)
            return True
        self.report.note(f"part type {kind!r}: not imported")
        return True

    def _close_step(self, mid: str, by: str) -> None:
        """OpenCode can restart a step (1.15.x writes ``step-start, reasoning,
        step-start, ...``): the unfinished step ends where ``by`` begins, with a
        step-finish of reason ``unfinished`` (part id ``<step-start id>:unfinished``),
        reported, instead of refusing the whole export."""
        assert self.step is not None
        self.report.note(f"a step-start with no step-finish before {by}: closed as "
                         "'unfinished'")
        self.add(ev.StepFinished(message_id=mid, part_id=f"{self.step}:unfinished",
                                 reason="unfinished"))
        self.step = None

    def simple(self, mid: str, pid: str, p: shape.Simple) -> Event:
        ids: dict[str, Any] = {"message_id": mid, "part_id": pid}
        if isinstance(p, shape.StepStart):
            return ev.StepStarted(**ids, snapshot=p.snapshot)
        if isinstance(p, shape.StepFinish):
            return ev.StepFinished(**ids, reason=str(p.reason or ""), cost=float(p.cost or 0.0),
                                   tokens=_tokens(p.tokens), snapshot=p.snapshot)
        if isinstance(p, shape.Snapshot):
            return ev.SnapshotAdded(**ids, snapshot=str(p.snapshot or ""))
        if isinstance(p, shape.Patch):
            return ev.PatchAdded(**ids, hash=str(p.hash or ""),
                                 files=[str(f) for f in p.files or []])
        if isinstance(p, shape.Agent):
            return ev.AgentAdded(**ids, name=str(p.name or ""),
                                 source=_convert(p.source, ev.SourceText))
        if isinstance(p, shape.Subtask):
            model = p.model if isinstance(p.model, dict) else None
            return ev.SubtaskAdded(**ids, prompt=str(p.prompt or ""),
                                   description=str(p.description or ""),
                                   agent=str(p.agent or ""), command=p.command,
                                   model=ev.ModelRef(provider_id=str(model.get("providerID")),
                                                     model_id=str(model.get("modelID")))
                                   if model else None)
        if isinstance(p, shape.Retry):
            return ev.RetryAdded(**ids, attempt=_int(p.attempt),
                                 error=_error(p.error) or ev.MessageError(kind="unknown"))
        return ev.CompactionAdded(**ids, auto=bool(p.auto), overflow=p.overflow)

    def tool(self, mid: str, pid: str, part: shape.Tool) -> bool:
        state = part.state or shape.ToolState()
        status = state.status
        times = state.time or shape.Times()
        args = _obj(state.input)
        ids: dict[str, Any] = {"message_id": mid, "part_id": pid}
        self.add(ev.ToolAdded(**ids, call_id=str(part.callID or pid),
                              tool=str(part.tool or "unknown"), input=args,
                              raw=str(state.raw or ""), metadata=part.metadata),
                 _int(times.start) or None)
        if status == "pending":
            return False
        meta = state.metadata
        start = _int(times.start) or None
        if status == "error" and not start:
            self.add(ev.ToolFailed(**ids, error=str(state.error or ""), kind="aborted"))
            return True
        self.add(ev.ToolStarted(**ids, title=state.title if status == "running" else None,
                                metadata=meta if status == "running" else None), start)
        end = _int(times.end) or None
        if status == "running":
            return False
        if status == "completed":
            output = str(state.output or "")
            if not output:
                self.report.note("a completed tool with empty output reads '(no output)'")
            self.add(ev.ToolCompleted(
                **ids, output=output or "(no output)", title=str(state.title or ""),
                metadata=meta if isinstance(meta, dict) else None,
                attachments=[ev.Attachment(part_id=str(a.get("id")), mime=str(a.get("mime")),
                                           url=str(a.get("url")), filename=a.get("filename"))
                             for a in state.attachments or [] if isinstance(a, dict)]),
                end)
            if _int(times.compacted):
                self.add(ev.ToolOutputCompacted(**ids), _int(times.compacted))
            return True
        if status == "error":
            kind = (meta or {}).get("kind") if isinstance(meta, dict) else None
            if kind is None and isinstance(meta, dict) and meta.get("interrupted"):
                kind = "aborted"  # OpenCode marks an aborted tool as interrupted
            self.add(ev.ToolFailed(**ids, error=str(state.error or "error"),
                                   kind=kind if kind in ("aborted", "timeout", "cancelled",
                                                         "denied") else "error",
                                   metadata={k: v for k, v in meta.items() if k != "kind"}
                                   if isinstance(meta, dict) else None), end)
            return True
        self.report.note(f"tool status {status!r}: left pending")
        return False


Message = tuple[dict[str, Any], list[dict[str, Any]]]


def _plain_error(error: Any) -> bool:
    """True when convlog's MessageError gives ``error`` back exactly."""
    if not isinstance(error, dict) or set(error) - {"name", "data"}:
        return False
    data = error.get("data")
    return (error.get("name") in ERROR_KINDS and isinstance(data, dict)
            and not set(data) - {"message", "statusCode", "isRetryable"})


def _kept(info: dict[str, Any], mapped: frozenset[str]) -> dict[str, Any]:
    """The info fields no event carries (``time`` and ``tokens`` keys included), to give back."""
    kept = {k: v for k, v in info.items() if k not in mapped}
    times = _obj(info.get("time"))
    extra_times = {k: v for k, v in times.items() if k not in ("created", "completed")}
    if extra_times:
        kept["time"] = extra_times
    tokens = _obj(info.get("tokens")) if "tokens" in mapped else {}
    extra_tokens = {k: v for k, v in tokens.items() if k not in _TOKEN_FIELDS}
    if extra_tokens:
        kept["tokens"] = extra_tokens
    return kept


def plan_messages(report: ImportReport, info: dict[str, Any],
                  messages: Iterable[Message]) -> PlannedSession:
    """One OpenCode session (its info and its ``(info, parts)`` messages) as a planned session."""
    source_id = str(info.get("id") or "")
    times = _obj(info.get("time"))
    created = _int(times.get("created")) or 1
    builder = _Session(report, source_id)
    builder.parents = {}
    builder.time = created
    def created_of(info: dict[str, Any]) -> int:  # a first-format message: in metadata
        holder = _obj(info.get("metadata")) if is_v1(info) else info
        return _int(_obj(holder.get("time")).get("created"))

    ordered = sorted(messages, key=lambda m: (created_of(m[0]), str(m[0].get("id", ""))))
    copies: list[tuple[str, int, str]] = []
    digest = ""
    for message_info, parts in ordered:
        try:
            builder.message(message_info, parts)
        except SHAPE_ERRORS as exc:
            raise ImportInputError(report.source, f"message {message_info.get('id')!r}: "
                                   f"a field of the wrong shape ({exc})") from exc
        mid = builder.parents.get(str(message_info.get("id") or ""))
        if mid is not None:  # a message imported: a --fork copy is recognised by these
            digest = content_digest(digest, [message_info, parts])
            copies.append((digest, len(builder.events), mid))
    parent = info.get("parentID")
    version = info.get("version")
    return PlannedSession(session_uuid(source_id, created), "child" if parent else "main",
                          builder.events, created=created, title=str(info.get("title") or ""),
                          title_source="opencode title",
                          parent=str(parent) if parent else None, original_id=source_id,
                          tool_version=version if isinstance(version, str) else "",
                          metadata={"info": info}, copies=copies)


def _link_children(sessions: list[PlannedSession], created: dict[str, int]) -> list[PlannedSession]:
    """Parents first; a child's parent named by its convlog id when it is in the import."""
    by_source = {src: session_uuid(src, when) for src, when in created.items()}
    for s in sessions:
        if s.parent is not None:
            s.parent = by_source.get(s.parent, s.parent)
    return sorted(sessions, key=lambda s: s.kind != "main")


def _sealed(report: ImportReport, sessions: list[PlannedSession],
            created: dict[str, int]) -> Plan:
    """The sessions of one store as a sealed plan: children under their parents, and a
    ``--fork`` copy as a fork of what it copied."""
    plan = seal(Plan(report, _link_children(sessions, created)))
    link_copies(plan.sessions, report)
    return plan


def plan_export(path: Path) -> Plan:
    report = ImportReport(str(path), FORMAT)
    data = json_document(path, report)
    if not isinstance(data, dict) or not isinstance(data.get("messages"), list):
        raise ImportInputError(str(path), "an opencode export is {info, messages: [...]}")
    info = _obj(data.get("info"))
    if "todos" in data:
        report.note("todos: not mapped")
    messages = [(_obj(m.get("info")), [p for p in _list(m.get("parts")) if isinstance(p, dict)])
                for m in data["messages"] if isinstance(m, dict)]
    return seal(Plan(report, [plan_messages(report, info, messages)]))


def _document(path: Path) -> dict[str, Any]:
    data = json_document(path)
    if not isinstance(data, dict):
        raise ImportInputError(str(path), "an OpenCode storage file holds one JSON object")
    return data


def plan_storage(root: Path) -> Plan:
    """A ``storage/`` tree of either layout (see :func:`storage_sessions`)."""
    report = ImportReport(str(root), FORMAT)
    sessions, created = storage_sessions(root, report)
    if not sessions:
        raise ImportInputError(str(root), "no session/<projectID>/<ses_id>.json in this tree")
    return _sealed(report, sessions, created)


def storage_sessions(root: Path, report: ImportReport
                     ) -> tuple[list[PlannedSession], dict[str, int]]:
    """The sessions of a ``storage/`` tree. Up to 1.1.x: ``session/<projectID>/<ses>.json``,
    ``message/<ses>/<msg>.json``, ``part/<msg>/<prt>.json``. Before that (0.x, still on disks
    where OpenCode's first storage migration skipped a project: the ``global`` one, or one
    whose worktree was gone): ``project/<dir>/storage/session/info/<ses>.json``,
    ``session/message/<ses>/<msg>.json``, ``session/part/<ses>/<msg>/<prt>.json``. A file's
    name is its id when the JSON leaves it out."""
    old = (root / "session" / "info").is_dir() and not (root / "message").is_dir()
    infos = sorted((root / "session" / "info").glob("*.json")) if old else sorted(
        (root / "session").glob("*/*.json"))
    sessions, created = [], {}
    for sf in infos:
        info = {"id": sf.stem, **_document(sf)}
        sid = str(info["id"])
        created[sid] = _int(_obj(info.get("time")).get("created")) or 1
        messages = []
        msg_dir = root / "session" / "message" / sid if old else root / "message" / sid
        for mf in sorted(msg_dir.glob("*.json")):
            minfo = {"id": mf.stem, "sessionID": sid, **_document(mf)}
            part_dir = (root / "session" / "part" / sid / str(minfo["id"]) if old
                        else root / "part" / str(minfo["id"]))
            parts = [{"id": pf.stem, "sessionID": sid, "messageID": minfo["id"],
                      **_document(pf)}
                     for pf in sorted(part_dir.glob("*.json"))]
            messages.append((minfo, parts))
        sessions.append(plan_messages(report, info, messages))
    return sessions, created


def plan_data_dir(path: Path) -> Plan:
    """OpenCode's data directory (``~/.local/share/opencode``) whole: ``opencode.db`` (1.2+),
    the ``storage/`` tree it was migrated from, and the 0.x trees under
    ``project/*/storage`` OpenCode's own migration skipped. A session found in more than
    one place is read from the newest (the database, then ``storage/``)."""
    report = ImportReport(str(path), FORMAT)
    sessions: list[PlannedSession] = []
    created: dict[str, int] = {}
    sources: list[tuple[str, list[PlannedSession], dict[str, int]]] = []
    if (path / "opencode.db").exists():
        sources.append(("opencode.db", *db_sessions(path / "opencode.db", report)))
    trees = [path / "storage"] if (path / "storage" / "session").is_dir() else []
    trees += sorted(d for d in path.glob("project/*/storage") if (d / "session").is_dir())
    for tree in trees:
        sources.append((str(tree.relative_to(path)), *storage_sessions(tree, report)))
    for where, found, when in sources:
        for session in found:
            if session.original_id in created:
                report.note("a session kept in more than one place: its newest copy is "
                            "imported", f"{where}: {session.original_id}")
                continue
            created[session.original_id] = when[session.original_id]
            sessions.append(session)
    if not sources:
        raise ImportInputError(str(path), "no opencode.db or storage/ tree here")
    return _sealed(report, sessions, created)


def _json_column(value: Any) -> Any:
    if isinstance(value, str):
        try:
            return loads(value)
        except json.JSONDecodeError:
            return value
    return value


def plan_db(path: Path) -> Plan:
    """The 1.2+ SQLite database (see :func:`db_sessions`)."""
    report = ImportReport(str(path), FORMAT)
    sessions, created = db_sessions(path, report)
    return _sealed(report, sessions, created)


def db_sessions(path: Path, report: ImportReport
                ) -> tuple[list[PlannedSession], dict[str, int]]:
    """The sessions of an ``opencode.db`` (tables ``session``, ``message``, ``part``; the
    JSON ``data`` of a message leaves out ``id`` and ``sessionID``, a part's also
    ``messageID``; newer versions' ``session_message``; 2.0's ``session_v2``)."""
    try:
        db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            tables = {r[0] for r in db.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table'")}
            if not tables & {"session", "session_v2"}:
                raise sqlite3.DatabaseError("no session table")
            session_rows = _rows(db, "session") if "session" in tables else []
            # OpenCode 2.0 keeps its sessions in session_v2 (their messages in
            # session_message); the 1.x session table it migrated from stays beside it.
            # A session in both is a migrated one: the newer table's row stands.
            newer = {row.get("id"): row for row in (
                _rows(db, "session_v2") if "session_v2" in tables else [])}
            session_rows = sorted([*(newer.pop(row.get("id"), row) for row in session_rows),
                                   *newer.values()],
                                  key=lambda row: (_int(row.get("time_created")),
                                                   str(row.get("id"))))
            messages = db.execute("SELECT id, session_id, data FROM message "
                                  "ORDER BY session_id, time_created, id").fetchall(
                                  ) if "message" in tables else []
            parts = db.execute("SELECT id, message_id, session_id, data FROM part "
                               "ORDER BY message_id, id").fetchall() if "part" in tables else []
            v2_rows = _session_message_rows(db)
        finally:
            db.close()
    except sqlite3.DatabaseError as exc:
        raise ImportInputError(str(path), f"not an opencode.db ({exc})") from exc
    try:
        by_message: dict[str, list[dict[str, Any]]] = {}
        for pid, mid, sid, data in parts:
            by_message.setdefault(mid, []).append(
                {"id": pid, "sessionID": sid, "messageID": mid, **_row_json(data)})
        by_session: dict[str, list[Message]] = {}
        for mid, sid, data in messages:
            by_session.setdefault(sid, []).append(
                ({"id": mid, "sessionID": sid, **_row_json(data)}, by_message.get(mid, [])))
    except (json.JSONDecodeError, TypeError) as exc:
        raise ImportInputError(str(path), f"a message or part whose data is not a JSON "
                               f"object ({exc})") from exc
    v2: dict[str, list[tuple[str, str, dict[str, Any]]]] = {}
    for mid, sid, kind, data in v2_rows:
        try:
            v2.setdefault(sid, []).append((mid, str(kind), _row_json(data)))
        except (json.JSONDecodeError, TypeError) as exc:
            raise ImportInputError(str(path), f"a session_message {mid!r} whose data is not a "
                                   f"JSON object ({exc})") from exc
    listed = {str(row.get("id")) for row in session_rows}
    for sid in sorted({*v2, *by_session}, key=str):
        if str(sid) not in listed:  # messages of a session no session table holds: not lost
            report.note("messages of a session no session table holds: imported as a "
                        "session without its info", str(sid))
            session_rows.append({"id": sid})
    sessions, created = [], {}
    for row in session_rows:
        info = session_info(row)
        extra = {k: v for k, v in row.items() if k not in _SESSION_COLUMNS and v is not None}
        created[info["id"]] = _int(info["time"].get("created")) or 1
        messages = by_session.get(info["id"], [])
        if info["id"] in v2:
            if messages:  # a backfilled copy of these (or a mix the backfill refused)
                known = {str(m[0]["id"]) for m in messages}
                if any(mid not in known for mid, _, _ in v2[info["id"]]):
                    report.note("a session with messages in both message and session_message: "
                                "the message table's are imported")
            else:
                try:
                    messages = v2_messages(v2[info["id"]], report)
                except SHAPE_ERRORS as exc:
                    raise ImportInputError(str(path), f"session {info['id']!r}: a "
                                           f"session_message of the wrong shape ({exc})") from exc
        session = plan_messages(report, info, messages)
        if extra:  # a newer version's columns (cost, tokens_*, agent, model, goal, ...)
            session.metadata = {**(session.metadata or {}), "columns": extra}
        sessions.append(session)
    return sessions, created


_SESSION_COLUMNS: Final = frozenset({
    "id", "slug", "project_id", "workspace_id", "directory", "parent_id", "title", "version",
    "summary_additions", "summary_deletions", "summary_files", "summary_diffs", "share_url",
    "revert", "permission", "time_created", "time_updated", "time_compacting",
    "time_archived"})


def _rows(db: sqlite3.Connection, table: str) -> list[dict[str, Any]]:
    """A session table's rows as dicts (whatever columns this version has), oldest first."""
    cur = db.execute(f"SELECT * FROM {table} ORDER BY time_created, id")
    names = [d[0] for d in cur.description]
    return [dict(zip(names, row, strict=True)) for row in cur.fetchall()]


def _session_message_rows(db: sqlite3.Connection) -> list[tuple[Any, Any, Any, Any]]:
    """The ``session_message`` rows, in each session's order (``seq`` where the table has
    it); none when this database is older than the table."""
    columns = {r[1] for r in db.execute("PRAGMA table_info(session_message)")}
    if not columns:
        return []
    order = "seq, time_created, id" if "seq" in columns else "time_created, id"
    return db.execute(f"SELECT id, session_id, type, data FROM session_message "
                      f"ORDER BY session_id, {order}").fetchall()


def _row_json(data: Any) -> dict[str, Any]:
    value = loads(data)
    if not isinstance(value, dict):
        raise TypeError("not an object")
    return value


def session_info(row: dict[str, Any]) -> dict[str, Any]:
    """A ``session`` row as OpenCode's session info JSON (as its ``fromRow`` builds it);
    a column this version of the table lacks is simply absent."""
    info: dict[str, Any] = {"id": str(row.get("id")), "slug": row.get("slug"),
                            "projectID": row.get("project_id"),
                            "workspaceID": row.get("workspace_id"),
                            "directory": row.get("directory"), "parentID": row.get("parent_id"),
                            "title": row.get("title") or "", "version": row.get("version")}
    summary = {k: row[f"summary_{k}"] for k in ("additions", "deletions", "files")
               if row.get(f"summary_{k}") is not None}
    if summary:
        diffs = _json_column(row.get("summary_diffs"))
        info["summary"] = {**summary, **({"diffs": diffs} if diffs is not None else {})}
    if row.get("share_url"):
        info["share"] = {"url": row["share_url"]}
    for key in ("revert", "permission"):
        info[key] = _json_column(row.get(key))
    times = {"created": row.get("time_created") or 1, "updated": row.get("time_updated"),
             "compacting": row.get("time_compacting"), "archived": row.get("time_archived")}
    info["time"] = {k: v for k, v in times.items() if v is not None}
    return {k: v for k, v in info.items() if v is not None}


def is_opencode_dir(path: Path) -> bool:
    """OpenCode's data directory, or one of its storage trees (any layout)."""
    return ((path / "opencode.db").exists() or (path / "storage" / "session").is_dir()
            or any(path.glob("project/*/storage/session"))
            or ((path / "session").is_dir() and (path / "message").is_dir())
            or (path / "session" / "info").is_dir())


def plan_opencode(path: Path) -> Plan:
    if path.is_dir():
        if (path / "session").is_dir():
            return plan_storage(path)
        return plan_data_dir(path)
    if path.suffix == ".db":
        return plan_db(path)
    return plan_export(path)
