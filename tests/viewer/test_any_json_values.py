"""The viewer's JSON and the export hold what the log holds (issue 24): integers past
64 bits and lone surrogates (each written as its escape, valid UTF-8)."""

from __future__ import annotations

import json

from starlette.testclient import TestClient

from engine.session import Session
from engine.store import open_store
from projections.serve.app import create_app
from projections.serve.export import export_data, script_json
from projections.timetravel import at
from tests.support.browser import LOOPBACK

BIG = 2**70
HALF = "half \ud83d"


def test_viewer_json_and_export_keep_big_ints_and_lone_surrogates() -> None:
    store = open_store("memory://")
    s = Session.create(store)
    m = s.start_message("assistant")
    text = s.add_text(m, HALF)
    s.end_part(text)
    ref = s.add_tool(m, "c1", "calc")
    s.tool_input_ready(ref, {"n": BIG, "s": HALF})
    s.start_tool(ref)
    s.complete_tool(ref, output=HALF, metadata={"product": -BIG})
    c = TestClient(create_app(store), base_url=LOOPBACK)
    r = c.get(f"/api/sessions/{s.id}/state", params={"seq": s.version})
    assert r.status_code == 200, r.text
    r.content.decode("utf-8")  # valid UTF-8
    got = json.loads(r.content)
    assert got["messages"] == json.loads(json.dumps(at(store, s.id).to_json()))
    assert "half \\ud83d" in r.text  # its escape
    assert str(BIG) in r.text
    page = script_json(export_data(store, s.id))
    page.encode("utf-8")
    assert json.loads(page)["session"]["events"][-1]["metadata"] == {"product": -BIG}
