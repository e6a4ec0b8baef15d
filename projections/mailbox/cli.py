"""``convlog mailbox export|import``: the seed's ``.ai-pm`` tree, from and to the log.

Plugged into ``convlog`` through the ``convlog.commands`` entry-point group.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from engine.cli import EXIT_OK, EXIT_REJECTED, EXIT_USAGE
from engine.store import DEFAULT_URL, open_store
from projections.mailbox.aipm import export_tree, import_tree
from projections.mailbox.mailbox import Mailbox

EXIT_TORN = EXIT_REJECTED  # the import found torn messages (reported, not hidden)


class MailboxCommand:
    name = "mailbox"
    help = "export or import a project's agent messages as the seed's .ai-pm files"

    def configure(self, parser: argparse.ArgumentParser) -> None:
        sub = parser.add_subparsers(dest="action", required=True)
        exp = sub.add_parser("export", help="write DIR/.ai-pm/agents/{agent}/chat.jsonl")
        exp.add_argument("dir", type=Path)
        exp.add_argument("--layout", choices=["ai-pm"], default="ai-pm")
        imp = sub.add_parser("import", help="read DIR/.ai-pm into the log, pairing copies")
        imp.add_argument("dir", type=Path)
        imp.add_argument("--include-torn", action="store_true",
                         help="also log messages only one side has")
        for p in (exp, imp):
            p.add_argument("--store", default=DEFAULT_URL, help="store URL")
            p.add_argument("--project", required=True, help="project id")

    def run(self, args: argparse.Namespace) -> int:
        if args.action == "import" and not args.dir.is_dir():  # before the store is opened
            print(f"convlog mailbox import: no such directory: {args.dir}", file=sys.stderr)
            return EXIT_USAGE
        store = open_store(args.store, create=args.action == "import")  # export only reads
        try:
            mailbox = Mailbox(store, args.project)
            if args.action == "export":
                for path in export_tree(mailbox, args.dir):
                    print(path)
                return EXIT_OK
            report = import_tree(mailbox, args.dir, include_torn=args.include_torn)
        finally:
            store.close()
        for refused in report.refused:
            print(f"convlog mailbox import: refused {refused}: outside {args.dir}", file=sys.stderr)
        if report.refused:
            return EXIT_USAGE
        print(json.dumps({
            "imported": report.imported, "already": report.already,
            "torn": [{"id": t.id, "senderId": t.sender_id, "receiverId": t.receiver_id,
                      "has": t.has, "at": t.where} for t in report.torn],
            "conflicts": report.conflicts,
        }, ensure_ascii=False, indent=1))
        return EXIT_TORN if report.torn or report.conflicts else EXIT_OK


MAILBOX = MailboxCommand()


class McpCommand:
    name = "mcp"
    help = "serve the agents' mailbox tools over MCP (stdio); needs convlog[mcp]"

    def configure(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--store", default=DEFAULT_URL, help="store URL")

    def run(self, args: argparse.Namespace) -> int:
        try:
            from projections.mailbox.mcp_server import serve_stdio  # noqa: PLC0415 - extra
        except ImportError as exc:
            print(f"convlog mcp: {exc}; install convlog[mcp]", file=sys.stderr)
            return EXIT_USAGE
        store = open_store(args.store)
        try:
            serve_stdio(store)
        finally:
            store.close()
        return EXIT_OK


MCP = McpCommand()
