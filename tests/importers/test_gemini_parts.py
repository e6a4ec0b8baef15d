"""Gemini CLI records whose content and tool results are any PartListUnion (a string, one
part, a list of parts and strings) with files (inlineData, fileData)."""

from __future__ import annotations

import json
from pathlib import Path

from engine.importers.gemini import plan_gemini
from projections import views as v
from projections.timetravel import at
from tests.importers.support import written


def session(path: Path, records: list[dict[str, object]]) -> Path:
    meta = {"sessionId": "p1", "projectHash": "h", "startTime": "2026-03-01T09:00:00Z"}
    path.write_text("".join(json.dumps(r) + "\n" for r in [meta, *records]))
    return path


def test_every_shape_of_content_and_result(tmp_path: Path) -> None:
    path = session(tmp_path / "session-x.jsonl", [
        {"id": "u1", "timestamp": "2026-03-01T09:00:01Z", "type": "user",
         "content": {"text": "one part"}},
        {"id": "u2", "timestamp": "2026-03-01T09:00:02Z", "type": "user",
         "content": ["a string, ", {"text": "a part"},
                     {"fileData": {"mimeType": "application/pdf", "fileUri": "gs://b/spec.pdf"}},
                     {"videoMetadata": {}}]},
        {"id": "g1", "timestamp": "2026-03-01T09:00:03Z", "type": "gemini",
         "content": [{"text": "drew it"},
                     {"inlineData": {"mimeType": "image/png", "data": "iVBO"}}],
         "toolCalls": [{"id": "c1", "name": "run", "args": {}, "status": "success",
                        "result": [{"functionResponse": {"id": "c1", "name": "run",
                                                         "response": {"output": "ok"}}},
                                   {"text": "and a note"}]}]},
    ])
    plan = plan_gemini(path)
    store = written(plan)
    one, two, reply = at(store, plan.sessions[0].id).messages()
    assert [p.text for p in one.parts if isinstance(p, v.TextPart)] == ["one part"]
    assert [p.text for p in two.parts if isinstance(p, v.TextPart)] == ["a string, a part"]
    assert [(p.mime, p.url) for p in two.parts if isinstance(p, v.FilePart)] == [
        ("application/pdf", "gs://b/spec.pdf")]
    assert [(p.mime, p.url) for p in reply.parts if isinstance(p, v.FilePart)] == [
        ("image/png", "data:image/png;base64,iVBO")]
    tool = next(p for p in reply.parts if isinstance(p, v.ToolPart))
    assert isinstance(tool.state, v.ToolStateCompleted)
    assert tool.state.output == "ok\nand a note"
    assert "a content part ['videoMetadata']: not mapped (text and files only)" in (
        plan.report.unmapped)
