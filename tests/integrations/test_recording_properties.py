"""Properties of recording through the real SDK: it changes nothing the agent sees, loses nothing.

Over generated Anthropic streams (every block kind the SDK knows), served as
SSE and parsed by the real client, possibly cut at any event:

- the agent receives exactly the events an unrecorded client gives;
- a whole stream is recorded as the direct ingest of the same events records it;
- a cut stream leaves a settled message holding every text delta that arrived.
"""

from __future__ import annotations

from typing import Any

import anthropic
import httpx2
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.adapters.anthropic import AnthropicIngest
from engine.integrations.anthropic import record_anthropic
from projections import views as v
from projections.render import anthropic as render
from tests.support.anthropic_streams import anthropic_streams
from tests.support.fake_sse import FakeServer, Reply
from tests.support.ingest_checks import fresh

JSON = dict[str, Any]
SETTINGS = settings(max_examples=60, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow])


def consume(client: Any) -> tuple[list[JSON], BaseException | None]:
    seen: list[JSON] = []
    try:
        for event in client.messages.create(model="m", max_tokens=1, messages=[],
                                            stream=True):
            seen.append(event.to_dict())
    except (anthropic.APIError, httpx2.HTTPError) as exc:  # the SDK's error, or the cut itself
        return seen, exc
    return seen, None


@SETTINGS
@given(anthropic_streams(max_blocks=4), st.data())
def test_recording_is_transparent_and_exact(events: list[JSON], data: st.DataObject) -> None:
    cut = data.draw(st.none() | st.integers(0, len(events) - 1), label="cut_after")
    plain, plain_err = consume(FakeServer([Reply(events, cut_after=cut)]).anthropic())

    session, view = fresh()
    client = record_anthropic(FakeServer([Reply(events, cut_after=cut)]).anthropic(), session)
    seen, err = consume(client)
    assert seen == plain
    assert type(err) is type(plain_err)

    direct_session, direct_view = fresh()
    direct = AnthropicIngest(direct_session)
    if cut is None:
        direct.ingest(seen)
        [recorded] = view.messages()
        [expected] = direct_view.messages()
        assert render.response(recorded) == render.response(expected)
        return
    if not seen:
        assert view.messages() == []  # nothing arrived, nothing recorded
        return
    [recorded] = view.messages()
    assert isinstance(recorded.info, v.AssistantInfo)
    assert recorded.info.error is not None
    assert recorded.info.error.kind == "aborted"
    streamed = "".join(e["delta"]["text"] for e in seen
                       if e["type"] == "content_block_delta"
                       and e["delta"]["type"] == "text_delta")
    kept = "".join(p.text for p in recorded.parts
                   if isinstance(p, v.TextPart) and not p.ignored)
    assert kept.startswith(streamed) or streamed.startswith(kept)
    assert len(kept) >= len(streamed)
