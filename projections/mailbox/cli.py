"""``convlog mailbox ...`` and ``convlog mcp``: manage and serve the agents' mailbox.

Plugged into ``convlog`` through the ``convlog.commands`` entry-point group.
``mailbox`` creates projects, adds and removes agents, sets credentials, issues
and revokes session tokens, lists a project's agents, and moves messages between
the log and files (the seed's ``.ai-pm`` tree, Claude Code Agent Teams inboxes).

The mailbox has its own default store, ``convlog-mailbox.db``: never
``convlog-demo.db``, which ``convlog demo`` recreates.
"""

from __future__ import annotations

import argparse
import json
import secrets
import sys
from pathlib import Path
from typing import Any

from engine.cli import EXIT_OK, EXIT_REJECTED, EXIT_USAGE
from engine.mailbox import MailboxError
from engine.store import open_store
from engine.store.base import Store
from projections.mailbox.aipm import export_tree, import_tree, iso
from projections.mailbox.mailbox import DEFAULT_TTL_MS, MAILBOX_SESSION, Mailbox

MAILBOX_URL = "sqlite:///convlog-mailbox.db"
EXIT_TORN = EXIT_REJECTED  # the import found torn messages (reported, not hidden)


def _store_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("--store", default=MAILBOX_URL,
                   help="store URL (the mailbox's own by default, never the demo's)")


def _project_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("--project", required=True, help="project id")


def _credential_args(p: argparse.ArgumentParser, *, required: bool) -> None:
    # Never on the command line: other users of the machine can read argv (ps).
    g = p.add_mutually_exclusive_group(required=required)
    g.add_argument("--credential-file", type=Path, metavar="FILE",
                   help="read the agent's credential from FILE (its first line)")
    g.add_argument("--credential-stdin", action="store_true",
                   help="read the agent's credential from standard input (its first line)")
    g.add_argument("--generate-credential", action="store_true",
                   help="make a random credential and print it once")


def _read_credential(args: argparse.Namespace) -> tuple[str | None, bool]:
    """The credential the arguments name, and whether to print it (generated)."""
    if getattr(args, "generate_credential", False):
        return secrets.token_urlsafe(24), True
    if getattr(args, "credential_stdin", False):
        text = sys.stdin.readline()
    elif getattr(args, "credential_file", None) is not None:
        text = args.credential_file.read_text(encoding="utf-8").partition("\n")[0]
    else:
        return None, False
    credential = text.strip("\r\n")
    if not credential:
        raise MailboxError("invalid_request", "the credential is empty")
    return credential, False


