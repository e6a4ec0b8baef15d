"""Claude Code content blocks as real transcripts carry them: PDFs and images the user
attached, a Read of an image, a failed request logged as an assistant line
(``isApiErrorMessage``), server tool blocks and citations. Before, the PDF and the
server blocks were dropped (only counted), an image result read "(no output)" with
its base64 in metadata, and the API's error text became the model's own words."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.importers.claude_code import plan_claude_code
from projections import views as v
from projections.render import anthropic
from projections.timetravel import at
from tests.importers.support import FIXTURES, written

BLOCKS = next((FIXTURES / "claude-code-blocks").glob("*.jsonl"))


def _imported(path: Path) -> tuple[list[v.WithParts], Any]:
    plan = plan_claude_code(path)
    return at(written(plan), plan.report.sessions[0].id).messages(), plan.report


def test_attached_pdf_and_image_are_file_parts() -> None:
    history, _ = _imported(BLOCKS)
    files = [p for p in history[0].parts if isinstance(p, v.FilePart)]
    assert [(f.mime, f.url) for f in files] == [
        ("application/pdf", "data:application/pdf;base64,JVBERi0="),
        ("image/png", "data:image/png;base64,iVBORw0KGgo=")]


def test_an_image_tool_result_is_an_attachment() -> None:
    history, report = _imported(BLOCKS)
    read = next(p for p in history[1].parts if isinstance(p, v.ToolPart) and p.tool == "Read")
    assert isinstance(read.state, v.ToolStateCompleted)
    assert [a.url for a in read.state.attachments or []] == ["data:image/png;base64,iVBORw0KGgo="]
    assert "content" not in (read.state.metadata or {})["claude_code"]  # not kept twice
    assert not any("empty tool result" in k for k in report.unmapped)


def test_an_api_error_line_is_the_messages_error_and_never_sent_back() -> None:
    history, _ = _imported(BLOCKS)
    failed = history[3]
    assert isinstance(failed.info, v.AssistantInfo)
    assert failed.info.error is not None
    assert (failed.info.error.kind, failed.info.error.status_code) == ("api", 529)
    sent = anthropic.messages(history)
    assert not any("API Error" in json.dumps(m) for m in sent)


def test_server_blocks_and_citations_go_back_to_anthropic_as_they_came() -> None:
    history, _ = _imported(BLOCKS)
    source = [json.loads(x) for x in BLOCKS.read_text().splitlines()]
    search_turn = next(r for r in source if r.get("uuid") == "a5")["message"]["content"]
    sent = anthropic.messages(history)
    assert sent[3]["content"] == search_turn


# Assistant blocks of any shape the Messages API has or may add: the Anthropic response
# rendered from the import is exactly what the transcript held (the class of loss: a block type the
# importer did not know was counted and dropped).
TEXT = st.text(min_size=1, max_size=8)
FIELDS = st.dictionaries(st.sampled_from(["id", "input", "content", "data", "extra"]),
                         st.none() | TEXT | st.lists(TEXT, max_size=2), max_size=3)
BLOCK = st.one_of(
    st.builds(lambda t: {"type": "text", "text": t}, TEXT),
    st.builds(lambda t, c: {"type": "text", "text": t, "citations": [{"cited_text": c}]},
              TEXT, TEXT),
    st.builds(lambda t, s: {"type": "thinking", "thinking": t, "signature": s}, TEXT, TEXT),
    st.builds(lambda d: {"type": "redacted_thinking", "data": d}, TEXT),
    st.builds(lambda kind, fields: {**fields, "type": kind},
              st.sampled_from(["server_tool_use", "web_search_tool_result",
                               "web_fetch_tool_result", "container_upload", "future_block"]),
              FIELDS),
)


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(BLOCK, min_size=1, max_size=5))
def test_any_assistant_blocks_round_trip_to_anthropic(tmp_path: Path,
                                                      blocks: list[dict[str, Any]]) -> None:
    def line(**fields: Any) -> str:
        return json.dumps({"sessionId": "s", "timestamp": "2025-10-05T10:00:00Z", **fields})

    path = tmp_path / "s.jsonl"
    path.write_text("\n".join([
        line(type="user", uuid="u", parentUuid=None, message={"role": "user", "content": "q"}),
        *[line(type="assistant", uuid=f"a{i}", parentUuid=f"a{i - 1}" if i else "u",
               message={"id": "msg_1", "role": "assistant", "model": "claude-sonnet-4-5",
                        "content": [b], "stop_reason": "end_turn" if i == len(blocks) - 1
                        else None})
          for i, b in enumerate(blocks)]]) + "\n")
    history, _ = _imported(path)
    assert anthropic.response(history[1])["content"] == blocks


def test_a_tool_result_of_tool_references_outputs_the_names(tmp_path: Path) -> None:
    """A tool search answers with the Messages API's ``tool_reference`` blocks
    (``{type, tool_name}``) and no text: the names are the output, not "(no output)"."""
    env = {"isSidechain": False, "userType": "external", "cwd": "/w", "sessionId": "s",
           "version": "2.1.100", "timestamp": "2026-09-01T10:00:00.000Z"}
    refs = [{"type": "tool_reference", "tool_name": "mcp__mail__send"},
            {"type": "tool_reference", "tool_name": "mcp__mail__read"}]
    lines = [
        {**env, "parentUuid": None, "uuid": "u1", "type": "user",
         "message": {"role": "user", "content": "find the mail tools"}},
        {**env, "parentUuid": "u1", "uuid": "u2", "type": "assistant",
         "message": {"id": "msg_1", "role": "assistant", "model": "m", "stop_reason": "tool_use",
                     "content": [{"type": "tool_use", "id": "toolu_1", "name": "ToolSearch",
                                  "input": {"query": "mail"}}]}},
        {**env, "parentUuid": "u2", "uuid": "u3", "type": "user",
         "message": {"role": "user", "content": [{"type": "tool_result",
                                                  "tool_use_id": "toolu_1", "content": refs}]}},
    ]
    path = tmp_path / "s.jsonl"
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    history, report = _imported(path)
    search = next(p for p in history[1].parts if isinstance(p, v.ToolPart))
    assert isinstance(search.state, v.ToolStateCompleted)
    assert search.state.output == "mcp__mail__send\nmcp__mail__read"
    assert (search.state.metadata or {})["claude_code"]["content"] == refs  # kept whole
    assert not any("empty tool result" in k for k in report.unmapped)
