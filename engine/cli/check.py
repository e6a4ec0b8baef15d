"""Commands that check or mend a stored log: ``verify``, ``anchor``, ``repair``."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from engine.cli import args as cli_args
from engine.cli import exits
from engine.cli.output import Progress, one_line
from engine.errors import StoreError
from engine.store import anchor as anchors
from engine.store import open_store
from engine.store.verify import Report


def _load_anchors(given: list[str]) -> list[anchors.Anchor]:
    """Each ``--against`` is a file of tokens (one a line) or a token itself."""
    found: list[anchors.Anchor] = []
    for item in given:
        path = Path(item)
        if not item.startswith(anchors.PREFIX) and path.is_file():
            try:
                text = path.read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError) as exc:
                raise StoreError(f"cannot read anchor file {item}: {exc}") from None
            found.extend(anchors.parse_many(text, f"anchor file {item}"))
        else:
            found.append(anchors.parse(item))
    return found


class VerifyCommand:
    name = "verify"
    help = ("check seqs, the hash chain, decoding and every transition of a stored log "
            "(and, with --against, that no tail was cut since an anchor was taken)")

    def configure(self, parser: argparse.ArgumentParser) -> None:
        cli_args.add_store(parser)
        parser.add_argument("--session", type=cli_args.session_id, metavar="ID",
                            help="one session (with its fork ancestry)")
        cli_args.add_key_file(parser)
        parser.add_argument("--against", action="append", default=[], metavar="FILE|TOKEN",
                            help="anchors printed earlier by `convlog anchor` (a file of "
                                 "tokens or one token; may be repeated)")
        parser.add_argument("--fast", action="store_true",
                            help="the chain walk only: seqs, every event's chain hash "
                                 "recomputed from its stored bytes (so content is proven, "
                                 "and anchors hold only for the content they were taken "
                                 "of), block links, heads, anchors and positions; it skips "
                                 "decoding events into the catalog, replaying their "
                                 "transitions and the id index")

    def run(self, args: argparse.Namespace) -> int:
        given = _load_anchors(args.against)  # a malformed anchor fails before any work
        store = open_store(args.store, key_file=args.key_file, create=False, read_only=True)
        progress = Progress("verify")
        try:
            report = anchors.check(store, given, args.session, progress=progress,
                                   deep=not args.fast)
            algorithm = store.chain.algorithm
        finally:
            progress.done()
            store.close()
        if not report.ok:
            return _failed(report)
        print(f"ok: {report.sessions} session(s), {report.events} event(s); chain {algorithm}"
              + (f"; {len(given)} anchor(s) hold" if given else "")
              + ("; chain walk only (--fast)" if args.fast else ""))
        for sid, (version, head) in report.heads.items():
            print(f"{sid} seq {version} head {head}")
        return exits.OK.code


def _failed(report: Report) -> int:
    first = report.first
    assert first is not None
    where = "store" if first.session_id == "*" else f"session {first.session_id}"
    seq = f" seq {first.seq}" if first.seq else ""
    print(one_line(f"convlog verify: FAILED at {where}{seq}: {first.reason}"), file=sys.stderr)
    for more in report.problems[1:]:
        print(f"  also: {one_line(str(more))}", file=sys.stderr)
    return exits.CORRUPT.code


class AnchorCommand:
    name = "anchor"
    help = ("verify, then print one anchor token per session (id, seq, chain hash; HMAC'd "
            "on a keyed store): keep them elsewhere for `verify --against`")

    def configure(self, parser: argparse.ArgumentParser) -> None:
        cli_args.add_store(parser)
        parser.add_argument("--session", type=cli_args.session_id, metavar="ID",
                            help="only this session")
        cli_args.add_key_file(parser)

    def run(self, args: argparse.Namespace) -> int:
        store = open_store(args.store, key_file=args.key_file, create=False,
                           read_only=True)
        try:
            taken = anchors.take(store, args.session)
        finally:
            store.close()
        for a in taken:
            print(a.token())
        return exits.OK.code


class RepairCommand:
    name = "repair"
    help = ("move damage a crash can leave (a torn last line of a JSONL session) to a "
            "`.corrupt` file beside it; reads never do this themselves")

    def configure(self, parser: argparse.ArgumentParser) -> None:
        cli_args.add_store(parser)
        parser.add_argument("--dry-run", action="store_true",
                            help="say what would be moved, change nothing")
        cli_args.add_key_file(parser)

    def run(self, args: argparse.Namespace) -> int:
        store = open_store(args.store, key_file=args.key_file, create=False)
        try:
            repair = getattr(store, "repair", None)
            if repair is None:
                print(f"nothing to repair: {args.store} writes each batch in one transaction, "
                      "so a crash leaves no torn tail (run `convlog verify` to check the log)")
                return exits.OK.code
            moved: list[tuple[str, int, int]] = repair(dry_run=args.dry_run)
        finally:
            store.close()
        verb = "would move" if args.dry_run else "moved"
        for sid, keep, cut in moved:
            print(f"{verb} the torn last line of session {sid} ({cut} bytes after byte {keep}) "
                  f"to sessions/{sid}.jsonl.corrupt")
        if not moved:
            print("nothing to repair: every session file ends with a whole line")
        return exits.OK.code
