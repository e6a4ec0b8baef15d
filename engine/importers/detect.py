"""Which importer reads a path: ``--format auto`` sniffs the first bytes, never the whole file."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, Final

import msgspec

from engine import events as ev
from engine.collector import collector_paused
from engine.importers.aider import plan_aider
from engine.importers.base import (
    ImportInputError,
    ImportReport,
    Plan,
    Unmapped,
    check_text,
    decode,
    loads,
    open_binary,
)
from engine.importers.claude_code import files_of, plan_claude_code, plan_files
from engine.importers.codex import plan_codex, plan_codex_files
from engine.importers.copies import link_copies
from engine.importers.gemini import LOGS, plan_gemini, plan_gemini_files
from engine.importers.opencode import is_opencode_dir, plan_opencode
from engine.importers.qcli import plan_qcli
from engine.importers.qcli_db import DB_NAME, is_qcli_db, is_sqlite, plan_qcli_db

Planner = Callable[[Path, bool], Plan]

FORMATS: Final = ("claude-code", "codex", "opencode", "gemini", "qcli", "aider")
_PLANNERS: Final[dict[str, Planner]] = {
    "claude-code": lambda p, lenient: plan_claude_code(p, lenient=lenient),
    "codex": lambda p, lenient: plan_codex(p, lenient=lenient),
    "qcli": lambda p, _lenient: plan_qcli_db(p) if p.is_dir() or is_sqlite(p) else plan_qcli(p),
    "opencode": lambda p, _lenient: plan_opencode(p),
    "gemini": lambda p, lenient: plan_gemini(p, lenient=lenient),
    "aider": lambda p, _lenient: plan_aider(p),
}
_CLAUDE_TYPES: Final = frozenset({"user", "assistant", "summary", "system", "progress",
                                  "file-history-snapshot", "queue-operation", "attachment",
                                  "last-prompt", "custom-title", "ai-title", "agent-name"})
_HEAD: Final = 64 * 1024


def detect(path: Path) -> str:
    """The format of ``path`` (a file, or a directory of transcripts)."""
    if path.is_dir():
        if is_opencode_dir(path):
            return "opencode"
        if is_qcli_db(path / DB_NAME):
            return "qcli"  # Q CLI's data directory (~/.local/share/amazon-q)
        if any(path.glob("*.aider.chat.history.md")) or (
                path / ".aider.chat.history.md").exists():
            return "aider"
        for child in sorted(path.rglob("*.jsonl")):
            return detect(child)
        raise ImportInputError(str(path), "no transcript found in this directory")
    if is_sqlite(path):
        if is_qcli_db(path):
            return "qcli"  # data.sqlite3: the conversations Q CLI saves by itself
        return "opencode"
    if path.name.endswith(".db"):
        return "opencode"
    with open_binary(path) as f:
        head = f.read(_HEAD)
    check_text(path, head)
    text = head.lstrip()
    if text.startswith(b"# aider chat started") or path.name.endswith(".aider.chat.history.md"):
        return "aider"
    if text.startswith(b"[") and b'"role"' in head and b'"parts"' in head:
        return "gemini"  # an older Gemini CLI /chat save: a bare list of contents
    if path.name == LOGS or (text.startswith(b"[") and b'"messageId"' in head
                             and b'"sessionId"' in head):
        return "gemini"  # Gemini CLI's logs.json: the prompts of every session
    if not text.startswith(b"{"):
        raise ImportInputError(str(path), "not a transcript this tool knows (not JSON, "
                               "JSON lines or an aider history)", 1)
    lines = text.split(b"\n")
    record = _record(lines[0])
    if isinstance(record, dict):
        kind = record.get("type")
        if kind in ("console", "network") and "sessionId" in record:
            raise ImportInputError(str(path), "a Gemini CLI activity log (console and "
                                   "network events), not a conversation", 1)
        if "payload" in record and "type" in record:
            return "codex"
        if _is_claude(record):
            return "claude-code"
        if "projectHash" in record or "$set" in record:
            return "gemini"
        if kind is None and "id" in record and "timestamp" in record:
            return "codex"  # a rollout before the envelope: a bare {id, timestamp, ...} header
        # Claude Code 2.1.x opens many files with metadata records of types added since
        # ({"type": "atis-latch", "sessionId"}, "mode", "permission-mode", ...: no uuid):
        # while the lines are such records, the first line that is a known record decides.
        while isinstance(kind, str) and "payload" not in record and len(lines) > 2:
            lines = lines[1:]  # the last piece of the head may be cut: never read it
            record = _record(lines[0])
            if not isinstance(record, dict):
                break
            if _is_claude(record):
                return "claude-code"
            kind = record.get("type")
    if b'"conversation_id"' in head:
        return "qcli"
    if b'"projectHash"' in head or (b'"history"' in head and b'"parts"' in head):
        return "gemini"  # a session, or a /chat save {history: [{role, parts}], authType}
    if b'"info"' in head and b'"messages"' in head:
        return "opencode"
    raise ImportInputError(str(path), "not a transcript format this tool knows", 1)


def _record(line: bytes) -> Any:
    """One line of a file's head as JSON (None when it is not: a multi-line document)."""
    try:
        return decode(line)
    except msgspec.DecodeError:
        try:  # a lone surrogate msgspec refuses (json_lines reads it), or a document
            return loads(line)
        except ValueError:
            return None


