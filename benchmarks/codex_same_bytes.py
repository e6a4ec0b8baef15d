"""Dump what the Codex importer writes, to compare two trees byte for byte.

Run it once in the tree before a change (a copy: ``git archive <commit> | tar -x
-C /tmp/before``, this file copied in) and once in the tree after, then compare
the two dumps (``cmp``); a speed-up of the importer must leave them equal::

    (cd /tmp/before && /path/to/.venv/bin/python -m benchmarks.codex_same_bytes /tmp/a.json)
    .venv/bin/python -m benchmarks.codex_same_bytes /tmp/b.json
    cmp /tmp/a.json /tmp/b.json

What it imports: every Codex fixture (each file, and each fixture directory as a
whole, so subagent and fork links are exercised), any extra files or directories
given with ``--also`` (a corpus captured from the tests), and the benchmark's
generated ``codex`` and ``codex-tools`` rollouts. For each: every stored event's
canonical bytes (what every store keeps and chains: a JSON object's keys sorted), in
order, per session, and the import report's JSON (or the error an import raised,
strict and then lenient).
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path
from typing import Any

import engine
from benchmarks.import_same_bytes import dump
from benchmarks.importers import codex_lines, codex_tool_lines, generate
from engine.codec import canonical
from engine.importers.codex import plan_codex

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = [ROOT / "tests/fixtures/transcripts", ROOT / "tests/fixtures/real-cli"]


def _inputs(also: list[Path]) -> list[Path]:
    out: list[Path] = []
    for base in FIXTURES:
        for d in sorted(base.glob("codex*")):
            out.append(d)
            out += sorted(d.rglob("*.jsonl"))
    for extra in also:
        out += sorted(extra.rglob("*.jsonl")) if extra.is_dir() else [extra]
    return out


def _dump(path: Path, lenient: bool) -> dict[str, Any]:
    # The stored bytes, not the in-memory event: a Struct does not keep the file's key
    # order, and every store reads metadata back with its keys sorted.
    return dump(path, lambda p, loose: plan_codex(p, lenient=loose),
                lenient, canonical)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--also", type=Path, action="append", default=[])
    parser.add_argument("--mb", type=float, default=3.0, help="size of each generated file")
    args = parser.parse_args(argv)
    result: dict[str, Any] = {}
    for path in _inputs(args.also):
        key = str(path.relative_to(ROOT) if path.is_relative_to(ROOT) else path)
        result[key] = {"strict": _dump(path, False), "lenient": _dump(path, True)}
    with tempfile.TemporaryDirectory() as tmp:
        for name, lines in (("codex", codex_lines), ("codex-tools", codex_tool_lines)):
            path = Path(tmp) / f"rollout-{name}.jsonl"
            generate(path, lines(int(args.mb * 1024 * 1024)))
            result[f"generated {name}"] = {"strict": _dump(path, False)}
        # Report sources name the temporary directory, which differs on every run.
        text = json.dumps(result, indent=1, sort_keys=True, default=str).replace(tmp, "<tmp>")
    args.out.write_text(text.replace(str(ROOT), "<root>"))  # the two trees' own paths
    print(f"{len(result)} inputs dumped to {args.out} (engine from {engine.__file__})")


if __name__ == "__main__":
    main()
