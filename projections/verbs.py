"""Read-side CLI verbs: ``export``, ``sessions``, ``diff`` and ``fork``, plugged in by entry point.

``export`` renders one session (as of any seq) in a provider's request format,
as OpenCode's export JSON, as a Q CLI save, or as the raw events. ``sessions``
lists a store's sessions as a lineage tree: forks under the session they
branched from, child sessions (an imported Claude Code sidechain) under the
session whose tool call spawned them.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from typing import Any, Final

from engine.cli import EXIT_OK, EXIT_USAGE
from engine.cli.args import STORE_HELP, store_url
from engine.codec import to_builtins
from engine.events import SessionImported, ToolAdded, ToolCompleted
from engine.mailbox_credentials import redacted
from engine.session import Session
from engine.store import open_store
from engine.store.base import SessionInfo, Store
from projections import views as v
from projections.integrations.otel import genai_spans, otlp_json
from projections.qcli import export_qcli
from projections.qcli.timetravel import conversation_at
from projections.render import (
    anthropic,
    common_format,
    gemini,
    llama,
    openai_chat,
    openai_responses,
)
from projections.serve.export import write_html
from projections.timetravel import at, diff
from projections.titles import TitleFold

_RENDER: Final[dict[str, Callable[[list[v.WithParts]], Any]]] = {
    "anthropic": anthropic.messages,
    "openai-chat": openai_chat.messages,
    "openai-responses": openai_responses.input_items,
    "gemini": gemini.contents,
    "llama": llama.messages,
    "common": common_format.messages,
}
AS_CHOICES: Final = ("opencode", "qcli", *_RENDER, "events", "html", "otel")


def _seq(store: Store, sid: str, given: int | None, verb: str) -> int | None:
    version = store.version(sid)
    seq = version if given is None else given
    if not 0 <= seq <= version:
        print(f"convlog {verb}: --at {seq} is outside 0..{version}", file=sys.stderr)
        return None
    return seq


# convlog's MessageError kinds and OpenCode's error names.
_ERROR_NAMES: Final = {"aborted": "MessageAbortedError", "auth": "ProviderAuthError",
                       "api": "APIError", "output_length": "MessageOutputLengthError",
                       "context_overflow": "ContextOverflowError", "unknown": "UnknownError"}


def _opencode_error(error: dict[str, Any]) -> dict[str, Any]:
    data: dict[str, Any] = {"message": error.get("message", "")}
    if error.get("statusCode") is not None:
        data["statusCode"] = error["statusCode"]
    if error.get("retryable") is not None:
        data["isRetryable"] = error["retryable"]
    return {"name": _ERROR_NAMES.get(str(error.get("kind")), "UnknownError"), "data": data}


def _opencode_part(part: dict[str, Any]) -> dict[str, Any]:
    if part.get("type") == "retry" and isinstance(part.get("error"), dict) \
            and "kind" in part["error"]:  # convlog's MessageError, not one kept as written
        part["error"] = _opencode_error(part["error"])
    state = part.get("state")
    if part.get("type") == "tool" and isinstance(state, dict) and state.get("status") == "error":
        meta = dict(state.get("metadata") or {})
        kind = meta.pop("kind", None)  # convlog's failure kind; OpenCode has only interrupted
        if kind == "aborted":
            meta["interrupted"] = True
        if meta:
            state["metadata"] = meta
        else:
            state.pop("metadata", None)
    return part


def _original(info: dict[str, Any]) -> dict[str, Any]:
    """What an OpenCode import kept of a message (``metadata.opencode``), taken out of it."""
    meta = info.get("metadata")
    if not isinstance(meta, dict) or not isinstance(meta.get("opencode"), dict):
        return {}
    meta = dict(meta)
    original: dict[str, Any] = meta.pop("opencode")
    if meta:
        info["metadata"] = meta
    else:
        info.pop("metadata")
    return original


def _give_back(info: dict[str, Any], kept: dict[str, Any]) -> None:
    """Merge the info fields an import kept aside (``time`` and ``tokens`` key by key)."""
    for key, value in kept.items():
        if key in ("time", "tokens") and isinstance(value, dict):
            info[key] = {**info.get(key, {}), **value}
        else:
            info[key] = value


def opencode_messages(messages: list[dict[str, Any]], session_id: str | None = None
                      ) -> list[dict[str, Any]]:
    """convlog's WithParts JSON in OpenCode's own spelling (errors, user message times).

    A message an OpenCode import wrote gets its own ids back (``msg_…``, and
    ``session_id`` for the session), its error as OpenCode wrote it, the info fields
    convlog has no place for, and its untimed text parts without times.
    """
    originals = [_original(m["info"]) for m in messages]
    ids = {m["info"]["id"]: o["id"] for m, o in zip(messages, originals, strict=True)
           if isinstance(o.get("id"), str)}
    for m, original in zip(messages, originals, strict=True):
        info = m["info"]
        if isinstance(info.get("error"), dict):
            info["error"] = original.get("error") or _opencode_error(info["error"])
        if info.get("role") == "user":
            info.get("time", {}).pop("completed", None)  # OpenCode's user messages have none
        mid = info["id"] = ids.get(info["id"], info["id"])
        if session_id is not None:
            info["sessionID"] = session_id
        if info.get("parentID") in ids:
            info["parentID"] = ids[info["parentID"]]
        if isinstance(original.get("info"), dict):
            _give_back(info, original["info"])
        untimed = set(original.get("untimed") or ())
        retry_errors = original.get("retry_errors") or {}
        for part in m["parts"]:
            if part.get("type") == "retry" and part.get("id") in retry_errors:
                part["error"] = retry_errors[part["id"]]
            part["messageID"] = mid
            part["sessionID"] = info["sessionID"]
            if part.get("type") == "tool":
                # convlog's copy of the model's argument text: OpenCode's tool part has
                # no such field (a pending call keeps it in state.raw, as OpenCode does).
                part.pop("raw", None)
            if part.get("id") in untimed:
                part.pop("time", None)
            attachments = (part.get("state") or {}).get("attachments")
            for file in attachments if isinstance(attachments, list) else ():
                file["messageID"], file["sessionID"] = mid, info["sessionID"]
        m["parts"] = [_opencode_part(p) for p in m["parts"]]
    return messages


def opencode_export(store: Store, sid: str, seq: int) -> dict[str, Any]:
    """OpenCode's ``opencode export`` shape: ``{info, messages: [{info, parts}]}``.

    A session an OpenCode import created (not a fork of one) comes back with the
    session info OpenCode wrote, its ``ses_…`` id included.
    """
    info = store.session_info(sid)
    head = None if info.parent else imported_from(store, sid)
    kept = (head.metadata or {}).get("info") if head is not None else None
    if head is not None and head.format == "opencode" and isinstance(kept, dict):
        session = dict(kept)
    else:
        session = {"id": sid, "time": {"created": info.created}}
        if info.parent:
            session["parentID"] = info.parent
    messages = opencode_messages(at(store, sid, seq).to_json(), str(session.get("id", sid)))
    return {"info": session, "messages": messages}


class _StoreVerb:
    """A verb on an existing store (never created): the ``store`` argument, with
    ``--session`` when the verb reads one session; :meth:`use` runs on the open
    store, which is closed however it ends."""

    writes = False  # a verb that only reads opens the store read-only

    name: str
    help: str
    one_session = True

    def configure(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("store", type=store_url, help=STORE_HELP)
        if self.one_session:
            parser.add_argument("--session", required=True, help="session id")
        self.add_arguments(parser)

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        """The verb's own arguments, after ``store`` and ``--session``."""

    def run(self, args: argparse.Namespace) -> int:
        with open_store(args.store, create=False, read_only=not self.writes) as store:
            return self.use(store, args)

    def use(self, store: Store, args: argparse.Namespace) -> int:
        raise NotImplementedError


