"""``convlog migrate``: bring a store written by an earlier release to this release's
layout now, instead of at its first write (what any write does anyway)."""

from __future__ import annotations

import argparse

from engine.cli import args as cli_args
from engine.cli import exits
from engine.store import open_store


class MigrateCommand:
    name = "migrate"
    help = ("bring a store written by an earlier release to this release's layout now "
            "(its first write would); the events and their hashes are kept as they are")

    def configure(self, parser: argparse.ArgumentParser) -> None:
        cli_args.add_store(parser)
        cli_args.add_key_file(parser)

    def run(self, args: argparse.Namespace) -> int:
        store = open_store(args.store, key_file=args.key_file, create=False)
        try:
            changed = store.migrate()
        finally:
            store.close()
        if changed:
            print(f"migrated {args.store} to this release's layout")
        else:
            print(f"nothing to migrate: {args.store} already has this release's layout")
        return exits.OK.code
