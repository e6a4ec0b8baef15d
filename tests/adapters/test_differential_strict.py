"""Issue 24's differential: generated provider streams, messages left waiting for their
tools (never completed), read back from a SQLite store and rendered, compared with the
SDKs' own accumulators strictly: argument text byte for byte (not as parsed JSON
values) and the envelope whole. Chat streams also carry a call whose arguments hold
an integer past 64 bits, an escaped lone surrogate and a non-ASCII escape."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from openai import omit
from openai.lib.streaming.responses._responses import ResponseStreamState

from engine.adapters.anthropic import AnthropicIngest
from engine.adapters.openai_chat import OpenAIChatIngest
from engine.adapters.openai_responses import OpenAIResponsesIngest
from engine.session import Session
from engine.store import Store, open_store
from projections.render import anthropic as render_anthropic
from projections.render import openai_chat as render_chat
from projections.render import openai_responses as render_responses
from projections.withparts import WithPartsProjection
from tests.adapters.test_ingest_anthropic import sdk_message
from tests.adapters.test_ingest_openai_chat import chat_streams, sdk
from tests.adapters.test_ingest_openai_responses import _SDK_ONLY, sdk_objects
from tests.support.anthropic_streams import anthropic_streams
from tests.support.responses_streams import responses_streams

JSON = dict[str, Any]
STRICT = settings(max_examples=300, deadline=None,
                  suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                         HealthCheck.function_scoped_fixture])
ODD_ARGS = '{"id": 1' + "0" * 30 + ', "h": "\\ud800", "l\\u00ednea": -9223372036854775809}'


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Store]:
    path: Path = tmp_path_factory.mktemp("diff") / "log.db"
    s = open_store(f"sqlite:///{path}")
    yield s
    s.close()


def replayed(store: Store, ingest: Any, events: list[JSON]) -> tuple[Any, str]:
    session = Session.create(store)
    result = ingest(session).ingest(copy.deepcopy(events))
    return WithPartsProjection.replay(store, session.id), result.message_id


def no_nulls(value: Any) -> Any:
    """The SDK's own nulls dropped (it re-dumps its models: fields never sent)."""
    if isinstance(value, dict):
        return {k: no_nulls(x) for k, x in value.items() if x is not None}
    if isinstance(value, list):
        return [no_nulls(x) for x in value]
    return value


def without_sdk_only(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: without_sdk_only(x) for k, x in value.items()
                if not (k in _SDK_ONLY and x is None)}
    if isinstance(value, list):
        return [without_sdk_only(x) for x in value]
    return value


@STRICT
@given(events=anthropic_streams())
def test_anthropic(store: Store, events: list[JSON]) -> None:
    proj, mid = replayed(store, AnthropicIngest, events)
    assert render_anthropic.response(proj.message(mid)) == sdk_message(events)


def with_odd_call(chunks: list[JSON]) -> list[JSON]:
    """A call with awkward arguments, streamed in three fragments before the finish."""
    if not chunks:
        return chunks
    finish = next((i for i, c in enumerate(chunks) if c.get("choices")
                   and c["choices"][0].get("finish_reason")), None)
    if finish is None:
        return chunks
    head = {k: x for k, x in chunks[0].items() if k != "choices"}
    index = 1 + max((t.get("index", 0) for c in chunks for ch in c.get("choices") or ()
                     for t in (ch.get("delta") or {}).get("tool_calls") or ()), default=-1)

    def call(part: JSON) -> JSON:
        return {**head, "choices": [{"index": 0, "finish_reason": None,
                                     "delta": {"tool_calls": [{"index": index, **part}]}}]}
    odd = [call({"id": "call_odd", "type": "function",
                 "function": {"name": "odd", "arguments": ODD_ARGS[:7]}}),
           call({"function": {"arguments": ODD_ARGS[7:40]}}),
           call({"function": {"arguments": ODD_ARGS[40:]}})]
    return chunks[:finish] + odd + chunks[finish:]


@STRICT
@given(chunks=chat_streams())
def test_chat(store: Store, chunks: list[JSON]) -> None:
    chunks = with_odd_call(chunks)
    proj, mid = replayed(store, OpenAIChatIngest, chunks)
    mine = render_chat.response(proj.message(mid))
    assert no_nulls(mine) == no_nulls(sdk(chunks))


@STRICT
@given(events=responses_streams())
def test_responses(store: Store, events: list[JSON]) -> None:
    proj, mid = replayed(store, OpenAIResponsesIngest, events)
    state: Any = ResponseStreamState(input_tools=omit, text_format=omit)
    final: Any = None
    for e in sdk_objects(events):
        for out in state.handle_event(e):
            if out.type in ("response.completed", "response.incomplete"):
                final = out.response
    mine = render_responses.response(proj.message(mid))
    assert without_sdk_only(mine) == without_sdk_only(final.to_dict())
