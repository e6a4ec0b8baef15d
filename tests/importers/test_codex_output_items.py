"""A Codex tool output given as content items (codex-rs ``FunctionCallOutputPayload``
with ``content_items``: a view_image, an MCP tool's images): the text items are the
output and every ``input_image`` is an attachment of the completed tool, never only a
metadata entry the viewer does not show."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.importers.codex import plan_codex
from projections import views as v
from projections.timetravel import at
from tests.importers.support import written


def _rollout(output: Any) -> list[dict[str, Any]]:
    stamp = "2026-03-01T10:00:00.000Z"
    return [{"timestamp": stamp, "type": t, "payload": p} for t, p in [
        ("session_meta", {"id": "019c0d11-aaaa-7444-8555-666677778888", "cwd": "/w",
                          "cli_version": "0.110.0", "originator": "codex_cli_rs"}),
        ("response_item", {"type": "message", "role": "user",
                           "content": [{"type": "input_text", "text": "show it"}]}),
        ("response_item", {"type": "function_call", "name": "view_image",
                           "arguments": "{}", "call_id": "c1"}),
        ("response_item", {"type": "function_call_output", "call_id": "c1",
                           "output": output}),
        ("event_msg", {"type": "task_complete"}),
    ]]


ITEM = st.one_of(
    st.builds(lambda t: {"type": "input_text", "text": t}, st.text(max_size=10)),
    st.builds(lambda u: {"type": "input_image", "image_url": u},
              st.sampled_from(["data:image/png;base64,iVBORw0KGgo=",
                               "data:image/jpeg;base64,/9j/4A==", "https://example.invalid/a.png",
                               "data:;base64,AA==", "", "data:"])),
    st.builds(lambda k: {"type": k}, st.text("abcdef_", min_size=1, max_size=8)),
    st.none() | st.integers(),
)


@settings(max_examples=100, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(st.lists(ITEM, max_size=5))
def test_text_items_are_the_output_and_images_the_attachments(
        tmp_path: Path, items: list[Any]) -> None:
    path = Path(tempfile.mkdtemp(dir=tmp_path)) / "rollout-2026-03-01T10-00-00-x.jsonl"
    path.write_text("".join(json.dumps(x) + "\n" for x in _rollout(items)))
    plan = plan_codex(path)
    messages = at(written(plan), plan.sessions[0].id).messages()
    tool = next(p for m in messages for p in m.parts if isinstance(p, v.ToolPart))
    assert isinstance(tool.state, v.ToolStateCompleted)
    texts = [i["text"] for i in items if isinstance(i, dict) and i.get("type") == "input_text"]
    assert tool.state.output == ("\n".join(texts) or "(no output)")
    images = [i["image_url"] for i in items if isinstance(i, dict)
              and i.get("type") == "input_image" and i["image_url"]]
    assert [a.url for a in tool.state.attachments or []] == images
    assert all(a.mime for a in tool.state.attachments or [])