class ExportCommand(_StoreVerb):
    name = "export"
    help = "write one session as OpenCode JSON, a Q CLI save, a provider request, or events"

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--as", dest="fmt", choices=AS_CHOICES, default="opencode")
        parser.add_argument("--at", type=int, help="the session as of this seq")

    def use(self, store: Store, args: argparse.Namespace) -> int:
        seq = _seq(store, args.session, args.at, self.name)
        if seq is None:
            return EXIT_USAGE
        if args.fmt == "html":  # the whole session, every seq: --at does not apply
            write_html(store, args.session, sys.stdout)  # streamed: memory stays bounded
            return EXIT_OK
        if args.fmt == "events":
            for e in store.read(args.session, 1, seq):
                print(json.dumps(to_builtins(redacted(e)), ensure_ascii=False))
            return EXIT_OK
        data: Any
        if args.fmt == "opencode":
            data = opencode_export(store, args.session, seq)
        elif args.fmt == "qcli":
            data = export_qcli(conversation_at(store, args.session, seq).state())
        elif args.fmt == "otel":  # OpenTelemetry GenAI spans as OTLP/JSON
            data = otlp_json(genai_spans(args.session, at(store, args.session, seq).messages()))
        else:
            data = _RENDER[args.fmt](at(store, args.session, seq).messages())
        print(json.dumps(data, ensure_ascii=False, indent=2))
        return EXIT_OK


def imported_from(store: Store, sid: str) -> SessionImported | None:
    """The session's ``session.imported`` (its first event), if an import created it."""
    for e in store.read(sid, 1, 1):
        return e if isinstance(e, SessionImported) else None
    return None