def _is_claude(record: dict[str, Any]) -> bool:
    kind = record.get("type")
    return (isinstance(kind, str) and kind in _CLAUDE_TYPES) or "parentUuid" in record


@collector_paused()  # builds only: see engine.collector
def plan_path(path: Path, fmt: str = "auto", *, lenient: bool = False) -> Plan:
    """Read ``path`` in ``fmt`` (or the detected format) into a plan; nothing is written."""
    if not path.exists():
        raise ImportInputError(str(path), "no such file or directory")
    if fmt == "auto" and path.is_dir():
        found = directory_formats(path)
        if len(found) > 1:
            return plan_directory(path, lenient=lenient)
        try:
            chosen = detect(path)
        except ImportInputError:
            if not found:
                raise
            # No *.jsonl, but files of one format (Gemini's older session JSON, /chat
            # saves, Q CLI saves): each read by its importer, as a mixed directory is.
            return plan_directory(path, lenient=lenient)
    else:
        chosen = detect(path) if fmt == "auto" else fmt
    planner = _PLANNERS.get(chosen)
    if planner is None:
        raise ImportInputError(str(path), f"the {chosen} importer is not implemented yet "
                               f"(implemented: {', '.join(sorted(_PLANNERS))})")
    return planner(path, lenient)


def _candidates(root: Path) -> list[Path]:
    """The files of a directory that may be transcripts; companions read with their session
    (a Claude Code ``subagents/`` file, OpenCode's ``storage/`` JSON) are left out."""
    out = []
    for f in sorted(root.rglob("*")):
        rel = f.relative_to(root).parts
        if not f.is_file() or "subagents" in rel or "storage" in rel or "tool-results" in rel:
            continue
        if f.suffix in (".jsonl", ".json", ".db") or f.name == DB_NAME or f.name.endswith(
                ".aider.chat.history.md"):
            out.append(f)
    return out