class MailboxCommand:
    name = "mailbox"
    help = ("the agents' mailbox: projects, agents, credentials, tokens; export or import "
            "messages as the seed's .ai-pm files or Claude Code Agent Teams inboxes")

    def configure(self, parser: argparse.ArgumentParser) -> None:
        sub = parser.add_subparsers(dest="action", required=True)

        project = sub.add_parser("project", help="create a project")
        psub = project.add_subparsers(dest="verb", required=True)
        create = psub.add_parser("create", help="create a project (agents then join it)")
        create.add_argument("project_id", metavar="ID")
        create.add_argument("--dir", default="", help="its working directory (sending "
                            "fails with working_directory_not_set until one is set)")
        create.add_argument("--name", default="", help="a display name")
        _store_arg(create)

        agent = sub.add_parser("agent", help="add an agent to a project, or remove it")
        asub = agent.add_subparsers(dest="verb", required=True)
        add = asub.add_parser("add", help="register the agent if new, and assign it to "
                                          "the project")
        add.add_argument("agent_id", metavar="AGENT")
        add.add_argument("--name", default="", help="a display name (new agents)")
        _credential_args(add, required=False)
        remove = asub.add_parser("remove", help="unassign the agent from the project (its "
                                                "tokens there stop working)")
        remove.add_argument("agent_id", metavar="AGENT")
        for p in (add, remove):
            _project_arg(p)
            _store_arg(p)

        agents = sub.add_parser("agents", help="list a project's agents with their status")
        _project_arg(agents)
        _store_arg(agents)

        cred = sub.add_parser("credential", help="set or replace an agent's credential "
                                                 "(kept as a salted scrypt verifier)")
        cred.add_argument("agent_id", metavar="AGENT")
        _credential_args(cred, required=True)
        _store_arg(cred)

        token = sub.add_parser("token", help="issue or revoke a session token")
        tsub = token.add_subparsers(dest="verb", required=True)
        issue = tsub.add_parser("issue", help="print a new session token for AGENT in the "
                                              "project (no credential asked: you hold the "
                                              "store)")
        issue.add_argument("agent_id", metavar="AGENT")
        issue.add_argument("--ttl-hours", type=float, default=DEFAULT_TTL_MS / 3_600_000,
                           help="how long it is valid (default 24)")
        revoke = tsub.add_parser("revoke", help="revoke a session token read from standard "
                                                "input (or FILE)")
        revoke.add_argument("--token-file", type=Path, metavar="FILE",
                            help="read the token from FILE instead of standard input")
        for p in (issue, revoke):
            _project_arg(p)
            _store_arg(p)

        exp = sub.add_parser("export", help="write the project's messages as files")
        exp.add_argument("dir", type=Path)
        exp.add_argument("--layout", choices=["ai-pm", "agent-teams"], default="ai-pm",
                         help="ai-pm: DIR/.ai-pm/agents/{agent}/chat.jsonl (the seed's); "
                              "agent-teams: DIR/config.json and DIR/inboxes/{agent}.json "
                              "(Claude Code Agent Teams)")
        imp = sub.add_parser("import", help="read DIR (an .ai-pm tree or an Agent Teams "
                                            "team directory) into the log")
        imp.add_argument("dir", type=Path)
        imp.add_argument("--include-torn", action="store_true",
                         help="ai-pm: also log messages only one side has")
        imp.add_argument("--assign", action="store_true",
                         help="create the project, register and assign the agents the files "
                              "name; without it nothing changes membership, and the "
                              "changes needed are printed instead")
        for p in (exp, imp):
            _store_arg(p)
            _project_arg(p)

    def run(self, args: argparse.Namespace) -> int:
        if args.action == "import" and not args.dir.is_dir():  # before the store is opened
            print(f"convlog mailbox import: no such directory: {args.dir}", file=sys.stderr)
            return EXIT_USAGE
        try:
            credential, show = _read_credential(args)
        except (OSError, MailboxError) as exc:
            print(f"convlog mailbox: {exc}", file=sys.stderr)
            return EXIT_USAGE
        reads = args.action in ("export", "agents")
        store = open_store(args.store, create=not reads)
        try:
            if reads and MAILBOX_SESSION not in {i.id for i in store.sessions()}:
                # Opening a Mailbox would create the log: a read verb never writes.
                print(f"convlog mailbox {args.action}: the store has no mailbox",
                      file=sys.stderr)
                return EXIT_USAGE
            return self._run(store, args, credential, show)
        except MailboxError as exc:
            print(f"convlog mailbox {args.action}: {exc.code}: {exc.detail}", file=sys.stderr)
            return EXIT_REJECTED
        finally:
            store.close()

    def _run(self, store: Store, args: argparse.Namespace, credential: str | None,
             show: bool) -> int:
        action = args.action
        if action == "credential":
            Mailbox(store, "").set_credential(args.agent_id, credential or "")
            if show:
                print(credential)
            return EXIT_OK
        mailbox = Mailbox(store, args.project if action != "project" else args.project_id)
        if action == "project":
            mailbox.create_project(args.dir, args.name)
            print(f"created project {mailbox.project_id}")
            return EXIT_OK
        if action == "agent":
            return _agent(mailbox, args, credential, show)
        if action == "agents":
            print(json.dumps({"agents": [
                {"id": a.id, "name": a.name, "status": a.status,
                 "lastSeen": iso(a.last_seen) if a.last_seen else None, "unread": a.unread,
                 "pending": a.pending} for a in mailbox.agents()]}, ensure_ascii=False,
                indent=1))
            return EXIT_OK
        if action == "token":
            return _token(mailbox, args)
        if action == "export":
            if args.layout == "agent-teams":
                from projections.mailbox.teams import export_team  # noqa: PLC0415

                written = export_team(mailbox, args.dir)
            else:
                written = export_tree(mailbox, args.dir)
            for path in written:
                print(path)
            return EXIT_OK
        from projections.mailbox.teams import is_team_dir  # noqa: PLC0415

        if is_team_dir(args.dir):
            return _import_team(mailbox, args)
        return _import_aipm(mailbox, args)


