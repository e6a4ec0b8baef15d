"""docs/cli.md's reference block is generated from the parsers and the exit-code table:
every command, flag and exit code is there, and an edit to either makes it stale."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from engine import docgen
from engine.cli import EXIT_CODES, all_commands, build_parser
from engine.cli import reference as cli_reference

DOCS = Path(__file__).resolve().parents[2] / "docs"


def test_every_command_flag_and_exit_code_is_documented() -> None:
    page = (DOCS / "cli.md").read_text(encoding="utf-8")
    block = page[page.index(cli_reference.BEGIN):page.index(cli_reference.END)]
    for code in EXIT_CODES:
        assert f"| {code.code} | `{code.name}` |" in block
    top = build_parser(all_commands())
    sub = next(a for a in top._actions if isinstance(a, argparse._SubParsersAction))
    assert {"append", "anchor", "demo", "repair", "show", "tail", "verify"} <= set(sub.choices)
    for name, parser in sub.choices.items():
        section = block[block.index(f"### `convlog {name}`"):]
        for action in parser._actions:
            for flag in action.option_strings:
                if flag not in ("-h", "--help"):
                    assert f"`{flag}`" in section, (name, flag)


def test_a_changed_flag_makes_the_page_stale(monkeypatch: pytest.MonkeyPatch,
                                             tmp_path: Path) -> None:
    page = tmp_path / "cli.md"
    page.write_text((DOCS / "cli.md").read_text(encoding="utf-8"), encoding="utf-8")
    assert page not in docgen.stale(tmp_path)
    real = cli_reference.render_reference
    monkeypatch.setattr(cli_reference, "render_reference",
                        lambda: real().replace("snapshot every K events", "every K"))
    assert page in docgen.stale(tmp_path)


def test_the_generated_block_keeps_the_prose_around_it() -> None:
    text = "# Title\n\nprose\n\n## Reference\n\n" + cli_reference.BEGIN + "\nold\n" + \
        cli_reference.END + "\n\nafter\n"
    spliced = cli_reference.splice(text)
    assert spliced.startswith("# Title\n\nprose\n")
    assert spliced.endswith("\nafter\n")
    assert "\nold\n" not in spliced
    assert cli_reference.splice(spliced) == spliced