@collector_paused()  # builds only: see engine.collector
def plan_directory(path: Path, *, lenient: bool = False) -> Plan:
    """A directory holding several formats: each file read by its own importer (a file no
    importer recognises is listed in the report), all of it in one plan, so the import
    is still all or nothing."""
    plans: list[Plan] = []
    unknown: list[str] = []
    failed: list[tuple[str, str]] = []
    roots = _opencode_roots(path)
    plans.extend(plan_opencode(r) for r in roots)
    claude: list[Path] = []
    gemini: list[Path] = []
    codex: list[Path] = []
    for f in _candidates(path):
        if any(f.is_relative_to(r) for r in roots):
            continue  # read with its OpenCode data directory
        try:
            chosen = detect(f)
        except ImportInputError:
            unknown.append(str(f.relative_to(path)))
            continue
        if chosen == "claude-code":  # read together: a resumed file shares its uuids
            claude.extend(files_of(f))
        elif chosen == "gemini":  # read together: subagents and logs.json find their sessions
            gemini.append(f)
        elif chosen == "codex" and not is_sqlite(f):  # together: a spawned agent finds its parent
            codex.append(f)
        else:
            try:
                plans.append(_PLANNERS[chosen](f, lenient))
            except ImportInputError as exc:
                # One file the importer refuses never refuses the folder: it is listed.
                failed.append((str(f.relative_to(path)), exc.reason))
    if gemini:
        plans.append(plan_gemini_files(gemini, path, lenient=lenient))
    if codex:
        plans.append(plan_codex_files(codex, path, lenient=lenient))
    if claude:
        plans.insert(0, plan_files(claude, str(path), lenient=lenient))
    if not plans:
        if failed:
            raise ImportInputError(str(Path(path) / failed[0][0]), failed[0][1])
        raise ImportInputError(str(path), "no transcript found in this directory")
    formats = sorted({p.report.format for p in plans})
    if len(plans) == 1:
        plan = plans[0]
    else:
        plan = Plan(ImportReport(str(path), "+".join(formats)), sealed=True)
        for part in plans:
            plan.sessions.extend(part.sessions)
            for what, item in part.report.unmapped.items():
                key = f"[{part.report.format}] {what}" if len(formats) > 1 else what
                merged = plan.report.unmapped.setdefault(key, Unmapped())
                merged.count += item.count
                name = Path(part.report.source).name
                merged.lines.extend(f"{name}:{n}" if isinstance(n, int) else n
                                    for n in item.lines[:20 - len(merged.lines)])
            plan.report.skipped.extend(part.report.skipped)
            plan.report.redactions += part.report.redactions
    for name in unknown:
        plan.report.note("a file no importer recognises: not imported", name)
    for name, reason in failed:
        plan.report.note(f"a file its importer refused, not imported: {reason}", name)
    _link_children(plan)
    link_copies(plan.sessions, plan.report)  # a folder of `opencode export` files
    return plan


def _link_children(plan: Plan) -> None:
    """A child session read from another file than its parent's (a folder of ``opencode
    export`` files) names its parent by the tool's id: linked to the parent's session
    when the folder holds it (it stood at the top level)."""
    ids = {s.id for s in plan.sessions}
    by_original = {s.original_id: s.id for s in plan.sessions if s.original_id}
    for s in plan.sessions:
        if s.kind != "child" or s.parent in ids or s.parent not in by_original:
            continue
        s.parent = by_original[s.parent]
        head = s.events[0] if s.events else None
        if isinstance(head, ev.SessionImported):
            s.events[0] = msgspec.structs.replace(
                head, metadata={**(head.metadata or {}), "parent_session": s.parent})


def _opencode_roots(path: Path) -> list[Path]:
    """OpenCode data directories (or storage trees) anywhere under ``path``: each is read
    whole by the OpenCode importer, its files by no other."""
    if is_opencode_dir(path):
        return [path]
    found = {f.parent for f in path.rglob("opencode.db")}
    found |= {d.parent for d in path.rglob("storage") if (d / "session").is_dir()}
    # A 0.x tree project/<dir>/storage belongs to the data directory above project/.
    found = {r.parent.parent if r.parent.name == "project" and is_opencode_dir(
        r.parent.parent) else r for r in found}
    roots = sorted(r for r in found if is_opencode_dir(r))
    return [r for r in roots if not any(r != o and r.is_relative_to(o) for o in roots)]


def directory_formats(path: Path) -> set[str]:
    """The formats of the files directly readable in ``path`` (for ``--format auto``)."""
    found = set()
    if _opencode_roots(path):
        found.add("opencode")
    for f in _candidates(path):
        try:
            found.add(detect(f))
        except ImportInputError:
            continue
    return found
