"""Dump what the Claude Code and Q CLI importers write, to compare two trees byte for byte.

The Codex importer has its own (``benchmarks/codex_same_bytes.py``); this one covers the
formats whose foreign shapes were moved onto msgspec Structs in the same way. Run it
once in the tree before a change (a copy: ``git archive <commit> | tar -x -C
/tmp/before``, this file copied in) and once in the tree after, then compare the dumps::

    (cd /tmp/before && /path/to/.venv/bin/python -m benchmarks.import_same_bytes /tmp/a.json)
    .venv/bin/python -m benchmarks.import_same_bytes /tmp/b.json
    cmp /tmp/a.json /tmp/b.json

What it imports: every Claude Code fixture (each directory as a whole, so subagent,
teammate and fork links are exercised, and each file alone), every Q CLI fixture (the
``/save`` documents and the ``data.sqlite3`` directory), every OpenCode fixture (exports,
the data directory and each storage tree), every Gemini CLI fixture (each directory, and
each file alone), any extra paths given with ``--also`` / ``--also-qcli`` /
``--also-opencode`` / ``--also-gemini`` (a corpus, e.g. the files the junk fuzz made),
and the import benchmark's generated ``claude-code`` and ``claude-code-tools``
transcripts. For each: every stored event's encoded bytes (SHA-256, per session, in
order), the session list, and the import report's JSON, or the error the import raised,
strict and then lenient.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec

import engine
from benchmarks.importers import claude_code_lines, claude_code_tool_lines, generate
from engine.errors import ConvlogError
from engine.importers.base import Plan
from engine.importers.claude_code import plan_claude_code
from engine.importers.gemini import plan_gemini
from engine.importers.opencode import plan_opencode
from engine.importers.qcli import plan_qcli
from engine.importers.qcli_db import plan_qcli_db
from engine.importers.write import write_plan
from engine.store import MemoryStore

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "tests/fixtures"
Planner = Callable[[Path, bool], Plan]


def _claude(path: Path, lenient: bool) -> Plan:
    return plan_claude_code(path, lenient=lenient)


def _qcli(path: Path, _lenient: bool) -> Plan:
    return plan_qcli_db(path) if path.is_dir() or path.suffix == ".sqlite3" else plan_qcli(path)


def _opencode(path: Path, _lenient: bool) -> Plan:
    return plan_opencode(path)


def _gemini(path: Path, lenient: bool) -> Plan:
    return plan_gemini(path, lenient=lenient)


def claude_inputs() -> list[Path]:
    bases = [*sorted((FIXTURES / "transcripts").glob("claude*")),
             *sorted((FIXTURES / "real-cli").glob("claude-code-*")),
             *sorted((FIXTURES / "agent-teams").glob("*/transcripts"))]
    out: list[Path] = []
    for base in bases:
        out.append(base)
        out += sorted(base.rglob("*.jsonl"))
    return out


def qcli_inputs() -> list[Path]:
    base = FIXTURES / "transcripts"
    return [*sorted(base.glob("qcli*.json")), *sorted(base.glob("qcli-data"))]


def opencode_inputs() -> list[Path]:
    base = FIXTURES / "transcripts"
    return [*sorted((base / "opencode").glob("*.json")), base / "opencode-data",
            *sorted(base.glob("opencode-data/project/*/storage")),
            *sorted((FIXTURES / "real-cli").glob("opencode-*/transcripts/*.json"))]


def gemini_inputs() -> list[Path]:
    bases = [*sorted((FIXTURES / "transcripts").glob("gemini*")),
             *sorted((FIXTURES / "real-cli").glob("gemini-cli-*/transcripts/*"))]
    out: list[Path] = []
    for base in bases:  # each directory as a whole (subagents, logs), and each file alone
        out.append(base)
        out += sorted(f for f in base.rglob("*.json*") if f.suffix in (".json", ".jsonl"))
    return out


def dump(path: Path, planner: Planner, lenient: bool,
         encode: Callable[[Any], bytes] = msgspec.json.encode) -> dict[str, Any]:
    """What importing ``path`` writes: per session the event count and the SHA-256 of
    the events' bytes (``encode``: the in-memory event's JSON by default, which also
    sees a metadata object's key order), the session infos and the report; or the
    error."""
    try:
        plan = planner(path, lenient)
        store = MemoryStore()
        write_plan(store, plan)
    except (ConvlogError, OSError) as exc:
        return {"error": f"{type(exc).__name__}: {exc}"}
    except Exception as exc:  # an internal error (a crash) is what a change may mend
        return {"error": f"internal {type(exc).__name__}: {exc}"}
    sessions = {}
    for info in store.sessions():
        digest = hashlib.sha256()
        count = 0
        for e in store.read(info.id):
            digest.update(encode(e) + b"\n")
            count += 1
        sessions[info.id] = {"events": count, "sha256": digest.hexdigest(),
                             "info": repr(info)}
    return {"report": plan.report.to_json(), "sessions": sessions}


def dump_all(inputs: list[tuple[Path, Planner]]) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for path, planner in inputs:
        key = str(path.relative_to(ROOT) if path.is_relative_to(ROOT) else path)
        result[key] = {"strict": dump(path, planner, False),
                       "lenient": dump(path, planner, True)}
    return result


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--also", type=Path, action="append", default=[],
                        help="more Claude Code transcripts (a file or a directory)")
    parser.add_argument("--also-qcli", type=Path, action="append", default=[],
                        help="more Q CLI saves (a /save file or a data.sqlite3 directory)")
    parser.add_argument("--also-opencode", type=Path, action="append", default=[],
                        help="more OpenCode exports, storage trees, data dirs or .db files")
    parser.add_argument("--also-gemini", type=Path, action="append", default=[],
                        help="more Gemini CLI session files or directories")
    parser.add_argument("--mb", type=float, default=3.0, help="size of each generated file")
    args = parser.parse_args(argv)
    inputs: list[tuple[Path, Planner]] = [(p, _claude) for p in claude_inputs()]
    inputs += [(p, _qcli) for p in qcli_inputs()]
    for extra in args.also:
        inputs += [(p, _claude) for p in
                   (sorted(extra.rglob("*.jsonl")) if extra.is_dir() else [extra])]
    inputs += [(p, _qcli) for p in args.also_qcli]
    inputs += [(p, _opencode) for p in [*opencode_inputs(), *args.also_opencode]]
    inputs += [(p, _gemini) for p in [*gemini_inputs(), *args.also_gemini]]
    result = dump_all(inputs)
    with tempfile.TemporaryDirectory() as tmp:
        for name, lines in (("claude-code", claude_code_lines),
                            ("claude-code-tools", claude_code_tool_lines)):
            path = Path(tmp) / f"{name}.jsonl"
            generate(path, lines(int(args.mb * 1024 * 1024)))
            result[f"generated {name}"] = {"strict": dump(path, _claude, False)}
        # Report sources name the temporary directory, which differs on every run.
        text = json.dumps(result, indent=1, sort_keys=True, default=str).replace(tmp, "<tmp>")
    args.out.write_text(text.replace(str(ROOT), "<root>"))  # the two trees' own paths
    print(f"{len(result)} inputs dumped to {args.out} (engine from {engine.__file__})")
    return result


if __name__ == "__main__":
    main()