def _agent(mailbox: Mailbox, args: argparse.Namespace, credential: str | None,
           show: bool) -> int:
    mailbox.refresh()
    state = mailbox.log.session.lifecycle.mailbox
    if args.verb == "remove":
        mailbox.unassign(args.agent_id)
        print(f"removed {args.agent_id} from {mailbox.project_id}")
        return EXIT_OK
    if args.agent_id not in state.agents:
        mailbox.register_agent(args.agent_id, name=args.name, passkey=credential)
    elif credential is not None:
        mailbox.set_credential(args.agent_id, credential)
    if not state.assigned(mailbox.project_id, args.agent_id):
        mailbox.assign(args.agent_id)
    if show:
        print(credential)
    if state.credentials.get(args.agent_id) is None:
        print(f"convlog mailbox agent add: {args.agent_id} has no credential: it cannot "
              "authenticate over MCP until one is set (`convlog mailbox credential`)",
              file=sys.stderr)
    return EXIT_OK


def _token(mailbox: Mailbox, args: argparse.Namespace) -> int:
    if args.verb == "issue":
        if not 0 < args.ttl_hours <= 24 * 365:
            raise MailboxError("invalid_request", "--ttl-hours must be from 0 to 8760")
        print(mailbox.issue_token(args.agent_id, ttl_ms=int(args.ttl_hours * 3_600_000)))
        return EXIT_OK
    raw = (args.token_file.read_text(encoding="utf-8") if args.token_file is not None
           else sys.stdin.read())
    token = raw.strip()
    if not token:
        raise MailboxError("invalid_request", "no token given on standard input")
    mailbox.revoke(token)
    print("revoked")
    return EXIT_OK


def _plan_text(plan: dict[str, Any]) -> str:
    return json.dumps({"would_change": plan, "hint": "run again with --assign to make "
                       "these membership changes"}, ensure_ascii=False, indent=1)


def _import_aipm(mailbox: Mailbox, args: argparse.Namespace) -> int:
    report = import_tree(mailbox, args.dir, include_torn=args.include_torn, assign=args.assign)
    for refused in report.refused:
        print(f"convlog mailbox import: refused {refused}: outside {args.dir}", file=sys.stderr)
    if report.refused:
        return EXIT_USAGE
    if report.plan:
        print(_plan_text(report.plan))
        return EXIT_REJECTED
    print(json.dumps({
        "imported": report.imported, "already": report.already, "changed": report.changed,
        "torn": [{"id": t.id, "senderId": t.sender_id, "receiverId": t.receiver_id,
                  "has": t.has, "at": t.where} for t in report.torn],
        "conflicts": report.conflicts,
    }, ensure_ascii=False, indent=1))
    return EXIT_TORN if report.torn or report.conflicts else EXIT_OK


def _import_team(mailbox: Mailbox, args: argparse.Namespace) -> int:
    from projections.mailbox.teams import import_team  # noqa: PLC0415

    report = import_team(mailbox, args.dir, assign=args.assign)
    if report.plan:
        print(_plan_text(report.plan))
        return EXIT_REJECTED
    print(json.dumps({"imported": report.imported, "already": report.already,
                      "read": report.read, "config": report.config,
                      "changed": report.changed, "conflicts": report.conflicts},
                     ensure_ascii=False, indent=1))
    return EXIT_REJECTED if report.conflicts else EXIT_OK


MAILBOX = MailboxCommand()


class McpCommand:
    name = "mcp"
    help = "serve the agents' mailbox tools over MCP (stdio); needs convlog[mcp]"

    def configure(self, parser: argparse.ArgumentParser) -> None:
        _store_arg(parser)
        parser.add_argument("--allow-open-agents", action="store_true",
                            help="let agents without a credential authenticate with none "
                                 "(anything that can start this server can then act as "
                                 "them; off by default)")

    def run(self, args: argparse.Namespace) -> int:
        try:
            from projections.mailbox.mcp_server import serve_stdio  # noqa: PLC0415 - extra
        except ImportError as exc:
            print(f"convlog mcp: {exc}; install convlog[mcp]", file=sys.stderr)
            return EXIT_USAGE
        store = open_store(args.store)
        try:
            serve_stdio(store, require_credential=not args.allow_open_agents)
        finally:
            store.close()
        return EXIT_OK


MCP = McpCommand()