def child_links(store: Store, sessions: list[SessionInfo]) -> dict[str, str]:
    """child session id -> its parent: the session whose tool part names it
    (``child_session``), else the one its ``session.imported`` names
    (``metadata.parent_session``: an OpenCode session's ``parentID``)."""
    links: dict[str, str] = {}
    known = {s.id for s in sessions}
    for info in sessions:
        for e in store.read(info.id, (info.fork_seq or 0) + 1):
            # Linked from the spawning call (prompt match) or from its result (agent id).
            meta = e.metadata if isinstance(e, ToolAdded | ToolCompleted) else None
            child = (meta or {}).get("child_session")
            if isinstance(child, str) and child in known and child != info.id:
                links.setdefault(child, info.id)
    for info in sessions:
        head = None if info.parent else imported_from(store, info.id)
        parent = (head.metadata or {}).get("parent_session") if head is not None else None
        if isinstance(parent, str) and parent in known and parent != info.id:
            links.setdefault(info.id, parent)
    return links


def listing(store: Store) -> list[dict[str, Any]]:
    """The store's sessions in lineage order (forks and children under their parent),
    each ``{id, depth, kind, parent, fork_seq, events, created, title, title_source,
    imported}``: ``kind`` main, fork or child; ``title`` the latest ``session.titled``,
    else the first prompt (``title_source`` says which); ``imported`` where an import
    found it (a fork shares its parent's, so it is null there)."""
    sessions = store.sessions()
    children = child_links(store, sessions)
    info_of = {info.id: info for info in sessions}
    kids: dict[str | None, list[tuple[str, str]]] = {}
    for info in sessions:
        if info.parent:
            kids.setdefault(info.parent, []).append((info.id, "fork"))
        elif info.id in children:
            kids.setdefault(children[info.id], []).append((info.id, "child"))
        else:
            kids.setdefault(None, []).append((info.id, "main"))
    rows: list[dict[str, Any]] = []

    def walk(parent: str | None, depth: int) -> None:
        for sid, kind in kids.get(parent, []):
            info = info_of[sid]
            head = None if kind == "fork" else imported_from(store, sid)
            title, source = TitleFold().apply_all(store.read(sid)).shown()
            rows.append({
                "id": sid, "depth": depth, "kind": kind, "parent": parent,
                "fork_seq": info.fork_seq, "events": store.version(sid),
                "created": info.created, "title": title, "title_source": source,
                "imported": None if head is None else {
                    "format": head.format, "source": head.source,
                    "original_id": head.original_id, "tool_version": head.tool_version}})
            walk(sid, depth + 1)

    walk(None, 0)
    return rows


def lineage(store: Store) -> list[str]:
    """The store's sessions as indented lines: forks and children under their parent,
    each with its title (the tool's name for it, else its first prompt)."""
    lines: list[str] = []
    for row in listing(store):
        label = {"main": "", "fork": f" (fork at {row['fork_seq']})", "child": " (child)"}[
            row["kind"]]
        if row["imported"] is not None:  # where an import found it
            label += f" from {row['imported']['format']} {row['imported']['source']}"
        if row["title"]:
            label += f"  {json.dumps(row['title'], ensure_ascii=False)}"
        lines.append(f"{'  ' * row['depth']}{row['id']}  {row['events']} events{label}")
    return lines


class SessionsCommand(_StoreVerb):
    name = "sessions"
    help = ("list a store's sessions as a lineage tree (forks and child sessions), with "
            "their titles")

    one_session = False

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--json", action="store_true",
                            help="print the sessions as a JSON array (id, depth, kind, "
                                 "parent, fork_seq, events, created, title, title_source, "
                                 "imported)")

    def use(self, store: Store, args: argparse.Namespace) -> int:
        if args.json:
            print(json.dumps(listing(store), ensure_ascii=False, indent=2))
            return EXIT_OK
        for line in lineage(store):
            print(line)
        return EXIT_OK


class DiffCommand(_StoreVerb):
    name = "diff"
    help = "what changed in a session between seq A and seq B"

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("a", type=int, help="the earlier seq")
        parser.add_argument("b", type=int, help="the later seq")

    def use(self, store: Store, args: argparse.Namespace) -> int:
        for seq in (args.a, args.b):
            if _seq(store, args.session, seq, self.name) is None:
                return EXIT_USAGE
        print(diff(store, args.session, args.a, args.b).render())
        return EXIT_OK


class ForkCommand(_StoreVerb):
    name = "fork"
    writes = True
    help = "a new session sharing a session's first SEQ events"

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--at", type=int, required=True, help="the fork point (a seq)")

    def use(self, store: Store, args: argparse.Namespace) -> int:
        if _seq(store, args.session, args.at, self.name) is None:
            return EXIT_USAGE
        fork = Session.open(store, args.session).fork(args.at)
        print(fork.id)
        return EXIT_OK


EXPORT = ExportCommand()
SESSIONS = SessionsCommand()
DIFF = DiffCommand()
FORK = ForkCommand()
