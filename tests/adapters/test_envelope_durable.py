"""The stream's envelope is durable when the stream ends (issue 24): a process killed
(SIGKILL) while its messages wait for their tools, before ``complete()``, leaves a log
whose replay renders what the SDK accumulated, stop reason, usage, Responses status
and item statuses included, and tool arguments byte for byte."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.store import open_store
from projections import views as v
from projections.render import anthropic as render_anthropic
from projections.render import openai_chat as render_chat
from projections.withparts import WithPartsProjection
from tests.adapters.test_ingest_anthropic import sdk_message
from tests.adapters.test_ingest_openai_chat import chat_streams, comparable, sdk
from tests.adapters.test_ingest_openai_responses import rendered, sdk_response
from tests.support.anthropic_streams import anthropic_streams
from tests.support.responses_streams import responses_streams

ROOT = Path(__file__).resolve().parents[2]
CHILD = r'''
import json, os, signal, sys
from engine.adapters.anthropic import AnthropicIngest
from engine.adapters.openai_chat import OpenAIChatIngest
from engine.adapters.openai_responses import OpenAIResponsesIngest
from engine.session import Session
from engine.store import open_store
INGESTS = {"anthropic": AnthropicIngest, "chat": OpenAIChatIngest,
           "responses": OpenAIResponsesIngest}
cases = json.load(open(sys.argv[2]))
store = open_store(sys.argv[1])
for case in cases:
    s = Session.create(store, session_id=case["sid"])
    result = INGESTS[case["provider"]](s).ingest(case["events"])
    print(result.message_id, result.completed, flush=True)
os.kill(os.getpid(), signal.SIGKILL)  # before any complete(): the tools still wait
'''

PROVIDERS = {"anthropic": anthropic_streams(max_blocks=4), "chat": chat_streams(),
             "responses": responses_streams(max_items=4)}


@settings(max_examples=2, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture,
                                 HealthCheck.data_too_large])
@given(data=st.data())
def test_kill_before_complete_keeps_the_envelope(tmp_path: Path, data: st.DataObject) -> None:
    cases: list[dict[str, Any]] = []
    for provider, streams in PROVIDERS.items():
        for i in range(6):
            events = data.draw(streams)
            sid = f"0190a000-0000-7000-8000-{len(cases):012x}"
            cases.append({"provider": provider, "events": events, "sid": sid, "i": i})
    path = tmp_path / "cases.json"
    path.write_text(json.dumps(cases))
    url = f"sqlite:///{tmp_path}/log-{len(list(tmp_path.iterdir()))}.db"
    run = subprocess.run([sys.executable, "-c", CHILD, url, str(path)], cwd=ROOT,
                         capture_output=True, text=True, timeout=120, check=False)
    assert run.returncode == -signal.SIGKILL, run.stderr
    mids = [line.split()[0] for line in run.stdout.splitlines()]
    assert len(mids) == len(cases)
    store = open_store(url)
    try:
        for case, mid in zip(cases, mids, strict=True):
            proj = WithPartsProjection.replay(store, case["sid"])
            wp = proj.message(mid)
            assert isinstance(wp.info, v.AssistantInfo)
            if case["provider"] == "anthropic":
                assert render_anthropic.response(wp) == sdk_message(case["events"])
            elif case["provider"] == "chat":
                got = comparable(render_chat.response(wp))
                assert got == comparable(sdk(case["events"]))
            else:
                assert rendered(proj, mid) == sdk_response(case["events"])
    finally:
        store.close()
