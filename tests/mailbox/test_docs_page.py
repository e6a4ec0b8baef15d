"""docs/mailbox.md states the error table engine.mailbox.ERRORS holds."""

from __future__ import annotations

import re
from pathlib import Path

from engine.mailbox import ERRORS

PAGE = Path(__file__).resolve().parents[2] / "docs" / "mailbox.md"


def test_the_error_table_is_the_code() -> None:
    rows = re.findall(r"^\| `(\w+)` \| (\d{3}) \|", PAGE.read_text(encoding="utf-8"), re.M)
    assert {code: int(status) for code, status in rows} == {
        code: status for code, (status, _) in ERRORS.items()}


def test_the_tool_table_lists_the_servers_tools() -> None:
    from engine.store import MemoryStore  # noqa: PLC0415
    from projections.mailbox.mcp_server import build_server  # noqa: PLC0415 - the extra

    text = PAGE.read_text(encoding="utf-8")
    documented = set(re.findall(r"^\| `(\w+)` \| `", text, re.M)) - set(ERRORS)
    server = build_server(MemoryStore())
    import asyncio  # noqa: PLC0415

    tools = asyncio.run(server.list_tools())
    assert documented == {t.name for t in tools}
